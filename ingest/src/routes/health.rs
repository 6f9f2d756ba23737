//! Liveness and readiness probes.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use ratewire_service::postgres;
use ratewire_service::readiness::healthz;
use serde_json::{json, Value};

use super::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let (postgres, broker) = tokio::join!(postgres::ping(&state.pool), state.publisher.reachable());
    let started = state.readiness.is_prepared();
    let ready = started && postgres && broker;
    (
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(
            json!({"status": if ready { "ready" } else { "not ready" }, "started": started, "postgres": postgres, "broker": broker}),
        ),
    )
}
