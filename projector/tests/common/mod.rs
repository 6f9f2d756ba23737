//! What the projector's Postgres tests share: a database of their own.

use ratewire_readmodel::db;
use rust_decimal::Decimal;
use sqlx::PgPool;

const POSTGRES: &str = "postgres://postgres@127.0.0.1:5432";

/// A new database with the read model migrated into schema `readmodel`.
pub async fn fresh_pool(prefix: &str) -> anyhow::Result<(PgPool, String)> {
    let name = format!(
        "{prefix}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let admin = PgPool::connect(&format!("{POSTGRES}/postgres")).await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin)
        .await?;
    admin.close().await;
    let pool = db::pool(&format!("{POSTGRES}/{name}"), "readmodel", 4)?;
    db::migrate(&pool, "readmodel").await?;
    Ok((pool, name))
}

pub async fn drop_database(pool: PgPool, name: &str) -> anyhow::Result<()> {
    pool.close().await;
    let admin = PgPool::connect(&format!("{POSTGRES}/postgres")).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&admin)
        .await?;
    Ok(())
}

pub fn dec(cents: i64) -> Decimal {
    Decimal::new(cents, 2)
}
