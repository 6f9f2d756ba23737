//! Liveness and readiness probes.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use ratewire_service::postgres;
use ratewire_service::readiness::healthz;
use serde_json::{json, Value};

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let postgres = postgres::ping(&state.pool).await;
    // What requests see: the breaker, kept current by its probe.
    let redis = !state.redis.is_open();
    let started = state.readiness.is_prepared();
    // Without Redis the API still answers everything (views from Postgres,
    // limits per process), so it stays in rotation, reported as degraded:
    // a Redis outage failing every replica's readiness would take the
    // whole API out of service.
    let ready = started && postgres;
    // A replica down sends history and series to the primary: degraded.
    let replica = state.views.read.replica_up();
    let status = match (ready, redis && replica != Some(false)) {
        (false, _) => "not ready",
        (true, false) => "degraded",
        (true, true) => "ready",
    };
    (
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(match replica {
            Some(replica) => {
                json!({"status": status, "started": started, "postgres": postgres, "redis": redis, "replica": replica})
            }
            None => {
                json!({"status": status, "started": started, "postgres": postgres, "redis": redis})
            }
        }),
    )
}
