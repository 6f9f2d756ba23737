//! Postgres: the API's own tables (keys, usage) in their schema, reached
//! through `search_path`; the read model has pools of its own (`read_model`).

use sqlx::PgPool;

use crate::error::Result;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

pub fn pool(url: &str, schema: &str) -> Result<PgPool> {
    Ok(ratewire_readmodel::db::pool(url, schema, 16)?)
}

pub async fn migrate(pool: &PgPool, schema: &str) -> Result<()> {
    ratewire_service::postgres::migrate(pool, schema, &MIGRATOR)
        .await
        .map_err(|e| crate::Error::Startup(format!("migrations: {e}")))
}
