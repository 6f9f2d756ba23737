//! Ingest's HTTP surface, one module per audience, merged into the two
//! listeners' routers: [`public`] (publishers) and [`operator`].

pub mod admin;
pub mod boards;
pub mod body;
pub mod docs;
pub mod health;

use axum::extract::{DefaultBodyLimit, FromRequest};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use ratewire_service::metrics::render as render_metrics;
pub use ratewire_service::operator::Operator;
use std::sync::Arc;
use std::time::Duration;

use ratewire_service::clients::{AttemptLimit, ClientAddresses, KnownInvalid};
use ratewire_service::operator::{HasOperatorGate, OperatorGate};
use ratewire_service::Readiness;
use sqlx::PgPool;

use crate::board_records::BoardRecords;
use crate::error::Error;
use crate::known_tokens::KnownTokens;
use crate::publisher::Publisher;

#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub publisher: Publisher,
    /// Boards recorded before they are published.
    pub board_records: BoardRecords,
    /// The operators' token and who failed to present it.
    pub operators: OperatorGate,
    /// Publishers' credentials: who failed to present one, and tokens
    /// recently found invalid.
    pub publishers: PublisherGate,
    pub body_limit: u64,
    /// The earliest as-of time a board may carry.
    pub as_of_horizon: chrono::DateTime<chrono::Utc>,
    /// How long after it was accepted a board can be retracted.
    pub retraction_window: chrono::Duration,
    /// Prepared once migrations ran and the topic exists; until then every
    /// request but the probes gets 503.
    pub readiness: Readiness,
}

/// The public listener: publishers push boards; probes.
pub fn public(state: AppState) -> Router {
    let body_limit = state.body_limit as usize;
    let routes = Router::new()
        .merge(boards::router())
        .merge(health::router())
        .route(
            "/v1/openapi.json",
            get(|| async { json_document(&docs::PUBLISHER) }),
        );
    finish(routes, state).layer(DefaultBodyLimit::max(body_limit))
}

/// The operator listener: banks and tokens, metrics, probes.
pub fn operator(state: AppState) -> Router {
    let routes = Router::new()
        .merge(admin::router())
        .merge(health::router())
        .route("/metrics", get(render_metrics))
        .route(
            "/v1/openapi.json",
            get(|| async { json_document(&docs::OPERATOR) }),
        );
    finish(routes, state)
}

fn json_document(document: &'static str) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        document,
    )
        .into_response()
}

/// JSON answers for unknown paths and methods, 503 until prepared.
/// (`ratewire_service::serve` adds request ids, tracing, request metrics
/// and the listener limits.)
fn finish(routes: Router<AppState>, state: AppState) -> Router {
    let routes = routes
        .fallback(|| async { Error::NotFound("Not Found".into()) })
        .method_not_allowed_fallback(|| async {
            (
                StatusCode::METHOD_NOT_ALLOWED,
                axum::Json(serde_json::json!({"status": 405, "message": "Method Not Allowed"})),
            )
                .into_response()
        });
    state
        .readiness
        .guard(routes, still_starting)
        .with_state(state)
}

/// The answer while ingest is still preparing its dependencies, e.g.
/// started while Postgres is down: 503, not a hanging connection.
fn still_starting() -> Response {
    Error::Unavailable {
        what: "ingest",
        cause: "still starting: waiting for Postgres and the broker".into(),
    }
    .into_response()
}

/// A JSON body of type `T`: 415 for another content type, 413 past
/// `RATEWIRE_INGEST_BODY_LIMIT` (read as a board's body is: see [`body`]),
/// and 400 naming every problem under its field
/// ([`ratewire_service::body`]).
pub struct AppJson<T>(pub T);

impl<T> FromRequest<AppState> for AppJson<T>
where
    T: serde::de::DeserializeOwned + ratewire_service::body::Fields,
{
    type Rejection = Error;

    async fn from_request(
        request: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, Error> {
        if !boards::is_json(request.headers()) {
            return Err(Error::UnsupportedMediaType);
        }
        let body = body::read_limited(request.into_body(), state.body_limit as usize).await?;
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| Error::validation("body", format!("is not JSON: {e}")))?;
        ratewire_service::body::read(value)
            .map(AppJson)
            .map_err(Error::Validation)
    }
}

/// What stands before a publisher token is checked against Postgres.
#[derive(Clone)]
pub struct PublisherGate {
    pub clients: ClientAddresses,
    pub failures: AttemptLimit,
    pub invalid_tokens: KnownInvalid,
    /// Tokens that authenticated lately: a push by one is checked in its
    /// board-record round alone.
    pub known_tokens: Arc<KnownTokens>,
}

impl PublisherGate {
    pub fn new(clients: ClientAddresses, failures_per_minute: u32) -> Self {
        Self {
            clients,
            failures: AttemptLimit::new(failures_per_minute, Duration::from_secs(60)),
            invalid_tokens: KnownInvalid::new(100_000, Duration::from_secs(60)),
            known_tokens: Arc::default(),
        }
    }
}

impl HasOperatorGate for AppState {
    fn operator_gate(&self) -> &OperatorGate {
        &self.operators
    }
}
