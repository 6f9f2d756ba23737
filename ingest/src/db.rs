//! Postgres for ingest's own tables, in their own schema.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::error::Result;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// A lazily connecting pool; the schema is reached through `search_path`.
pub fn pool(url: &str, schema: &str) -> Result<PgPool> {
    let options = PgConnectOptions::from_str(url)?.options([("search_path", schema)]);
    Ok(PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(options))
}

pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    if !schema
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        || schema.is_empty()
    {
        return Err(crate::Error::Startup(format!(
            "RATEWIRE_INGEST_SCHEMA {schema:?} is not a plain identifier"
        )));
    }
    match sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .execute(pool)
        .await
    {
        Ok(_) => {}
        // Lost a race with another instance creating it: it exists.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => {}
        Err(e) => return Err(e.into()),
    }
    MIGRATOR
        .run(pool)
        .await
        .map_err(|e| crate::Error::Startup(format!("migrations: {e}")))?;
    Ok(())
}
