//! The API's HTTP surface: one module per resource, merged here with the
//! shared layers (request ids, tracing) and JSON fallbacks for unknown paths
//! and methods.

pub mod admin;
pub mod banks;
pub mod best_rates;
pub mod currencies;
pub mod health;
pub mod history;
pub mod rates;

use std::sync::Arc;

use axum::http::{header, HeaderValue, Request};
use axum::response::{IntoResponse, Response};
use axum::Router;
use ratewire_projector::redis_views::Keys;
use ratewire_projector::views::ViewStyle;
use redis::aio::ConnectionManager;
use sqlx::PgPool;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::error::Error;
use crate::keys::KeyStore;

#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub redis: ConnectionManager,
    pub views: Keys,
    pub style: Arc<ViewStyle>,
    pub key_store: KeyStore,
    pub admin_token: Option<Arc<str>>,
    pub timezone: chrono_tz::Tz,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(banks::router())
        .merge(currencies::router())
        .merge(rates::router())
        .merge(best_rates::router())
        .merge(history::router())
        .route(
            "/api/v1/openapi.json",
            axum::routing::get(|| async { json_body(crate::openapi::DOCUMENT.clone()) }),
        )
        .merge(admin::router())
        .merge(health::router())
        .fallback(|| async { Error::NotFound("Not Found") })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
            let request_id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
            tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id, key = tracing::field::Empty)
        }))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .with_state(state)
}

/// A ready-made view from Redis; `None` when it is missing or Redis is
/// unavailable, and the caller renders the same bytes from Postgres.
pub async fn cached_view(state: &AppState, key: &str) -> Option<String> {
    let mut redis = state.redis.clone();
    match redis::AsyncCommands::get::<_, Option<String>>(&mut redis, key).await {
        Ok(Some(body)) => Some(body),
        Ok(None) => {
            tracing::debug!(key, "view missing; rendering from postgres");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "redis unavailable; rendering from postgres");
            None
        }
    }
}

/// A ready-made JSON body, sent as it is.
pub fn json_body(body: String) -> Response {
    let mut response = body.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
