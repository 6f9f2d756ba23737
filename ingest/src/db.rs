//! Postgres for ingest's own tables (banks, publisher tokens, idempotency
//! keys), in their own schema.

use std::time::Duration;

use sqlx::PgPool;

use crate::error::Result;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// How long a request waits for a free connection before it gets 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// A lazily connecting pool; the schema is reached through `search_path`.
pub fn pool(url: &str, schema: &str) -> Result<PgPool> {
    Ok(ratewire_service::postgres::pool(
        url,
        schema,
        16,
        ACQUIRE_TIMEOUT,
    )?)
}

/// Creates ingest's schema (a checked identifier) and applies its migrations.
pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    ratewire_service::postgres::migrate(pool, schema, &MIGRATOR)
        .await
        .map_err(|e| crate::Error::Startup(format!("migrations: {e}")))
}
