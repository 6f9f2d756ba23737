//! Who may call, and how much: keys (created as [`key_records`], looked
//! up through [`keys`], cached in Redis and in each process's
//! [`key_directory`]), [`plans`] and their
//! [`limits`] (counted in Redis), live-stream slots ([`stream_slots`]),
//! the monthly counts kept in Postgres ([`usage_sync`], [`retention`]),
//! and the [`gate`] every public request passes, whose findings handlers
//! take through [`auth`].

pub mod auth;
pub mod gate;
pub mod key_directory;
pub mod key_records;
pub mod keys;
pub mod limits;
pub mod plans;
pub mod retention;
pub mod stream_slots;
pub mod usage_sync;

use std::sync::Arc;

use ratewire_service::clients::{AttemptLimit, ClientAddresses};

use keys::{Caller, KeyStore};
use limits::Limiter;
use plans::{Limits, Plans};
use stream_slots::StreamSlots;

/// What the gate and the handlers consult about callers.
pub struct Access {
    pub key_store: KeyStore,
    pub limiter: Arc<Limiter>,
    pub plans: Arc<Plans>,
    /// Who a request's client is (trusted proxies, IPv6 by network).
    pub clients: ClientAddresses,
    /// Postgres key lookups per client (keys no cache knows), at most the
    /// anonymous plan's per-minute allowance.
    pub key_lookups: AttemptLimit,
    /// Requests without a key are served (under the anonymous plan).
    pub anonymous_access: bool,
    /// Requests are counted and limited.
    pub rate_limits: bool,
    /// Live streams held per caller, across instances.
    pub stream_slots: Arc<StreamSlots>,
}

impl Access {
    /// The limits of `caller`'s plan (the anonymous plan's, with a warning,
    /// for a plan no longer configured).
    pub fn limits_of(&self, caller: &Caller) -> Limits {
        self.plans.get(&caller.plan).unwrap_or_else(|| {
            tracing::warn!(
                plan = caller.plan,
                key = caller.prefix,
                "key on an unconfigured plan; using anonymous limits"
            );
            self.plans.anonymous()
        })
    }
}
