//! Postgres connections: each process works in its own schema, reached
//! through `search_path`, so that each keeps its own migration history.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::error::Result;

/// The read model's migrations, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// A lazily connecting pool: the process starts even while Postgres is down
/// and reports it on /readyz instead of crashing.
pub fn pool(url: &str, search_path: &str, max_connections: u32) -> Result<PgPool> {
    let options = PgConnectOptions::from_str(url)?.options([("search_path", search_path)]);
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(3))
        .connect_lazy_with(options))
}

/// Creates `schema` if needed; `schema` has been checked to be a plain identifier.
pub async fn create_schema(pool: &PgPool, schema: &str) -> Result<()> {
    // Two instances starting together may race on CREATE SCHEMA; the loser's
    // unique violation means the schema exists, which is all we want.
    match sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .execute(pool)
        .await
    {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Creates the read-model schema and applies the embedded migrations.
pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    create_schema(pool, schema).await?;
    MIGRATOR.run(pool).await?;
    Ok(())
}
