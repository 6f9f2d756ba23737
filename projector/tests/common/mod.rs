//! What the projector's Postgres tests share: a database of their own.
// Each test file uses a part of these.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, NaiveDate, Utc};
use ratewire_projector::fold::model::{
    Bank, Board, Model, Position, Quote, ReferenceDay, ReferenceQuote, Retraction, Stored,
};
use ratewire_projector::fold::Incoming;
use ratewire_proto::{
    encode, BankId, BankRegistered, BoardPublished, CurrencyCode, Envelope, Event, Pair, Rate,
    RateEntry, SocialLink,
};
use ratewire_readmodel::db;
use ratewire_service::testing::TestDatabase;
use rust_decimal::Decimal;
use sqlx::types::Json;
use sqlx::PgPool;
use uuid::Uuid;

/// A new database of the test's own (gone with the returned value), the
/// read model migrated into schema `readmodel`.
pub async fn fresh_pool(prefix: &str) -> anyhow::Result<(PgPool, TestDatabase)> {
    let database = TestDatabase::create(prefix).await?;
    // Nothing here must survive a crash: commits need not wait for the disk.
    let pool = db::pool(&database.url(), "readmodel", 4)?;
    sqlx::query(&format!(
        "ALTER DATABASE {} SET synchronous_commit = off",
        database.name()
    ))
    .execute(&pool)
    .await?;
    pool.close().await;
    let pool = db::writer_pool(&database.url(), "readmodel", 4)?;
    db::migrate(&pool, "readmodel").await?;
    Ok((pool, database))
}

/// Closes the pool, then the database goes.
pub async fn drop_database(pool: PgPool, database: TestDatabase) -> anyhow::Result<()> {
    pool.close().await;
    drop(database);
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

/// Bank `id`'s registration at `now`, then one board a minute for
/// `boards` minutes (USD cash buying 155.01, 155.02, ...).
pub fn bank_and_boards(id: i64, now: DateTime<Utc>, boards: i64) -> Vec<Envelope> {
    let bank = BankId::new(id).expect("a bank id");
    let mut log = vec![Envelope::new(
        bank,
        now,
        Event::BankRegistered(BankRegistered {
            code: format!("B{id}"),
            name: format!("Bank {id}"),
            image_url: format!("https://i.test/b{id}.png"),
            social_links: vec![],
            schedule: None,
        }),
    )];
    for minute in 1..=boards {
        let at = now + chrono::Duration::minutes(minute);
        log.push(Envelope::new(
            bank,
            at,
            Event::BoardPublished(board(
                at,
                vec![entry("USD", dec(15_500 + minute), dec(15_800), None)],
            )),
        ));
    }
    log
}

/// The log's messages for `log`, on partition 0, keyed by bank.
pub fn messages(log: &[Envelope]) -> Vec<Incoming> {
    log.iter()
        .enumerate()
        .map(|(offset, e)| Incoming::keyed(0, offset as i64, e.bank_id, encode(e)))
        .collect()
}

/// Everything the read model holds, as the fold's core models it, and the
/// dead letters as (event id, rule).
pub async fn dump(pool: &PgPool) -> anyhow::Result<(Model, BTreeSet<(Option<Uuid>, String)>)> {
    let mut model = Model::default();
    for (id, partition, offset) in sqlx::query_as::<_, (Uuid, i32, i64)>(
        r#"SELECT event_id, partition, "offset" FROM applied_events"#,
    )
    .fetch_all(pool)
    .await?
    {
        model.applied.insert(id, Position { partition, offset });
    }
    let banks: Vec<BankRow> = sqlx::query_as(
        "SELECT id, code, name, image_url, social_links, active, registered_at, updated_at,
                schedule FROM banks",
    )
    .fetch_all(pool)
    .await?;
    for row in banks {
        let bank = Bank {
            code: row.code,
            name: row.name,
            image_url: row.image_url,
            social_links: row.social_links.0,
            active: row.active,
            registered_at: row.registered_at,
            updated_at: row.updated_at,
            schedule: row.schedule.map(|s| s.0),
        };
        model.banks.insert(BankId::new(row.id)?, bank);
    }
    let mut quotes: BTreeMap<(i64, DateTime<Utc>), Vec<Quote>> = BTreeMap::new();
    let rates: Vec<RateRow> = sqlx::query_as(
        "SELECT bank_id, as_of, currency::text AS currency, cash_buying, cash_selling,
                transactional_buying, transactional_selling FROM rates",
    )
    .fetch_all(pool)
    .await?;
    for row in rates {
        quotes
            .entry((row.bank_id, row.as_of))
            .or_default()
            .push(Quote {
                currency: CurrencyCode::parse(&row.currency)?,
                cash_buying: row.cash_buying,
                cash_selling: row.cash_selling,
                transactional_buying: row.transactional_buying,
                transactional_selling: row.transactional_selling,
            });
    }
    for (bank, as_of, event_id, currencies) in
        sqlx::query_as::<_, (i64, DateTime<Utc>, Uuid, Vec<String>)>(
            "SELECT bank_id, as_of, event_id, currencies::text[] FROM boards",
        )
        .fetch_all(pool)
        .await?
    {
        let board = Board::new(event_id, quotes.remove(&(bank, as_of)).unwrap_or_default());
        let listed: Vec<String> = board.currencies().map(|c| c.to_string()).collect();
        anyhow::ensure!(
            currencies
                .iter()
                .map(|c| c.trim().to_owned())
                .collect::<Vec<_>>()
                == listed,
            "board {bank} {as_of}: its currencies {currencies:?} are not its rates' {listed:?}"
        );
        model.boards.insert((BankId::new(bank)?, as_of), board);
    }
    anyhow::ensure!(quotes.is_empty(), "rates of no board: {:?}", quotes.keys());
    // How the boards in force are stored: a value read from the base is
    // NULL (an empty array: every value of a board of one currency).
    for (event_id, base, same) in sqlx::query_as::<_, (Uuid, Uuid, Vec<String>)>(
        "SELECT event_id, base_event_id,
                ARRAY(SELECT q.c::text FROM unnest(currencies, cash_buying) AS q (c, v)
                      WHERE v IS NULL)
         FROM boards WHERE base_event_id IS NOT NULL",
    )
    .fetch_all(pool)
    .await?
    {
        let same = same
            .iter()
            .map(|c| CurrencyCode::parse(c.trim()))
            .collect::<Result<_, _>>()?;
        model
            .stored
            .insert(event_id, Stored::Against { base, same });
    }
    for (code, first) in sqlx::query_as::<_, (String, DateTime<Utc>)>(
        "SELECT code::text, first_quoted_at FROM currencies",
    )
    .fetch_all(pool)
    .await?
    {
        model
            .first_quoted
            .insert(CurrencyCode::parse(&code)?, first);
    }
    for (id, bank, by, reason, at) in
        sqlx::query_as::<_, (Uuid, i64, Uuid, Option<String>, DateTime<Utc>)>(
            "SELECT event_id, bank_id, retracted_by, reason, retracted_at FROM retracted_boards",
        )
        .fetch_all(pool)
        .await?
    {
        let retraction = Retraction {
            bank: BankId::new(bank)?,
            by,
            reason,
            at,
        };
        model.retracted.insert(id, retraction);
    }
    let mut days: BTreeMap<(String, NaiveDate), Vec<ReferenceQuote>> = BTreeMap::new();
    for (source, date, currency, buying, selling, weighted_average) in
        sqlx::query_as::<_, (String, NaiveDate, String, Decimal, Decimal, Decimal)>(
            "SELECT source, date, currency::text, buying, selling, weighted_average
             FROM reference_rates ORDER BY currency",
        )
        .fetch_all(pool)
        .await?
    {
        days.entry((source, date))
            .or_default()
            .push(ReferenceQuote {
                currency: CurrencyCode::parse(&currency)?,
                buying,
                selling,
                weighted_average,
            });
    }
    for (source, date, event_id, published_at) in
        sqlx::query_as::<_, (String, NaiveDate, Uuid, DateTime<Utc>)>(
            "SELECT source, date, event_id, published_at FROM reference_boards",
        )
        .fetch_all(pool)
        .await?
    {
        let quotes = days.remove(&(source.clone(), date)).unwrap_or_default();
        let day = ReferenceDay {
            event_id,
            published_at,
            quotes,
        };
        model.reference.insert((source, date), day);
    }
    let letters: BTreeSet<(Option<Uuid>, String)> = sqlx::query_as::<
        _,
        (Option<Uuid>, Option<String>),
    >("SELECT event_id, rule FROM dead_letters")
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|(id, rule)| (id, rule.unwrap_or_default()))
    .collect();
    Ok((model, letters))
}

/// Every version the bitemporal tables hold, each row as text, sorted: a
/// fold of the same log must leave the same history however it was
/// batched.
pub async fn versions(pool: &PgPool) -> anyhow::Result<Vec<String>> {
    let mut rows = Vec::new();
    for table in [
        "bank_versions",
        "bank_latest_versions",
        "board_versions",
        "rate_versions",
        "currencies_known",
        "reference_board_versions",
        "reference_rate_versions",
        "retracted_boards",
    ] {
        let mut these: Vec<String> =
            sqlx::query_scalar(&format!("SELECT '{table} ' || t::text FROM {table} t"))
                .fetch_all(pool)
                .await?;
        rows.append(&mut these);
    }
    rows.sort();
    Ok(rows)
}

/// Empties every table of the read model (a fresh case on the same schema).
pub async fn empty(pool: &PgPool) -> anyhow::Result<()> {
    // A few rows each: deleting them is quicker than truncating.
    for table in [
        "applied_events",
        "board_versions",
        "board_bases",
        "bank_versions",
        "bank_history_revs",
        "bank_latest_versions",
        "currencies_known",
        "consumer_offsets",
        "dead_letters",
        "retracted_boards",
        "reference_rate_versions",
        "reference_board_versions",
    ] {
        sqlx::query(&format!("DELETE FROM {table}"))
            .execute(pool)
            .await?;
    }
    Ok(())
}

#[derive(sqlx::FromRow)]
struct BankRow {
    id: i64,
    code: String,
    name: String,
    image_url: String,
    social_links: Json<Vec<SocialLink>>,
    active: bool,
    registered_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    schedule: Option<Json<ratewire_proto::Schedule>>,
}

#[derive(sqlx::FromRow)]
struct RateRow {
    bank_id: i64,
    as_of: DateTime<Utc>,
    currency: String,
    cash_buying: Decimal,
    cash_selling: Decimal,
    transactional_buying: Option<Decimal>,
    transactional_selling: Option<Decimal>,
}
