//! Rate alerts and their webhooks: what the API (which registers them),
//! the fold (which evaluates them) and the deliverer (which calls the
//! webhooks) share.
//!
//! - [`address`]: where a webhook may point (no internal addresses);
//! - [`signing`]: Standard Webhooks secrets and signatures;
//! - [`sealing`]: secrets sealed at rest under the operators' key.
//!
//! The tables live in a schema of their own ([`AlertSettings::schema`]),
//! migrated by every process that uses them; see the migration for what
//! each holds.

pub mod address;
pub mod sealing;
pub mod signing;

use ratewire_service::settings::parse_schema;
use sqlx::PgPool;

use crate::error::Result;
/// The rate an alert watches: one of a board's four.
pub use crate::views::Field;
pub use address::AddressPolicy;
pub use sealing::SealingKey;
pub use signing::Secret;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./alerts_migrations");

/// Creates the alerts schema and applies its migrations.
pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    Ok(ratewire_service::postgres::migrate(pool, schema, &MIGRATOR).await?)
}

/// The channel the outbox's trigger notifies (its payload: the schema).
pub const DELIVERIES_CHANNEL: &str = "ratewire_deliveries";

/// The Redis stream the crossings are offered on for the live stream's
/// `alert` events (entries `owner`, `data`), under `RATEWIRE_REDIS_PREFIX`:
/// of no generation (alerts are not part of one).
pub fn stream_key(redis_prefix: &str) -> String {
    format!("{redis_prefix}alerts")
}

/// Entries the alerts stream keeps, about (live events only: a client
/// that reconnects does not get them again; the webhook is what is kept).
pub const STREAM_LENGTH: u64 = 10_000;

#[derive(clap::Args, Debug, Clone)]
pub struct AlertSettings {
    /// Postgres schema of webhooks, alerts and their outbox (users'
    /// settings: a replay keeps them).
    #[arg(long, env = "RATEWIRE_ALERTS_SCHEMA", default_value = "alerts", value_parser = parse_schema)]
    pub alerts_schema: String,
    /// Key sealing webhook signing secrets at rest: 32 bytes, base64
    /// (`openssl rand -base64 32`). The API and the projectors need the
    /// same one; unset, webhooks cannot be created (503) nor delivered.
    #[arg(long, env = "RATEWIRE_WEBHOOK_SECRETS_KEY", hide_env_values = true)]
    pub webhook_secrets_key: Option<SealingKey>,
    /// Deliver webhooks to loopback and private addresses (a receiver on
    /// 127.0.0.1 for the local stack). Link-local and cloud metadata
    /// addresses stay refused.
    #[arg(long, env = "RATEWIRE_WEBHOOK_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub webhook_allow_private: bool,
}

impl AlertSettings {
    pub fn address_policy(&self) -> AddressPolicy {
        AddressPolicy {
            allow_private: self.webhook_allow_private,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Condition {
    /// Strictly greater than the threshold.
    Above,
    /// Strictly less than the threshold.
    Below,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Condition::Above => "above",
            Condition::Below => "below",
        }
    }

    pub fn parse(name: &str) -> Option<Condition> {
        [Condition::Above, Condition::Below]
            .into_iter()
            .find(|c| c.name() == name)
    }
}

/// The transaction lock (`pg_advisory_xact_lock`, "rwalerts") the fold
/// holds while it judges alerts, and alerts' creation holds shared: an
/// alert is made wholly before or after an evaluation, so it knows which
/// evaluation of its watch is its first.
pub const EVALUATION_LOCK: i64 = 0x7277_616c_6572_7473;

/// The event types webhooks receive.
pub const THRESHOLD_CROSSED: &str = "rate.threshold_crossed";
pub const WEBHOOK_TEST: &str = "webhook.test";
