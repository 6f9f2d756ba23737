//! Postgres connections: each process works in its own schema, reached
//! through `search_path`, so that each keeps its own migration history.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

/// A lazily connecting pool: the process starts even while Postgres is down
/// and reports it on /readyz instead of crashing. Waits at most
/// `acquire_timeout` for a connection, so an outage turns into errors, not
/// hung requests.
pub fn pool(
    url: &str,
    search_path: &str,
    max_connections: u32,
    acquire_timeout: Duration,
) -> sqlx::Result<PgPool> {
    let options = PgConnectOptions::from_str(url)?.options([("search_path", search_path)]);
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .connect_lazy_with(options))
}

/// Creates `schema` if needed; `schema` has been checked to be a plain
/// identifier (see `settings::parse_schema`).
pub async fn create_schema(pool: &PgPool, schema: &str) -> sqlx::Result<()> {
    // Two instances starting together may race on CREATE SCHEMA; the loser's
    // unique violation means the schema exists, which is all we want.
    match sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .execute(pool)
        .await
    {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates `schema` if needed and applies `migrator` in it (the pool's
/// `search_path` is that schema, so each process keeps its own migration
/// history).
pub async fn migrate(
    pool: &PgPool,
    schema: &str,
    migrator: &sqlx::migrate::Migrator,
) -> Result<(), sqlx::migrate::MigrateError> {
    create_schema(pool, schema)
        .await
        .map_err(sqlx::migrate::MigrateError::Execute)?;
    migrator.run(pool).await
}

/// Whether Postgres answers within a second (for /readyz).
pub async fn ping(pool: &PgPool) -> bool {
    let ping = sqlx::query("SELECT 1").execute(pool);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ping).await,
        Ok(Ok(_))
    )
}
