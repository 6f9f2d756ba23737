//! A run of the core's changes written to Postgres, as sets: what stood at
//! the keys they clear goes first (one statement, only when a board or a
//! reference day is replaced or withdrawn), then every new row goes in one
//! statement.

use std::sync::LazyLock;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use sqlx::PgConnection;
use uuid::Uuid;

use super::columns::{BankColumns, RateColumns, RetractionColumns};
use super::core::Net;

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// This many of the events were applied meanwhile by another fold.
    #[error("{0} of the batch's events were applied meanwhile by another fold")]
    Raced(usize),
}

impl From<WriteError> for crate::error::Error {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Database(e) => crate::error::Error::Postgres(e),
            WriteError::Raced(n) => crate::error::Error::AppliedMeanwhile(n),
        }
    }
}

/// Writes `net` in the transaction `db`.
pub async fn write(db: &mut PgConnection, net: &Net) -> Result<(), WriteError> {
    if net.is_empty() {
        return Ok(());
    }
    clear(db, net).await?;
    insert(db, net).await
}

/// Deletes the boards (with their rates) and reference days `net`
/// replaces or withdraws.
async fn clear(db: &mut PgConnection, net: &Net) -> sqlx::Result<()> {
    if net.cleared.is_empty() && net.reference.is_empty() {
        return Ok(());
    }
    let (banks, times): (Vec<i64>, Vec<DateTime<Utc>>) =
        net.cleared.iter().map(|(b, t)| (b.get(), *t)).unzip();
    let (sources, dates): (Vec<String>, Vec<NaiveDate>) = net.reference.keys().cloned().unzip();
    sqlx::query(CLEAR)
        .bind(&banks)
        .bind(&times)
        .bind(&sources)
        .bind(&dates)
        .execute(db)
        .await?;
    Ok(())
}

/// Each board is found by a probe of the boards' key and deleted by row
/// address (a join against the unnested pairs became a scan of every
/// board once Postgres stopped planning each execution of the prepared
/// statement); its rates are found by the rates' key from the currencies
/// it held (OFFSET 0 keeps those probes from becoming a join), and
/// deleted the same way. A reference day's rates go with it (the key
/// cascades).
const CLEAR: &str = "
    WITH old_boards AS (
        DELETE FROM boards t
        WHERE t.ctid = ANY (ARRAY(
            SELECT b.ctid FROM UNNEST($1::bigint[], $2::timestamptz[]) AS k (bank_id, as_of)
            CROSS JOIN LATERAL (SELECT ctid FROM boards b
                                WHERE b.bank_id = k.bank_id AND b.as_of = k.as_of
                                OFFSET 0) b))
        RETURNING t.bank_id, t.as_of, t.currencies
    ), old_rates AS (
        DELETE FROM rates t
        WHERE t.ctid = ANY (ARRAY(
            SELECT r.ctid FROM old_boards o
            CROSS JOIN LATERAL (SELECT ctid FROM rates r
                                WHERE r.bank_id = o.bank_id AND r.currency = ANY (o.currencies)
                                  AND r.as_of = o.as_of
                                OFFSET 0) r))
    )
    DELETE FROM reference_boards t
    WHERE (t.source, t.date) IN (SELECT * FROM UNNEST($3::text[], $4::date[]))";

/// Inserts every row `net` adds, in one statement.
async fn insert(db: &mut PgConnection, net: &Net) -> Result<(), WriteError> {
    let mut rows = Rows::default();
    for (id, at) in &net.applied {
        rows.applied_ids.push(*id);
        rows.applied_partitions.push(at.partition);
        rows.applied_offsets.push(at.offset);
    }
    for (id, (bank, rewritten)) in &net.banks {
        rows.banks.push(*id, bank);
        rows.bank_rewritten.push(i64::from(*rewritten));
    }
    // Rates in the order of their primary key (bank, currency, as-of): a
    // bank's boards then insert each currency's rows one after another
    // into the same index leaf.
    let mut rates = Vec::new();
    for ((bank, as_of), board) in &net.boards {
        rows.board_banks.push(bank.get());
        rows.board_times.push(*as_of);
        rows.board_ids.push(board.event_id);
        // Comma-joined: boards quote different numbers of currencies,
        // which an array of arrays cannot hold.
        rows.board_currencies.push(
            board
                .currencies()
                .map(|c| c.as_str().to_owned())
                .collect::<Vec<_>>()
                .join(","),
        );
        rates.extend(
            board
                .quotes
                .iter()
                .map(|q| (bank.get(), q.currency, *as_of, q)),
        );
    }
    rates.sort_unstable_by_key(|(bank, currency, as_of, _)| (*bank, *currency, *as_of));
    for (bank, _, as_of, quote) in rates {
        rows.rates.push(bank, as_of, quote);
    }
    for (code, first) in &net.first_quoted {
        rows.currency_codes.push(code.as_str().to_owned());
        rows.currency_names.push(code.name());
        rows.currency_firsts.push(*first);
    }
    for (board, retraction) in &net.retracted {
        rows.retracted.push(*board, retraction);
    }
    for ((source, date), day) in &net.reference {
        rows.day_sources.push(source.clone());
        rows.day_dates.push(*date);
        rows.day_ids.push(day.event_id);
        rows.day_published.push(day.published_at);
        for quote in &day.quotes {
            rows.reference_sources.push(source.clone());
            rows.reference_dates.push(*date);
            rows.reference_currencies
                .push(quote.currency.as_str().to_owned());
            rows.reference_buying.push(quote.buying);
            rows.reference_selling.push(quote.selling);
            rows.reference_averages.push(quote.weighted_average);
        }
    }
    let inserted: i64 = sqlx::query_scalar(&INSERT)
        .bind(&rows.applied_ids)
        .bind(&rows.applied_partitions)
        .bind(&rows.applied_offsets)
        .bind(&rows.banks.bank_ids)
        .bind(&rows.banks.bank_codes)
        .bind(&rows.banks.bank_names)
        .bind(&rows.banks.bank_images)
        .bind(&rows.banks.bank_links)
        .bind(&rows.banks.bank_active)
        .bind(&rows.banks.bank_registered)
        .bind(&rows.banks.bank_updated)
        .bind(&rows.bank_rewritten)
        .bind(&rows.board_banks)
        .bind(&rows.board_times)
        .bind(&rows.board_ids)
        .bind(&rows.board_currencies)
        .bind(&rows.currency_codes)
        .bind(&rows.currency_names)
        .bind(&rows.currency_firsts)
        .bind(&rows.rates.rate_banks)
        .bind(&rows.rates.rate_times)
        .bind(&rows.rates.rate_currencies)
        .bind(&rows.rates.cash_buying)
        .bind(&rows.rates.cash_selling)
        .bind(&rows.rates.transactional_buying)
        .bind(&rows.rates.transactional_selling)
        .bind(&rows.retracted.retracted_ids)
        .bind(&rows.retracted.retracted_banks)
        .bind(&rows.retracted.retracted_by)
        .bind(&rows.retracted.retracted_reasons)
        .bind(&rows.retracted.retracted_at)
        .bind(&rows.day_sources)
        .bind(&rows.day_dates)
        .bind(&rows.day_ids)
        .bind(&rows.day_published)
        .bind(&rows.reference_sources)
        .bind(&rows.reference_dates)
        .bind(&rows.reference_currencies)
        .bind(&rows.reference_buying)
        .bind(&rows.reference_selling)
        .bind(&rows.reference_averages)
        .fetch_one(db)
        .await?;
    let expected = rows.applied_ids.len();
    if (inserted as usize) < expected {
        return Err(WriteError::Raced(expected - inserted as usize));
    }
    Ok(())
}

/// The rows of [`insert`], as columns.
#[derive(Default)]
struct Rows {
    applied_ids: Vec<Uuid>,
    applied_partitions: Vec<i32>,
    applied_offsets: Vec<i64>,
    banks: BankColumns,
    bank_rewritten: Vec<i64>,
    board_banks: Vec<i64>,
    board_times: Vec<DateTime<Utc>>,
    board_ids: Vec<Uuid>,
    board_currencies: Vec<String>,
    currency_codes: Vec<String>,
    currency_names: Vec<String>,
    currency_firsts: Vec<DateTime<Utc>>,
    rates: RateColumns,
    retracted: RetractionColumns,
    day_sources: Vec<String>,
    day_dates: Vec<NaiveDate>,
    day_ids: Vec<Uuid>,
    day_published: Vec<DateTime<Utc>>,
    reference_sources: Vec<String>,
    reference_dates: Vec<NaiveDate>,
    reference_currencies: Vec<String>,
    reference_buying: Vec<Decimal>,
    reference_selling: Vec<Decimal>,
    reference_averages: Vec<Decimal>,
}

/// Banks are written whole (their rows as the core made them), and their
/// history revision moves when their history was rewritten. A currency
/// already known from an earlier board is left out before the insert, so
/// that folds of other partitions side by side never wait on each other's
/// rows here; the earliest first quote wins whichever commits first.
/// Every part's foreign keys are checked at the end of the statement, when
/// the banks and reference days are in.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    "WITH applied AS (
         INSERT INTO applied_events (event_id, partition, \"offset\")
         SELECT * FROM UNNEST($1::uuid[], $2::int[], $3::bigint[])
         ON CONFLICT DO NOTHING RETURNING 1
     ), bank AS (
         INSERT INTO banks (id, code, name, image_url, social_links, active, registered_at,
                            updated_at, history_rev)
         SELECT * FROM UNNEST($4::bigint[], $5::text[], $6::text[], $7::text[], $8::jsonb[],
                              $9::bool[], $10::timestamptz[], $11::timestamptz[], $12::bigint[])
         ON CONFLICT (id) DO UPDATE SET code = EXCLUDED.code, name = EXCLUDED.name,
             image_url = EXCLUDED.image_url, social_links = EXCLUDED.social_links,
             active = EXCLUDED.active, updated_at = EXCLUDED.updated_at,
             history_rev = banks.history_rev + EXCLUDED.history_rev
     ), board AS (
         INSERT INTO boards (bank_id, as_of, event_id, currencies)
         SELECT b, t, id, string_to_array(c, ',')::char(3)[]
         FROM UNNEST($13::bigint[], $14::timestamptz[], $15::uuid[], $16::text[]) AS n (b, t, id, c)
     ), currency AS (
         INSERT INTO currencies (code, name, first_quoted_at)
         SELECT c.code, c.name, c.first
         FROM UNNEST($17::text[], $18::text[], $19::timestamptz[]) AS c (code, name, first)
         WHERE NOT EXISTS (SELECT 1 FROM currencies k
                           WHERE k.code = c.code::char(3) AND k.first_quoted_at <= c.first)
         ON CONFLICT (code) DO UPDATE SET first_quoted_at = EXCLUDED.first_quoted_at
         WHERE currencies.first_quoted_at > EXCLUDED.first_quoted_at
     ), rate AS (
         INSERT INTO rates (bank_id, as_of, currency, cash_buying, cash_selling,
                            transactional_buying, transactional_selling)
         SELECT * FROM UNNEST($20::bigint[], $21::timestamptz[], $22::text[], $23::numeric[],
                              $24::numeric[], $25::numeric[], $26::numeric[])
     ), retracted AS (
         INSERT INTO retracted_boards (event_id, bank_id, retracted_by, reason, retracted_at)
         SELECT * FROM UNNEST($27::uuid[], $28::bigint[], $29::uuid[], $30::text[],
                              $31::timestamptz[])
         ON CONFLICT (event_id) DO NOTHING
     ), day AS (
         INSERT INTO reference_boards (source, date, event_id, published_at)
         SELECT * FROM UNNEST($32::text[], $33::date[], $34::uuid[], $35::timestamptz[])
     ), reference AS (
         INSERT INTO reference_rates (source, date, currency, buying, selling, weighted_average)
         SELECT * FROM UNNEST($36::text[], $37::date[], $38::text[], $39::numeric[],
                              $40::numeric[], $41::numeric[])
     )
     SELECT count(*) FROM applied"
        .to_owned()
});
