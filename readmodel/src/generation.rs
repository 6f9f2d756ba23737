//! Read-model generations: which Postgres schema (and with it which Redis
//! views) readers use.
//!
//! A generation is named by its schema; its Redis views live under
//! `{RATEWIRE_REDIS_PREFIX}{{schema}}:` (the schema in braces: a hash tag). The active one is recorded in one row
//! of `{RATEWIRE_CONTROL_SCHEMA}.read_model`; until a replay switches it,
//! there is no row and `RATEWIRE_READ_SCHEMA` is active.
//!
//! `ratewire-projector replay` builds a new generation from offset zero
//! while everything keeps serving the active one, then switches the row.
//! API instances and running projectors watch the row and follow within a
//! second: projectors carry on folding from the new schema's stored offsets,
//! so nothing between the replay's end and their switch is lost.

use sqlx::PgPool;

use crate::error::Result;

/// The Redis key prefix of a generation's views. The schema is a hash tag:
/// in a Redis Cluster every view of a generation is in one slot, so the
/// scripts that write views can touch them together, and the elements of
/// an all-banks list are read in one pipeline; the prefix stays in front,
/// so a scan of it finds them.
pub fn views_prefix(redis_prefix: &str, schema: &str) -> String {
    format!("{redis_prefix}{{{schema}}}:")
}

/// Creates the control table if needed; `control` is a checked identifier.
pub async fn prepare(pool: &PgPool, control: &str) -> Result<()> {
    ratewire_service::postgres::create_schema(pool, control).await?;
    let created = sqlx::query(&format!(
        "CREATE TABLE IF NOT EXISTS {control}.read_model (
             singleton   BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
             schema_name TEXT        NOT NULL,
             switched_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )"
    ))
    .execute(pool)
    .await;
    match created {
        Ok(_) => Ok(()),
        // Two processes creating it at once: the loser finds it made.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The active generation's schema: the control row's, else `default`.
pub async fn active(pool: &PgPool, control: &str, default: &str) -> Result<String> {
    let row: std::result::Result<Option<String>, sqlx::Error> =
        sqlx::query_scalar(&format!("SELECT schema_name FROM {control}.read_model"))
            .fetch_optional(pool)
            .await;
    match row {
        Ok(schema) => Ok(schema.unwrap_or_else(|| default.to_owned())),
        // No control table yet: nothing was ever switched.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P01") => {
            Ok(default.to_owned())
        }
        Err(e) => Err(e.into()),
    }
}

/// Makes `schema` the active generation.
pub async fn switch(pool: &PgPool, control: &str, schema: &str) -> Result<()> {
    prepare(pool, control).await?;
    sqlx::query(&format!(
        "INSERT INTO {control}.read_model (singleton, schema_name) VALUES (TRUE, $1)
         ON CONFLICT (singleton) DO UPDATE SET schema_name = $1, switched_at = now()"
    ))
    .bind(schema)
    .execute(pool)
    .await?;
    Ok(())
}

/// True when `schema` exists and holds any table.
pub async fn schema_in_use(pool: &PgPool, schema: &str) -> Result<bool> {
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(schema)
    .fetch_one(pool)
    .await?;
    Ok(tables > 0)
}
