//! Ingest's HTTP surface, one module per audience, merged in [`router`].

pub mod admin;
pub mod boards;
pub mod body;
pub mod health;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use sqlx::PgPool;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use ratewire_proto::http_metrics;

use crate::error::Error;
use crate::publisher::Publisher;
use ratewire_proto::secret::check_operator;

#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub publisher: Publisher,
    pub admin_token: Option<Arc<str>>,
    pub body_limit: u64,
    /// Set once migrations ran and the topic exists; until then every
    /// request but the probes gets 503.
    pub prepared: Arc<AtomicBool>,
}

pub fn router(state: AppState) -> Router {
    let body_limit = state.body_limit as usize;
    Router::new()
        .merge(boards::router())
        .merge(admin::router())
        .merge(health::router())
        .fallback(|| async { Error::NotFound("Not Found".into()) })
        .method_not_allowed_fallback(|| async {
            (StatusCode::METHOD_NOT_ALLOWED, axum::Json(serde_json::json!({"status": 405, "message": "Method Not Allowed"})))
                .into_response()
        })
        .route("/metrics", axum::routing::get(http_metrics::render))
        .layer(middleware::from_fn_with_state(state.clone(), until_prepared))
        .layer(middleware::from_fn(http_metrics::track))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
            let request_id = request
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id)
        }))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .with_state(state)
}

/// Answers 503 (not a hanging connection) while the process is still
/// preparing its dependencies, e.g. started while Postgres is down.
async fn until_prepared(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.prepared.load(Ordering::Acquire)
        || matches!(request.uri().path(), "/healthz" | "/readyz" | "/metrics")
    {
        return next.run(request).await;
    }
    Error::Unavailable {
        what: "ingest",
        cause: "still starting: waiting for Postgres and the broker".into(),
    }
    .into_response()
}

/// `axum::Json` with rejections in our error envelope.
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(Error))]
pub struct AppJson<T>(pub T);

impl From<JsonRejection> for Error {
    fn from(rejection: JsonRejection) -> Self {
        match rejection.status() {
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Error::UnsupportedMediaType,
            StatusCode::PAYLOAD_TOO_LARGE => Error::PayloadTooLarge,
            _ => Error::validation("body", rejection.body_text()),
        }
    }
}

/// Proof that the caller holds `RATEWIRE_ADMIN_TOKEN`.
pub struct Operator;

impl FromRequestParts<AppState> for Operator {
    type Rejection = Error;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let authorization = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        check_operator(authorization, state.admin_token.as_deref())
            .map(|()| Operator)
            .map_err(|denied| Error::Unauthorized(denied.message()))
    }
}
