//! Liveness and readiness probes.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let postgres = async {
        let ping = sqlx::query("SELECT 1").execute(&state.pool);
        matches!(
            tokio::time::timeout(Duration::from_secs(1), ping).await,
            Ok(Ok(_))
        )
    };
    let (postgres, broker) = tokio::join!(postgres, state.publisher.reachable());
    let started = state.prepared.load(std::sync::atomic::Ordering::Acquire);
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
