//! Ingest's routers called in process (`tower::ServiceExt::oneshot`),
//! against a Postgres database of their own and a broker that never
//! answers: what publishers and operators get before anything reaches the
//! log (authentication, validation, errors), and that a board the broker
//! did not acknowledge is never answered 202. What needs the real
//! processes and the broker is in `tests/`.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use clap::Parser;
use ratewire_ingest::{app, db, routes, Config};
use ratewire_service::testing::TestDatabase;
use serde_json::{json, Value};
use tower::ServiceExt;

const ADMIN_TOKEN: &str = "router-test-admin-token-0123456789";

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

/// Ingest's two routers on a database of their own, migrated, with a
/// broker address where nothing listens.
struct Ingest {
    public: Router,
    operator: Router,
    /// Dropped last, with the routers' connections.
    _database: TestDatabase,
}

impl Ingest {
    async fn new() -> Self {
        let database = TestDatabase::create("ingest_router").await.unwrap();
        let url = database.url();
        let config = Args::parse_from([
            "ratewire-ingest",
            "--database-url",
            &url,
            "--admin-token",
            ADMIN_TOKEN,
            "--kafka-brokers",
            "127.0.0.1:9",
            "--publish-timeout-ms",
            "300",
        ])
        .config;
        let state = app::state(&config).unwrap();
        // Migrations only: the topic and the log's banks need the broker.
        let prepared = state
            .readiness
            .prepare("migrating", &Default::default(), || {
                db::migrate(&state.pool, &config.schema)
            })
            .await;
        assert!(prepared);
        Self {
            public: routes::public(state.clone()),
            operator: routes::operator(state),
            _database: database,
        }
    }

    async fn operator(&self, method: &str, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {ADMIN_TOKEN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.unwrap_or_default().to_owned()))
            .unwrap();
        send(&self.operator, request).await
    }

    async fn push(&self, bank: i64, token: &str, board: &str) -> (StatusCode, Value) {
        let request = Request::post(format!("/v1/banks/{bank}/boards"));
        self.publisher(request, token, board).await
    }

    /// A publisher's request with `token` and the JSON `body`.
    async fn publisher(
        &self,
        request: axum::http::request::Builder,
        token: &str,
        body: &str,
    ) -> (StatusCode, Value) {
        let mut request = request
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        // As the listener gives every connection.
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        request.extensions_mut().insert(ConnectInfo(peer));
        send(&self.public, request).await
    }
}

async fn send(router: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (parts.status, body)
}

fn error_fields(body: &Value) -> Vec<String> {
    let mut fields: Vec<String> = body["errors"]
        .as_object()
        .map(|errors| errors.keys().cloned().collect())
        .unwrap_or_default();
    fields.sort_unstable();
    fields
}

#[tokio::test]
async fn operators_need_the_token_and_a_valid_body() {
    let ingest = Ingest::new().await;
    let request = Request::get("/v1/admin/banks").body(Body::empty()).unwrap();
    let (status, _) = send(&ingest.operator, request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, body) = ingest
        .operator(
            "POST",
            "/v1/admin/banks",
            Some(r#"{"code":"", "imageUrl": "ftp://x"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_fields(&body), ["name"], "{body}");

    let (status, body) = ingest
        .operator(
            "POST",
            "/v1/admin/banks",
            Some(r#"{"code":"", "name": "A bank", "imageUrl": "ftp://x"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_fields(&body), ["code", "imageUrl"], "{body}");

    let (status, body) = ingest.operator("GET", "/v1/admin/banks", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!([]), "nothing was registered");
}

#[tokio::test]
async fn a_board_is_checked_in_full_and_never_accepted_without_the_broker() {
    let ingest = Ingest::new().await;
    // The broker is away: the registration waits in the outbox.
    let (id, token) = bank_with_token(&ingest, "RTB").await;

    let (status, _) = ingest.push(id, "rwp_made0up0_x", "{}").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let bad = r#"{"rates":[{"currency":"XYZ","cashBuying":1,"cashSelling":2},
                           {"currency":"USD","cashBuying":-1,"cashSelling":2}]}"#;
    let (status, body) = ingest.push(id, &token, bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["status"], 400);
    assert!(error_fields(&body).len() >= 2, "{body}");

    let good = r#"{"rates":[{"currency":"USD","cashBuying":155.1,"cashSelling":158.2}]}"#;
    let (status, body) = ingest.push(id, &token, good).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
}

/// Registers a bank (its registration waits in the outbox while the
/// broker is away) and makes it a publisher token: its id and token.
async fn bank_with_token(ingest: &Ingest, code: &str) -> (i64, String) {
    let body = json!({"code": code, "name": code, "imageUrl": "https://example.com/b.png"});
    let (status, bank) = ingest
        .operator("POST", "/v1/admin/banks", Some(&body.to_string()))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{bank}");
    let id = bank["id"].as_i64().unwrap();
    let (status, token) = ingest
        .operator("POST", &format!("/v1/admin/banks/{id}/tokens"), None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{token}");
    (id, token["token"].as_str().unwrap().to_owned())
}

/// A publisher's retraction of `board` of `bank`, with `body`.
async fn retract(
    ingest: &Ingest,
    bank: i64,
    token: &str,
    board: &str,
    body: &str,
) -> (StatusCode, Value) {
    let request = Request::delete(format!("/v1/banks/{bank}/boards/{board}"));
    ingest.publisher(request, token, body).await
}

#[tokio::test]
async fn a_retraction_names_a_field_it_does_not_have_and_another_banks_token_may_not_retract() {
    let ingest = Ingest::new().await;
    let (cbe, cbe_token) = bank_with_token(&ingest, "CBE").await;
    let (awash, _) = bank_with_token(&ingest, "AWASH").await;
    let board = uuid::Uuid::new_v4().to_string();

    let (status, body) = retract(&ingest, awash, &cbe_token, &board, "").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["message"],
        format!("This token may only retract boards for bank {cbe}")
    );

    let (status, body) = retract(
        &ingest,
        cbe,
        &cbe_token,
        &board,
        r#"{"reason": "a typo", "note": "x"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_fields(&body), ["note"], "{body}");
    assert_eq!(
        body["errors"]["note"][0],
        "is not a field of a retraction (reason)"
    );
    let (status, body) = retract(&ingest, cbe, &cbe_token, &board, r#"{"reason": 5}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_fields(&body), ["reason"], "{body}");
}

#[tokio::test]
async fn a_reference_day_names_every_problem_under_its_path() {
    let ingest = Ingest::new().await;
    let day = chrono::Utc::now().date_naive() - chrono::Days::new(1);
    let entry = |code: &str, buying: &str, selling: &str| {
        json!({"id": "01kr", "currency_id": "01hc", "buying": buying, "selling": selling,
               "date": day.to_string(), "weighted_average": buying,
               "currency": {"id": "01hc", "name": code, "code": code}})
    };
    // Selling below buying, a currency twice, fields the published shape
    // does not have, and a day before 1990.
    let mut first = entry("USD", "157.2", "150");
    first["mid"] = json!("2");
    first["date"] = json!("1989-12-29");
    let mut second = entry("usd", "157.2", "158.8");
    second["currency"]["symbol"] = json!("$");
    let body = json!({"success": true, "message": "OK", "status": 200, "page": 1,
                      "data": [first, second]});
    let (status, body) = ingest
        .operator("POST", "/v1/admin/reference-rates", Some(&body.to_string()))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        error_fields(&body),
        [
            "data[0].date",
            "data[0].mid",
            "data[0].selling",
            "data[1].currency.code",
            "data[1].currency.symbol",
            "page"
        ],
        "{body}"
    );
    assert_eq!(
        body["errors"]["data[1].currency.code"],
        json!(["USD appears more than once"])
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_naming_the_limit() {
    let ingest = Ingest::new().await;
    let name = "x".repeat(300 * 1024);
    let body = json!({"code": "BIG", "name": name, "imageUrl": "https://example.com/b.png"});
    let (status, body) = ingest
        .operator("POST", "/v1/admin/banks", Some(&body.to_string()))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(
        body,
        json!({"status": 413, "message": "Request body is too large: at most 262144 bytes"})
    );
}

#[tokio::test]
async fn a_code_taken_is_409_with_a_message_like_every_other() {
    let ingest = Ingest::new().await;
    bank_with_token(&ingest, "CBE").await;
    let body = json!({"code": "CBE", "name": "Again", "imageUrl": "https://example.com/b.png"});
    let (status, body) = ingest
        .operator("POST", "/v1/admin/banks", Some(&body.to_string()))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body,
        json!({"status": 409, "message": "A bank with code CBE already exists"})
    );
}
