//! What every handler, extractor and middleware shares. It sits below them
//! all, so they import it and never each other in a circle.

use std::sync::Arc;

use ratewire_readmodel::views::ViewStyle;
use ratewire_service::clients::{AttemptLimit, ClientAddresses};
use ratewire_service::operator::OperatorGate;
use ratewire_service::Readiness;
use sqlx::PgPool;

use crate::keys::KeyStore;
use crate::limits::Limiter;
use crate::plans::Plans;
use crate::read_model::ReadModels;
use crate::redis_guard::RedisGuard;
use crate::routes::fallback::Fallbacks;

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
    /// Redis for the request path: every call within a budget, none while
    /// it is unavailable.
    pub redis: RedisGuard,
    /// The read-model generation requests are served from.
    pub read: ReadModels,
    /// Views rendered from Postgres while Redis has none, shared and kept
    /// a second.
    pub fallbacks: Fallbacks,
    /// The boards a conversion reads, read back from their stored list.
    pub read_back: crate::routes::convert::ReadBack,
    pub style: Arc<ViewStyle>,
    pub key_store: KeyStore,
    /// The operators' token and who failed to present it.
    pub operators: OperatorGate,
    /// Who a request's client is (trusted proxies, IPv6 by network).
    pub clients: ClientAddresses,
    /// Postgres key lookups per client (keys no cache knows), at most the
    /// anonymous plan's per-minute allowance.
    pub key_lookups: AttemptLimit,
    pub timezone: chrono_tz::Tz,
    /// Points one `raw` series answer holds at most.
    pub series_page_points: usize,
    pub plans: Arc<Plans>,
    pub limiter: Arc<Limiter>,
    pub anonymous_access: bool,
    /// Origins whose pages may read from a browser.
    pub cors_origins: crate::cors::Origins,
    pub rate_limits: bool,
    /// Prepared once migrations ran; until then every request but the
    /// probes gets 503.
    pub readiness: Readiness,
    /// The live stream's fan-out of changes.
    pub relay: crate::live::Relay,
    /// Views kept in this process until the projector changes them.
    pub views: Arc<crate::view_cache::ViewCache>,
    /// The all-banks lists being joined, one join of each at a time.
    pub lists: Arc<crate::lists::Joins>,
    /// Live streams held per caller, across instances.
    pub stream_slots: Arc<crate::stream_slots::StreamSlots>,
    /// Cancelled when the process stops: live streams end with it (a
    /// graceful shutdown waits for open responses).
    pub shutdown: tokio_util::sync::CancellationToken,
}
