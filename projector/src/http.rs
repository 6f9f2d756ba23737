//! The projector's small HTTP surface: liveness, readiness and metrics.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use ratewire_readmodel::redis;
use ratewire_readmodel::redis::Connection;
use ratewire_service::postgres;
use ratewire_service::readiness::healthz;
use serde_json::json;
use sqlx::PgPool;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// What /readyz reports besides the live dependency checks.
#[derive(Debug)]
pub struct Status {
    /// Partitions are assigned and the views were built once.
    pub consuming: AtomicBool,
    /// Messages on the broker not yet applied, over the owned partitions;
    /// -1 while unknown (not measured yet, or the broker did not answer).
    pub lag: AtomicI64,
    /// The most lag that still counts as ready.
    pub ready_lag: u64,
    /// The partitions this instance reads now.
    pub partitions: Mutex<Vec<i32>>,
    /// Its client id in the consumer group, when it shares partitions there.
    pub member: OnceLock<String>,
}

impl Status {
    pub fn new(ready_lag: u64) -> Self {
        Self {
            consuming: AtomicBool::new(false),
            lag: AtomicI64::new(-1),
            ready_lag,
            partitions: Mutex::default(),
            member: OnceLock::new(),
        }
    }
}

#[derive(Clone)]
pub struct HealthState {
    pub pool: PgPool,
    pub redis: Connection,
    pub status: Arc<Status>,
}

pub fn router(state: HealthState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(ratewire_service::metrics::render))
        .with_state(state)
}

async fn readyz(State(state): State<HealthState>) -> (StatusCode, Json<serde_json::Value>) {
    let (postgres, redis) = tokio::join!(
        postgres::ping(&state.pool),
        redis::ping(state.redis.clone())
    );
    let consuming = state.status.consuming.load(Ordering::Relaxed);
    let lag = state.status.lag.load(Ordering::Relaxed);
    let caught_up = (0..=state.status.ready_lag as i64).contains(&lag);
    let ready = postgres && redis && consuming && caught_up;
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
            "lag": (lag >= 0).then_some(lag), "caughtUp": caught_up,
            "partitions": *state.status.partitions.lock().expect("status lock"),
            "member": state.status.member.get(),
        })),
    )
}
