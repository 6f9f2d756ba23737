//! Liveness and readiness probes.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use ratewire_projector::http::{ping_postgres, ping_redis};
use serde_json::{json, Value};

use super::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let (postgres, redis) =
        tokio::join!(ping_postgres(&state.pool), ping_redis(state.redis.clone()));
    let started = state.prepared.load(std::sync::atomic::Ordering::Acquire);
    let ready = started && postgres && redis;
    (
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(
            json!({"status": if ready { "ready" } else { "not ready" }, "started": started, "postgres": postgres, "redis": redis}),
        ),
    )
}
