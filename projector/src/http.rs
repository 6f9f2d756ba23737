//! The projector's small HTTP surface: liveness, readiness and metrics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use redis::aio::ConnectionManager;
use serde_json::json;
use sqlx::PgPool;

/// What /readyz reports besides the live dependency checks.
#[derive(Debug, Default)]
pub struct Status {
    /// Partitions are assigned and the views were built once.
    pub consuming: AtomicBool,
}

#[derive(Clone)]
pub struct HealthState {
    pub pool: PgPool,
    pub redis: ConnectionManager,
    pub status: Arc<Status>,
}

pub fn router(state: HealthState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route(
            "/metrics",
            get(|| async { ratewire_proto::runtime::metrics().render() }),
        )
        .with_state(state)
}

async fn readyz(State(state): State<HealthState>) -> (StatusCode, Json<serde_json::Value>) {
    let (postgres, redis) =
        tokio::join!(ping_postgres(&state.pool), ping_redis(state.redis.clone()));
    let consuming = state.status.consuming.load(Ordering::Relaxed);
    let ready = postgres && redis && consuming;
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        code,
        Json(json!({
            "status": if ready { "ready" } else { "not ready" },
            "postgres": postgres, "redis": redis, "consuming": consuming,
        })),
    )
}

pub async fn ping_postgres(pool: &PgPool) -> bool {
    let ping = sqlx::query("SELECT 1").execute(pool);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ping).await,
        Ok(Ok(_))
    )
}

pub async fn ping_redis(mut conn: ConnectionManager) -> bool {
    let cmd = redis::cmd("PING");
    let ping = cmd.query_async::<String>(&mut conn);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ping).await,
        Ok(Ok(_))
    )
}
