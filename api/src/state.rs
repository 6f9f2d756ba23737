//! What every handler shares: the views, the callers' access, the live
//! relay and the process's settings. It sits above those parts and below
//! the routes; the gate and the extractors ask only for the part they use.

use std::sync::Arc;

use axum::extract::FromRef;
use ratewire_service::operator::{HasOperatorGate, OperatorGate};
use ratewire_service::Readiness;
use sqlx::PgPool;

use crate::access::Access;
use crate::redis_guard::RedisGuard;
use crate::views::Views;

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
    /// Keys' webhooks and rate alerts.
    pub alerting: Arc<crate::alerting::Alerting>,
    /// Redis for the request path: every call within a budget, none while
    /// it is unavailable.
    pub redis: RedisGuard,
    /// Reading, keeping and rendering views.
    pub views: Arc<Views>,
    /// Keys, plans, limits and stream slots.
    pub access: Arc<Access>,
    /// The operators' token and who failed to present it.
    pub operators: OperatorGate,
    pub timezone: chrono_tz::Tz,
    /// Boards older than this are `stale`.
    pub stale_after: std::time::Duration,
    /// `RATEWIRE_SPREAD_CAP_PERCENT`.
    pub spread_cap_percent: rust_decimal::Decimal,
    /// Points one `raw` series answer holds at most.
    pub series_page_points: usize,
    /// The listeners' limits (each public route keeps the request timeout
    /// in its own layer: see `routes::public`).
    pub limits: ratewire_service::ListenerLimits,
    /// Origins whose pages may read from a browser.
    pub cors_origins: crate::cors::Origins,
    /// The keys answers are signed with, and those still listed.
    pub signing: Arc<crate::signing::keys::KeySet>,
    /// Prepared once migrations ran; until then every request but the
    /// probes gets 503.
    pub readiness: Readiness,
    /// The live stream's fan-out of changes.
    pub relay: crate::live::Relay,
    /// Cancelled when the process stops: live streams end with it (a
    /// graceful shutdown waits for open responses).
    pub shutdown: tokio_util::sync::CancellationToken,
}

impl HasOperatorGate for AppState {
    fn operator_gate(&self) -> &OperatorGate {
        &self.operators
    }
}

impl FromRef<AppState> for Arc<Access> {
    fn from_ref(state: &AppState) -> Self {
        Arc::clone(&state.access)
    }
}

impl FromRef<AppState> for Arc<Views> {
    fn from_ref(state: &AppState) -> Self {
        Arc::clone(&state.views)
    }
}
