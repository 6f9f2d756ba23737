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

/// [`pool`] for the writer (the fold, its views, replays and checks): each
/// prepared statement keeps one generic plan. Its statements are key probes
/// written to keep one plan for any input; planned again for each call, as
/// Postgres chose for most of them, the planning cost more than the run
/// (docs/benchmarks.md, "Figures behind design choices in the code").
pub fn writer_pool(url: &str, schema: &str, max_connections: u32) -> Result<PgPool> {
    Ok(ratewire_service::postgres::pool_with(
        url,
        &[
            ("search_path", schema),
            ("plan_cache_mode", "force_generic_plan"),
        ],
        max_connections,
        ACQUIRE_TIMEOUT,
    )?)
}

/// Creates the read-model schema and applies the embedded migrations.
pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    Ok(ratewire_service::postgres::migrate(pool, schema, &MIGRATOR).await?)
}

/// Gathers the planner's statistics for every table of the pool's schema,
/// as a bulk load (a replay) must before its tables are read: autovacuum
/// comes later. Tables by name, because the read model's familiar names
/// (`banks`, `boards`, `rates`) are views over them, and ANALYZE skips a
/// view without an error. A month of the raw history is left to its
/// partitioned table, whose ANALYZE analyses every month again (named
/// too, each month was read twice: 0.8 s of a 5 s replay).
pub async fn analyze(pool: &PgPool) -> Result<()> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT format('%I', c.relname) FROM pg_class c
         WHERE c.relnamespace = current_schema()::regnamespace
           AND c.relkind IN ('r', 'p') AND NOT c.relispartition
         ORDER BY 1",
    )
    .fetch_all(pool)
    .await?;
    if !tables.is_empty() {
        sqlx::query(&format!("ANALYZE {}", tables.join(", ")))
            .execute(pool)
            .await?;
    }
    Ok(())
}
