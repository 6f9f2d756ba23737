//! The API called in process (`tower::ServiceExt::oneshot`): its two
//! routers on a Postgres database and a Redis prefix of their own,
//! prepared as at start, with a key, and a pool on the read model for
//! tests that write its rows by hand.

// Each test binary uses the parts it needs.
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::Router;
use clap::Parser;
use ratewire_api::access::key_records::{self, NewKey};
use ratewire_api::redis_guard::RedisGuard;
use ratewire_api::{app, db, routes, Config};
use ratewire_service::testing::TestDatabase;
use sqlx::PgPool;
use tower::ServiceExt;

/// The operator token of every in-process API.
pub const ADMIN_TOKEN: &str = "in-process-test-admin-token-0123456789";

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

pub struct InProcess {
    pub public: Router,
    pub operator: Router,
    /// A pool on the read model (migrated, empty).
    pub read: PgPool,
    /// A key on `plan` (the default plan when `None`).
    pub key: String,
    /// Dropped last, with the routers' connections.
    _database: TestDatabase,
}

impl InProcess {
    /// An API on a database named after `name`, its key on `plan`.
    pub async fn start(name: &str, plan: Option<&str>) -> Self {
        let database = TestDatabase::create(name).await.unwrap();
        let id = &database.name()[name.len() + 1..];
        let url = database.url();
        let config = Args::parse_from([
            "ratewire-api",
            "--database-url",
            &url,
            "--redis-prefix",
            &format!("{}-{id}:", name.replace('_', "-")),
            "--admin-token",
            ADMIN_TOKEN,
        ])
        .config;
        // The read model is the projector's to migrate; an empty one here.
        let read = ratewire_readmodel::db::pool(&url, &config.read_model.read_schema, 2).unwrap();
        ratewire_readmodel::db::migrate(&read, &config.read_model.read_schema)
            .await
            .unwrap();
        // Fixtures write boards of any month without the fold.
        ratewire_readmodel::board_months::one_for_all(&read)
            .await
            .unwrap();
        let pool = db::pool(&url, &config.schema).unwrap();
        let redis = RedisGuard::new(
            ratewire_readmodel::redis::connect(&config.read_model.redis_url).unwrap(),
            std::time::Duration::from_millis(config.redis_budget_ms),
        );
        let state = app::state(&config, pool.clone(), redis).unwrap();
        let prepared = state
            .readiness
            .prepare("preparing", &Default::default(), || {
                app::prepare(&state, &config.schema)
            })
            .await;
        assert!(prepared);
        let new = NewKey {
            name: format!("{name} tests"),
            plan: plan.map(str::to_owned),
        };
        let created = key_records::create(&pool, &config.plans, new)
            .await
            .unwrap();
        Self {
            public: routes::public(state.clone()),
            operator: routes::operator(state),
            read,
            key: created.key,
            _database: database,
        }
    }

    /// GET `uri` on the public router with the key and `headers`: the
    /// status, headers and body.
    pub async fn call(
        &self,
        uri: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, String) {
        let mut request = Request::get(uri).header("x-api-key", &self.key);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (status, headers, bytes) =
            send(&self.public, request.body(Body::empty()).unwrap()).await;
        (status, headers, String::from_utf8(bytes).unwrap())
    }
}

/// `request` answered by `router`: the status, headers and body bytes.
pub async fn send(router: &Router, request: Request<Body>) -> (StatusCode, HeaderMap, Vec<u8>) {
    let response = router.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    (parts.status, parts.headers, bytes.to_vec())
}
