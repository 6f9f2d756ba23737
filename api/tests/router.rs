//! The API's routers called in process (`tower::ServiceExt::oneshot`),
//! against a Postgres database and a Redis prefix of their own: what every
//! request gets, whatever the data (validation, errors, headers). What
//! needs the real processes and the broker is in `tests/`.

mod common;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use serde_json::{json, Value};

use common::{InProcess, ADMIN_TOKEN};

/// The two routers of an API on a database and Redis prefix of its own,
/// prepared as at start, with a key on the free plan.
type Api = InProcess;

impl Api {
    async fn new() -> Self {
        Self::start("router", None).await
    }

    async fn get(&self, uri: &str, key: Option<&str>) -> (StatusCode, header::HeaderMap, Value) {
        let mut request = Request::get(uri);
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        send(&self.public, request.body(Body::empty()).unwrap()).await
    }
}

async fn send(router: &Router, request: Request<Body>) -> (StatusCode, header::HeaderMap, Value) {
    let (status, headers, bytes) = common::send(router, request).await;
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    (status, headers, body)
}

fn error_fields(body: &Value) -> Vec<&str> {
    let mut fields: Vec<&str> = body["errors"]
        .as_object()
        .map(|errors| errors.keys().map(String::as_str).collect())
        .unwrap_or_default();
    fields.sort_unstable();
    fields
}

#[tokio::test]
async fn a_request_without_a_valid_key_is_refused_and_still_counted() {
    let api = Api::new().await;
    let (status, headers, body) = api.get("/api/v1/banks", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body,
        json!({"status": 401, "message": "API key is required"})
    );
    assert!(headers.contains_key("x-ratelimit-limit"));
    assert!(headers.contains_key("x-ratelimit-remaining"));

    let (status, _, body) = api.get("/api/v1/banks", Some("rwk_made0up0_x")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["message"], "Invalid API key");
}

#[tokio::test]
async fn every_bad_parameter_is_named() {
    let api = Api::new().await;
    let key = api.key.clone();
    let (status, _, body) = api
        .get(
            "/api/v1/rates?bankId=abc&transactional=maybe&socialLinks=2",
            Some(&key),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["message"], "Validation errors occurred.");
    assert_eq!(body["status"], 400);
    assert_eq!(
        error_fields(&body),
        ["bankId", "socialLinks", "transactional"],
        "{body}"
    );

    let (status, _, body) = api
        .get("/api/v1/rates/best-rates?currencyCode=US", Some(&key))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_fields(&body), ["currencyCode"]);
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_in_the_envelope() {
    let api = Api::new().await;
    let key = api.key.clone();
    let (status, _, body) = api.get("/api/v1/nothing-here", Some(&key)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"status": 404, "message": "Not Found"}));

    let request = Request::post("/api/v1/banks")
        .header("x-api-key", &key)
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = send(&api.public, request).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        body,
        json!({"status": 405, "message": "Method Not Allowed"})
    );
}

#[tokio::test]
async fn a_view_rendered_from_postgres_is_tagged_and_answered_304_when_unchanged() {
    let api = Api::new().await;
    let key = api.key.clone();
    let (status, headers, body) = api.get("/api/v1/currencies", Some(&key)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], 200);
    assert_eq!(body["data"], json!([]));
    let etag = headers[header::ETAG].to_str().unwrap().to_owned();

    let request = Request::get("/api/v1/currencies")
        .header("x-api-key", &key)
        .header(header::IF_NONE_MATCH, &etag)
        .body(Body::empty())
        .unwrap();
    let (status, headers, body) = send(&api.public, request).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert_eq!(body, Value::Null);
    assert_eq!(headers[header::ETAG], etag.as_str());
    assert!(headers.contains_key("x-ratelimit-remaining"));
}

#[tokio::test]
async fn operators_create_keys_with_a_token_and_a_valid_body_only() {
    let api = Api::new().await;
    let post = |token: Option<&str>, content_type: &str, body: &str| {
        let mut request =
            Request::post("/v1/admin/keys").header(header::CONTENT_TYPE, content_type);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        request.body(Body::from(body.to_owned())).unwrap()
    };
    let (status, _, _) = send(&api.operator, post(None, "application/json", "{}")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, _, _) = send(
        &api.operator,
        post(Some(ADMIN_TOKEN), "text/plain", r#"{"name":"x"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let (status, _, body) = send(
        &api.operator,
        post(
            Some(ADMIN_TOKEN),
            "application/json",
            r#"{"name":" ","plan":"gold"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_fields(&body), ["name", "plan"], "{body}");

    let (status, _, body) = send(
        &api.operator,
        post(
            Some(ADMIN_TOKEN),
            "application/json",
            r#"{"name":"a","x":1}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_fields(&body), ["x"], "{body}");

    let (status, _, body) = send(
        &api.operator,
        post(
            Some(ADMIN_TOKEN),
            "application/json",
            r#"{"name":"reader"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let key = body["key"].as_str().unwrap().to_owned();
    let (status, _, body) = api.get("/api/v1/me", Some(&key)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["name"], "reader");
    assert_eq!(body["data"]["plan"], "free");
}
