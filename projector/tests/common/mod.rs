//! What the projector's Postgres tests share: a database of their own.
// Each test file uses a part of these.
#![allow(dead_code)]

use chrono::{DateTime, Utc};
use ratewire_projector::fold::Incoming;
use ratewire_proto::{encode, BoardPublished, CurrencyCode, Envelope, Pair, Rate, RateEntry};
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

/// A rate entry of `code`, cash and maybe transactional, that must be valid.
pub fn entry(
    code: &str,
    buying: Decimal,
    selling: Decimal,
    transactional: Option<(Decimal, Decimal)>,
) -> RateEntry {
    let rate = |d| Rate::new(d).expect("a valid rate");
    let pair = |kind, (b, s)| Pair::new(kind, rate(b), rate(s)).expect("selling >= buying");
    RateEntry::new(
        CurrencyCode::parse(code).expect("a known currency"),
        pair("cash", (buying, selling)),
        transactional.map(|t| pair("transactional", t)),
    )
}

/// A board that must be valid.
pub fn board(as_of: DateTime<Utc>, rates: Vec<RateEntry>) -> BoardPublished {
    BoardPublished::new(as_of, rates).expect("a valid board")
}

/// The log's messages for `log`, on partition 0, keyed by bank.
pub fn messages(log: &[Envelope]) -> Vec<Incoming> {
    log.iter()
        .enumerate()
        .map(|(offset, e)| Incoming::keyed(0, offset as i64, e.bank_id, encode(e)))
        .collect()
}
