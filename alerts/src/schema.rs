//! The alerts' tables: a schema of their own (users' settings, not a
//! read-model generation, so a replay keeps them), migrated by every
//! process that uses them; see the migrations for what each table holds.

use sqlx::PgPool;

use crate::error::Result;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Creates the alerts schema and applies its migrations.
pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    Ok(ratewire_service::postgres::migrate(pool, schema, &MIGRATOR).await?)
}

/// A pool on the alerts schema.
pub fn pool(database_url: &str, schema: &str, max_connections: u32) -> Result<PgPool> {
    Ok(ratewire_readmodel::db::pool(
        database_url,
        schema,
        max_connections,
    )?)
}

/// The channel the outbox's trigger notifies (its payload: the schema).
pub const DELIVERIES_CHANNEL: &str = "ratewire_deliveries";

/// The transaction lock (`pg_advisory_xact_lock`, "rwalerts") the fold
/// holds while it judges alerts, and alerts' creation holds shared: an
/// alert is made wholly before or after an evaluation, so it knows which
/// evaluation of its watch is its first.
pub const EVALUATION_LOCK: i64 = 0x7277_616c_6572_7473;

/// The transaction-wide advisory lock a round of the missed-slot judge
/// (`watchdog`) holds, so that one projector at a time judges.
pub const SLOT_WATCH_LOCK: i64 = 0x7277_736c_6f74_7773;

/// The Redis stream the crossings are offered on for the live stream's
/// `alert` events (entries `owner`, `data`), under `RATEWIRE_REDIS_PREFIX`:
/// of no generation (alerts are not part of one).
pub fn stream_key(redis_prefix: &str) -> String {
    format!("{redis_prefix}alerts")
}

/// Entries the alerts stream keeps, about (live events only: a client
/// that reconnects does not get them again; the webhook is what is kept).
pub const STREAM_LENGTH: u64 = 10_000;
