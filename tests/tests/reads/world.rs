//! A world in process, for tests whose subject is what the API answers: a
//! database and a Redis prefix of its own, the read model migrated, events
//! folded by the projector's own fold and its views written by the
//! projector's own renderer, and the API's routers called without a socket
//! (`tower::ServiceExt::oneshot`). No binary, broker or port: a test starts
//! in milliseconds, and what it reads is there the moment the call that
//! made it returns.
//!
//! Events are what ingest would publish: banks registered and changed as
//! its operator endpoints write them, boards as its parser reads a
//! [`Board`]. What the path from a push to an answer does (ingest, the log,
//! the projector's consumer) is the `Stack`'s to test.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{bail, ensure, Context, Result};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Method, Request};
use axum::Router;
use clap::Parser;
use ratewire_api::redis_guard::RedisGuard;
use ratewire_projector::fold::{apply_batch, Incoming};
use ratewire_projector::views::rebuild::rebuild_views;
use ratewire_projector::views::RedisViews;
use ratewire_proto::{
    BankDeactivated, BankId, BankReactivated, BankRegistered, BankUpdated, Envelope, Event,
    SocialLink,
};
use serde_json::{json, Value};
use sqlx::PgPool;
use tower::ServiceExt;

use ratewire_e2e::contract::Contract;
use ratewire_e2e::{eventually, Board, ADMIN_TOKEN, POSTGRES, REDIS};

/// The API's settings, read as its process reads them.
#[derive(Parser)]
struct ApiArgs {
    #[command(flatten)]
    config: ratewire_api::Config,
}

/// An answer of the in-process API.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (`null` when empty or not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value ("" when absent).
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

/// A world to make: [`World::builder`], API settings, then
/// [`WorldBuilder::start`].
#[derive(Debug, Default)]
#[must_use = "a builder makes nothing until `start` is awaited"]
pub struct WorldBuilder {
    args: Vec<String>,
}

impl WorldBuilder {
    /// An API setting, as its command-line flag (`--series-page-points`).
    pub fn arg(mut self, flag: &str, value: &str) -> Self {
        self.args.extend([flag.to_owned(), value.to_owned()]);
        self
    }

    pub async fn start(self) -> Result<World> {
        World::start(self.args).await
    }
}

pub struct World {
    public: Router,
    operator: Router,
    /// The active read-model generation's schema, as the fold writes it.
    read: PgPool,
    views: RedisViews,
    topic: String,
    /// The next offset of the world's one partition.
    offset: i64,
    /// The id the next bank registered gets.
    next_bank: i64,
    /// The API's OpenAPI document, once the world is made.
    contract: Option<Contract>,
    database: String,
    redis_prefix: String,
    /// What the API logged.
    log: Arc<Mutex<Vec<u8>>>,
    _logging: tracing::subscriber::DefaultGuard,
}

impl World {
    /// A world with the API's default settings.
    pub async fn new() -> Result<World> {
        Self::builder().start().await
    }

    pub fn builder() -> WorldBuilder {
        WorldBuilder::default()
    }

    async fn start(args: Vec<String>) -> Result<World> {
        let log = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&log);
        let logging = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_env_filter("info")
                .with_ansi(false)
                .with_writer(move || Captured(Arc::clone(&writer)))
                .finish(),
        );
        let template = template().await?;
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let database = format!("rw_world_{id}");
        let admin = PgPool::connect(&format!("{POSTGRES}/postgres")).await?;
        // A copy of the migrated template: what the processes would make
        // at their first start, made once.
        eventually("a copy of the template", TEMPLATE_FREE_WITHIN, || async {
            let copy = format!("CREATE DATABASE {database} TEMPLATE {template}");
            match sqlx::query(&copy).execute(&admin).await {
                Ok(_) => Some(Ok(())),
                Err(e) if in_use(&e) => None,
                Err(e) => Some(Err(e)),
            }
        })
        .await??;
        admin.close().await;
        let redis_prefix = format!("rwworld:{id}:");
        let prepared = Prepared::new(&database, &redis_prefix, args).await?;
        let mut world = World {
            public: ratewire_api::routes::public(prepared.state.clone()),
            operator: ratewire_api::routes::operator(prepared.state),
            read: prepared.read,
            views: prepared.views,
            topic: format!("rw-world-{id}"),
            offset: 0,
            next_bank: 1,
            contract: None,
            database,
            redis_prefix,
            log,
            _logging: logging,
        };
        let document = world
            .send(Request::get("/api/v1/openapi.json"), None)
            .await?;
        ensure!(
            document.status == 200,
            "no OpenAPI document: {}",
            document.text()
        );
        world.contract = Some(Contract::new(document.json()));
        world.views_written().await?;
        Ok(world)
    }

    /// A key on the enterprise plan, so that no test meets a limit it did
    /// not look for.
    pub async fn api_key(&self, name: &str) -> Result<String> {
        self.api_key_on(name, "enterprise").await
    }

    /// A key on `plan`, made through the operator endpoint.
    pub async fn api_key_on(&self, name: &str, plan: &str) -> Result<String> {
        let request = Request::post("/v1/admin/keys")
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
            .header("content-type", "application/json");
        let body = json!({"name": name, "plan": plan}).to_string();
        let answer = call(&self.operator, request.body(Body::from(body))?).await?;
        ensure!(answer.status == 201, "making a key: {}", answer.text());
        Ok(answer.json()["key"].as_str().context("no key")?.to_owned())
    }

    /// Registers a bank as ingest's operator endpoint does (with the same
    /// image and social link a `Stack`'s banks get); its id.
    pub async fn register_bank(&mut self, code: &str, name: &str) -> Result<i64> {
        let id = self.next_bank;
        self.next_bank += 1;
        let registered = BankRegistered {
            code: code.to_owned(),
            name: name.to_owned(),
            image_url: format!("https://img.test/{code}.png"),
            social_links: vec![SocialLink {
                platform: "telegram".to_owned(),
                url: format!("https://t.me/{code}"),
            }],
            schedule: None,
        };
        self.fold(id, Event::BankRegistered(registered)).await?;
        Ok(id)
    }

    /// Changes a bank as ingest's operator endpoint does with `patch`
    /// (`{"active": false}` deactivates it).
    pub async fn update_bank(&mut self, bank: i64, patch: Value) -> Result<()> {
        let mut patch = patch.as_object().context("a patch is an object")?.clone();
        let active = patch.remove("active");
        if let Some(field) = patch
            .keys()
            .find(|f| !["code", "name", "imageUrl", "socialLinks"].contains(&f.as_str()))
        {
            bail!("{field} is not a field of a bank change");
        }
        if !patch.is_empty() {
            let update: BankUpdated = serde_json::from_value(Value::Object(patch))?;
            self.fold(bank, Event::BankUpdated(update)).await?;
        }
        match active.as_ref().map(Value::as_bool) {
            None => {}
            Some(Some(false)) => {
                self.fold(bank, Event::BankDeactivated(BankDeactivated::default()))
                    .await?;
            }
            Some(Some(true)) => {
                self.fold(bank, Event::BankReactivated(BankReactivated::default()))
                    .await?;
            }
            Some(None) => bail!("active is true or false"),
        }
        Ok(())
    }

    /// Publishes `board` for `bank`, read as ingest reads the body a
    /// publisher pushes; the board's event id.
    pub async fn publish(&mut self, bank: i64, board: &Board) -> Result<uuid::Uuid> {
        let now = chrono::Utc::now();
        let published = ratewire_ingest::board::parse_since(
            board.body().as_bytes(),
            now,
            ratewire_ingest::board::default_horizon(),
        )
        .map_err(|problems| anyhow::anyhow!("ingest would refuse {board}: {problems:?}"))?;
        self.fold(bank, Event::BoardPublished(published)).await
    }

    /// Folds one event of `bank` as the projector does, then writes the
    /// views as it does after a rebuild: what the API reads is then there.
    async fn fold(&mut self, bank: i64, event: Event) -> Result<uuid::Uuid> {
        let bank = BankId::new(bank)?;
        let envelope = Envelope::new(bank, chrono::Utc::now(), event);
        let message = Incoming::keyed(0, self.offset, bank, ratewire_proto::encode(&envelope));
        let outcome = apply_batch(&self.read, &self.topic, &[message], &[], None).await?;
        self.offset += 1;
        ensure!(
            outcome.applied == 1,
            "the fold did not apply {:?}: {:?}",
            envelope.event,
            outcome.refused
        );
        self.views_written().await?;
        Ok(envelope.event_id)
    }

    async fn views_written(&mut self) -> Result<()> {
        rebuild_views(&self.read, &mut self.views).await?;
        Ok(())
    }

    /// GET on the API; the status and the body as raw text.
    pub async fn get_raw(&self, path_and_query: &str, key: Option<&str>) -> Result<(u16, String)> {
        let answer = self.send(Request::get(path_and_query), key).await?;
        Ok((answer.status, answer.text()))
    }

    /// GET on the API, parsed, and checked against the API's OpenAPI
    /// document: an answer the document does not describe panics.
    pub async fn get(&self, path_and_query: &str, key: Option<&str>) -> Result<(u16, Value)> {
        let (status, text) = self.get_raw(path_and_query, key).await?;
        let body = serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))?;
        self.conforms(path_and_query, status, &body);
        Ok((status, body))
    }

    /// A request to the public router with `key`, as a client on loopback
    /// sends it.
    pub async fn send(
        &self,
        request: axum::http::request::Builder,
        key: Option<&str>,
    ) -> Result<Answer> {
        let request = match key {
            Some(key) => request.header("x-api-key", key),
            None => request,
        };
        call(&self.public, request.body(Body::empty())?).await
    }

    /// A POST of `body` as JSON to the public router with `key`.
    pub async fn post_json(&self, path: &str, body: String, key: Option<&str>) -> Result<Answer> {
        let request = Request::post(path).header("content-type", "application/json");
        let request = match key {
            Some(key) => request.header("x-api-key", key),
            None => request,
        };
        call(&self.public, request.body(Body::from(body))?).await
    }

    /// A request of any `method` to the public router with `key`.
    pub async fn request(&self, method: Method, path: &str, key: Option<&str>) -> Result<Answer> {
        self.send(Request::builder().method(method).uri(path), key)
            .await
    }

    /// Panics when an answer of `GET path_and_query` does not match the
    /// API's OpenAPI document.
    pub fn conforms(&self, path_and_query: &str, status: u16, body: &Value) {
        let path = path_and_query.split('?').next().unwrap_or_default();
        if let Some(contract) = &self.contract {
            if let Err(violation) = contract.check(path, status, body) {
                panic!("{violation:#}");
            }
        }
    }

    /// Runs one SQL statement in the world's database (to break things on
    /// purpose).
    pub async fn sql(&self, statement: &str) -> Result<()> {
        let pool = PgPool::connect(&format!("{POSTGRES}/{}", self.database)).await?;
        sqlx::query(statement).execute(&pool).await?;
        pool.close().await;
        Ok(())
    }

    /// What the API has logged so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().expect("the log")).into_owned()
    }
}

/// A database's read model and API, prepared as the processes prepare them
/// at start.
struct Prepared {
    read: PgPool,
    views: RedisViews,
    state: ratewire_api::state::AppState,
}

impl Prepared {
    async fn new(database: &str, redis_prefix: &str, args: Vec<String>) -> Result<Prepared> {
        let url = format!("{POSTGRES}/{database}");
        let config = ApiArgs::try_parse_from(
            [
                "ratewire-api",
                "--database-url",
                &url,
                "--redis-url",
                REDIS,
                "--redis-prefix",
                redis_prefix,
                "--admin-token",
                ADMIN_TOKEN,
            ]
            .into_iter()
            .map(str::to_owned)
            .chain(args),
        )?
        .config;

        // The read model as the projector prepares it.
        let settings = &config.read_model;
        let control = ratewire_readmodel::db::pool(&url, &settings.control_schema, 1)?;
        ratewire_readmodel::generation::prepare(
            &control,
            &settings.control_schema,
            &settings.read_schema,
        )
        .await?;
        let generation = ratewire_readmodel::generation::active(
            &control,
            &settings.control_schema,
            &settings.read_schema,
        )
        .await?;
        control.close().await;
        let read = ratewire_readmodel::db::writer_pool(&url, &generation.schema, 2)?;
        ratewire_readmodel::db::migrate(&read, &generation.schema).await?;
        let views = RedisViews::for_generation(
            ratewire_readmodel::redis::connect(&settings.redis_url)?,
            settings,
            &generation,
        );

        // The API as its process prepares it, without the listeners.
        let pool = ratewire_api::db::pool(&url, &config.schema)?;
        let redis = RedisGuard::new(
            ratewire_readmodel::redis::connect(&settings.redis_url)?,
            std::time::Duration::from_millis(config.redis_budget_ms),
        );
        let state = ratewire_api::app::state(&config, pool, redis)?;
        let prepared = state
            .readiness
            .prepare("preparing", &Default::default(), || {
                ratewire_api::app::prepare(&state, &config.schema)
            })
            .await;
        ensure!(prepared, "the API did not prepare");
        Ok(Prepared { read, views, state })
    }
}

/// How long a copy waits for the template to be free (a template is copied
/// only while nobody is connected to it).
const TEMPLATE_FREE_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// The database every world's is a copy of: the read model and the API's
/// schemas migrated. Named after the migrations it holds, so it is made
/// once for them (by whichever test process first needs it) and a change
/// of any migration makes another.
async fn template() -> Result<String> {
    static TEMPLATE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    TEMPLATE.get_or_try_init(make_template).await.cloned()
}

async fn make_template() -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut migrations = Sha256::new();
    for migrator in [
        &ratewire_readmodel::db::MIGRATOR,
        &ratewire_api::db::MIGRATOR,
        &ratewire_alerts::schema::MIGRATOR,
    ] {
        for migration in migrator.iter() {
            migrations.update(migration.version.to_le_bytes());
            migrations.update(&migration.checksum);
        }
    }
    let digest: String = migrations.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let name = format!("rw_world_template_{digest}");
    let admin = PgPool::connect(&format!("{POSTGRES}/postgres")).await?;
    let exists = |name: String| {
        let admin = admin.clone();
        async move {
            sqlx::query_scalar::<_, i32>("SELECT 1 FROM pg_database WHERE datname = $1")
                .bind(name)
                .fetch_optional(&admin)
                .await
                .map(|found| found.is_some())
        }
    };
    if !exists(name.clone()).await? {
        // Made under a name of its own, then renamed: a database of the
        // template's name is always whole.
        let building = format!("{name}_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        sqlx::query(&format!("CREATE DATABASE {building}"))
            .execute(&admin)
            .await?;
        let prepared = Prepared::new(&building, "rwworld:template:", Vec::new()).await?;
        prepared.read.close().await;
        drop(prepared);
        // Whatever connection a pool still holds, the template must have
        // none to be copied.
        sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
            .bind(&building)
            .execute(&admin)
            .await?;
        let renamed = eventually("the template renamed", TEMPLATE_FREE_WITHIN, || async {
            let rename = format!("ALTER DATABASE {building} RENAME TO {name}");
            match sqlx::query(&rename).execute(&admin).await {
                Ok(_) => Some(Ok(())),
                Err(e) if in_use(&e) => None,
                Err(e) => Some(Err(e)),
            }
        })
        .await?;
        if let Err(e) = renamed {
            // Another process made it meanwhile: that one serves.
            sqlx::query(&format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"))
                .execute(&admin)
                .await?;
            ensure!(exists(name.clone()).await?, "making the template: {e}");
        }
    }
    admin.close().await;
    Ok(name)
}

/// Whether `e` says the database is in use by other sessions.
fn in_use(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("55006"))
}

/// Calls `router` with `request`, as from a client on loopback.
async fn call(router: &Router, mut request: Request<Body>) -> Result<Answer> {
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40_000))));
    let response = router.clone().oneshot(request).await?;
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await?.to_vec();
    Ok(Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    })
}

/// A writer into the world's log.
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("the log").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for World {
    fn drop(&mut self) {
        ratewire_e2e::forget(&self.database, &self.redis_prefix);
    }
}
