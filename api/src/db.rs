//! Postgres: the API's own tables (keys, usage) in their schema, reached
//! through `search_path`; the read model has pools of its own (`read_model`).

use sqlx::PgPool;

use crate::error::Result;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

pub fn pool(url: &str, schema: &str) -> Result<PgPool> {
    Ok(ratewire_projector::db::pool(url, schema, 16)?)
}

pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    ratewire_projector::db::create_schema(pool, schema).await?;
    MIGRATOR
        .run(pool)
        .await
        .map_err(|e| crate::Error::Startup(format!("migrations: {e}")))?;
    Ok(())
}
