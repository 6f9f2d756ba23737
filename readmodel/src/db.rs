//! The read model's Postgres schema: its migrations, embedded in every
//! binary that reads or writes it, and pools whose `search_path` is one
//! generation's schema (see [`crate::generation`]).

use std::time::Duration;

use sqlx::PgPool;

use crate::error::Result;

/// The read model's migrations.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// How long a query waits for a free connection before it fails (and the
/// API answers 503): an outage gives errors, not hung requests.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// A lazily connecting pool on `schema`: the process starts even while
/// Postgres is down and reports it on /readyz instead of crashing.
pub fn pool(url: &str, schema: &str, max_connections: u32) -> Result<PgPool> {
    Ok(ratewire_service::postgres::pool(
        url,
        schema,
        max_connections,
        ACQUIRE_TIMEOUT,
    )?)
}

/// Creates the read-model schema and applies the embedded migrations.
pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    Ok(ratewire_service::postgres::migrate(pool, schema, &MIGRATOR).await?)
}
