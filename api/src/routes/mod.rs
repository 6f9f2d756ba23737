//! The API's HTTP surface: one module per resource, merged here with the
//! shared layers (request ids, tracing) and JSON fallbacks for unknown paths
//! and methods.

pub mod admin;
pub mod banks;
pub mod best_rates;
pub mod currencies;
pub mod health;
pub mod history;
pub mod me;
pub mod rates;
pub mod view_body;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{middleware, Router};
use ratewire_projector::redis_views::Keys;
use ratewire_projector::views::ViewStyle;
use redis::aio::ConnectionManager;
use sqlx::PgPool;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use ipnet::IpNet;

use ratewire_proto::http_metrics;

use crate::error::Error;
use crate::gate;
use crate::keys::KeyStore;
use crate::limits::Limiter;
use crate::plans::Plans;
use crate::read_model::ReadModels;

/// What every handler shares, behind one `Arc`: each request clones the
/// state several times (per layer and extractor), and cloning a dozen pools
/// and handles showed up in profiles; one reference count does not.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub struct Shared {
    /// The API's own schema (keys, usage).
    pub pool: PgPool,
    pub redis: ConnectionManager,
    /// The read-model generation requests are served from.
    pub read: ReadModels,
    pub style: Arc<ViewStyle>,
    pub key_store: KeyStore,
    pub admin_token: Option<Arc<str>>,
    pub timezone: chrono_tz::Tz,
    pub plans: Arc<Plans>,
    pub limiter: Arc<Limiter>,
    pub trusted_proxies: Arc<[IpNet]>,
    pub anonymous_access: bool,
    pub rate_limits: bool,
    /// Set once migrations ran; until then every request but the probes
    /// gets 503.
    pub prepared: Arc<AtomicBool>,
}

pub fn router(state: AppState) -> Router {
    // Everything a consumer calls passes the gate (keys, limits, headers),
    // unknown paths included; operators and probes do not.
    let public = Router::new()
        .merge(banks::router())
        .merge(currencies::router())
        .merge(rates::router())
        .merge(best_rates::router())
        .merge(history::router())
        .merge(me::router())
        .fallback(|| async { Error::NotFound("Not Found") })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(state.clone(), gate::gate));
    Router::new()
        .route(
            "/api/v1/openapi.json",
            axum::routing::get(|| async { json_body(crate::openapi::DOCUMENT.clone()) }),
        )
        .merge(admin::router())
        .merge(health::router())
        .merge(public)
        .route("/metrics", axum::routing::get(http_metrics::render))
        .layer(middleware::from_fn_with_state(state.clone(), until_prepared))
        .layer(middleware::from_fn(http_metrics::track))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
            let request_id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
            tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id, key = tracing::field::Empty)
        }))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .with_state(state)
}

/// Answers 503 (not a hanging connection) while the process is still
/// preparing Postgres, e.g. when it started while Postgres was down.
async fn until_prepared(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.prepared.load(Ordering::Acquire)
        || matches!(request.uri().path(), "/healthz" | "/readyz" | "/metrics")
    {
        return next.run(request).await;
    }
    Error::Starting("still starting: waiting for Postgres").into_response()
}

/// The Redis view a public request is answered from, when its query is
/// valid: the gate fetches it in the same Redis call that counts the
/// request, so a served request costs one round trip. Handlers still parse
/// the query themselves; this only has to agree with them on valid queries.
pub fn view_key(views: &Keys, path: &str, query: Option<&str>) -> Option<String> {
    match path {
        "/api/v1/rates" => rates::view_key(views, query),
        "/api/v1/rates/best-rates" => best_rates::view_key(views, query),
        "/api/v1/banks" => banks::view_key(views, query),
        "/api/v1/currencies" => Some(views.currencies()),
        _ => None,
    }
}

/// A view the gate read along with the limiter: its key and body (`None`
/// when the view was missing). Requests that shared a round trip share
/// the body.
#[derive(Debug, Clone, Default)]
pub struct Prefetched(pub Option<(String, Option<Bytes>)>);

impl FromRequestParts<AppState> for Prefetched {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _: &AppState,
    ) -> std::result::Result<Self, Self::Rejection> {
        Ok(parts.extensions.remove::<Prefetched>().unwrap_or_default())
    }
}

/// A ready-made view from Redis (taken from `prefetched` when the gate
/// already read that key); `None` when it is missing or Redis is
/// unavailable, and the caller renders the same bytes from Postgres.
pub async fn cached_view(state: &AppState, prefetched: Prefetched, key: &str) -> Option<Bytes> {
    let answer = match prefetched.0 {
        Some((fetched, body)) if fetched == key => Ok(body),
        _ => {
            let mut redis = state.redis.clone();
            redis::AsyncCommands::get::<_, Option<Vec<u8>>>(&mut redis, key)
                .await
                .map(|body| body.map(Bytes::from))
        }
    };
    let (body, source) = match answer {
        Ok(Some(body)) => (Some(body), "redis"),
        Ok(None) => {
            tracing::debug!(key, "view missing; rendering from postgres");
            (None, "postgres")
        }
        Err(e) => {
            metrics::counter!("ratewire_api_redis_errors_total").increment(1);
            tracing::warn!(error = %e, "redis unavailable; rendering from postgres");
            (None, "postgres")
        }
    };
    metrics::counter!("ratewire_api_views_served_total", "source" => source).increment(1);
    body
}

/// A ready-made JSON body, sent as it is (a string, a stored view, or the
/// parts of [`view_body::json_list`]).
pub fn json_body(body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
