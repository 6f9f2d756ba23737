//! Postgres: the API's own schema first in `search_path`, the read model
//! after it, so queries name tables without schemas.

use sqlx::PgPool;

use crate::error::Result;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

pub fn pool(url: &str, schema: &str, read_schema: &str) -> Result<PgPool> {
    Ok(ratewire_projector::db::pool(
        url,
        &format!("{schema},{read_schema}"),
        16,
    )?)
}

pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    ratewire_projector::db::create_schema(pool, schema).await?;
    MIGRATOR
        .run(pool)
        .await
        .map_err(|e| crate::Error::Startup(format!("migrations: {e}")))?;
    Ok(())
}
