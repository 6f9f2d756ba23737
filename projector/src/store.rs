//! Reads from the read model what the views need.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode, SocialLink};
use rust_decimal::Decimal;
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor, Row};

use crate::error::Result;
use crate::views::{
    pick_best, BankInfo, BankView, BestEntry, Candidate, Field, HistoryRecord, PreviousRate,
    RateView,
};

const BANK_COLUMNS: &str = "b.id, b.code, b.name, b.image_url, b.social_links, b.active,
    (SELECT max(as_of) FROM boards WHERE bank_id = b.id) AS last_rates_updated_at";

fn bank_from_row(row: &sqlx::postgres::PgRow) -> Result<(BankInfo, Option<DateTime<Utc>>)> {
    let id: i64 = row.try_get("id")?;
    let social: Json<Vec<SocialLink>> = row.try_get("social_links")?;
    let info = BankInfo {
        // The fold only ever stores ids that came in a valid BankId.
        id: BankId::new(id).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        code: row.try_get("code")?,
        name: row.try_get("name")?,
        image_url: row.try_get("image_url")?,
        social_links: social.0,
        active: row.try_get("active")?,
    };
    Ok((info, row.try_get("last_rates_updated_at")?))
}

/// One bank, active or not, with the time of its latest board.
pub async fn bank<'e>(
    db: impl PgExecutor<'e>,
    id: BankId,
) -> Result<Option<(BankInfo, Option<DateTime<Utc>>)>> {
    let row = sqlx::query(&format!(
        "SELECT {BANK_COLUMNS} FROM banks b WHERE b.id = $1"
    ))
    .bind(id.get())
    .fetch_optional(db)
    .await?;
    row.as_ref().map(bank_from_row).transpose()
}

/// Every bank id, active or not, in id order.
pub async fn bank_ids<'e>(db: impl PgExecutor<'e>) -> Result<Vec<BankId>> {
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM banks ORDER BY id")
        .fetch_all(db)
        .await?;
    Ok(ids
        .into_iter()
        .filter_map(|id| BankId::new(id).ok())
        .collect())
}

/// The bank's latest board, each currency with its previous value.
pub async fn latest_board<'e>(db: impl PgExecutor<'e>, id: BankId) -> Result<Vec<RateView>> {
    let rows = sqlx::query(&format!(
        "WITH latest AS (
             SELECT as_of FROM boards WHERE bank_id = $1 ORDER BY as_of DESC LIMIT 1
         )
         SELECT {RATE_COLUMNS}
         FROM rates r
         JOIN latest l ON r.as_of = l.as_of
         {PREVIOUS_JOIN}
         WHERE r.bank_id = $1
         ORDER BY r.currency"
    ))
    .bind(id.get())
    .fetch_all(db)
    .await?;
    rows.iter().map(rate_from_row).collect()
}

/// A rate row and the same bank's previous value of that currency, as
/// [`rate_from_row`] reads them; used with [`PREVIOUS_JOIN`].
const RATE_COLUMNS: &str = "r.currency, r.as_of, r.cash_buying, r.cash_selling,
    r.transactional_buying, r.transactional_selling,
    p.cash_buying AS p_cash_buying, p.cash_selling AS p_cash_selling,
    p.transactional_buying AS p_transactional_buying,
    p.transactional_selling AS p_transactional_selling, p.as_of AS p_as_of";

/// Joins `p`, the latest earlier rate of the same bank and currency as `r`.
const PREVIOUS_JOIN: &str = "LEFT JOIN LATERAL (
        SELECT * FROM rates p
        WHERE p.bank_id = r.bank_id AND p.currency = r.currency AND p.as_of < r.as_of
        ORDER BY p.as_of DESC LIMIT 1
    ) p ON true";

fn rate_from_row(row: &sqlx::postgres::PgRow) -> Result<RateView> {
    let code: String = row.try_get("currency")?;
    let previous = match row.try_get::<Option<DateTime<Utc>>, _>("p_as_of")? {
        Some(_) => Some(PreviousRate {
            cash_buying: row.try_get("p_cash_buying")?,
            cash_selling: row.try_get("p_cash_selling")?,
            transactional_buying: row.try_get("p_transactional_buying")?,
            transactional_selling: row.try_get("p_transactional_selling")?,
        }),
        None => None,
    };
    Ok(RateView {
        currency: CurrencyCode::parse(code.trim()).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        updated_at: row.try_get("as_of")?,
        cash_buying: row.try_get::<Decimal, _>("cash_buying")?,
        cash_selling: row.try_get("cash_selling")?,
        transactional_buying: row.try_get("transactional_buying")?,
        transactional_selling: row.try_get("transactional_selling")?,
        previous,
    })
}

/// Everything a bank's views are made of; `None` for an unknown bank.
pub async fn bank_view(pool: &sqlx::PgPool, id: BankId) -> Result<Option<BankView>> {
    Ok(bank_views(pool, &[id])
        .await?
        .pop()
        .and_then(|(_, view)| view))
}

/// The views of `ids`, in the order given (`None` for an unknown bank):
/// two statements in one snapshot however many banks, so a batch that
/// touched fifty banks costs what one did.
pub async fn bank_views(
    pool: &sqlx::PgPool,
    ids: &[BankId],
) -> Result<Vec<(BankId, Option<BankView>)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let raw: Vec<i64> = ids.iter().map(|id| id.get()).collect();
    // One snapshot for both reads, so each board matches its bank row.
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let bank_rows = sqlx::query(&format!(
        "SELECT {BANK_COLUMNS} FROM banks b WHERE b.id = ANY($1)"
    ))
    .bind(&raw)
    .fetch_all(&mut *tx)
    .await?;
    let rate_rows = sqlx::query(&format!(
        "WITH latest AS (
             SELECT w.bank_id,
                 (SELECT max(as_of) FROM boards WHERE bank_id = w.bank_id) AS as_of
             FROM unnest($1::bigint[]) AS w(bank_id)
         )
         SELECT r.bank_id, {RATE_COLUMNS}
         FROM latest l
         JOIN rates r ON r.bank_id = l.bank_id AND r.as_of = l.as_of
         {PREVIOUS_JOIN}
         ORDER BY r.bank_id, r.currency"
    ))
    .bind(&raw)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;

    let mut rates: HashMap<i64, Vec<RateView>> = HashMap::new();
    for row in &rate_rows {
        let bank: i64 = row.try_get("bank_id")?;
        rates.entry(bank).or_default().push(rate_from_row(row)?);
    }
    let mut banks: HashMap<i64, BankView> = HashMap::with_capacity(bank_rows.len());
    for row in &bank_rows {
        let (bank, last_rates_updated_at) = bank_from_row(row)?;
        let id = bank.id.get();
        banks.insert(
            id,
            BankView {
                bank,
                last_rates_updated_at,
                rates: rates.remove(&id).unwrap_or_default(),
            },
        );
    }
    Ok(ids
        .iter()
        .map(|id| (*id, banks.remove(&id.get())))
        .collect())
}

/// Views of every active bank, in id order.
pub async fn active_bank_views(pool: &sqlx::PgPool) -> Result<Vec<BankView>> {
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM banks WHERE active ORDER BY id")
        .fetch_all(pool)
        .await?;
    let ids: Vec<BankId> = ids
        .into_iter()
        .filter_map(|id| BankId::new(id).ok())
        .collect();
    Ok(bank_views(pool, &ids)
        .await?
        .into_iter()
        .filter_map(|(_, view)| view)
        .filter(|view| view.bank.active)
        .collect())
}

/// The latest board of every active bank, as a reusable SQL fragment.
const ACTIVE_LATEST: &str = "SELECT b.id AS bank_id,
        (SELECT max(as_of) FROM boards WHERE bank_id = b.id) AS as_of
    FROM banks b WHERE b.active";

/// How many active banks quote each currency on their current board.
pub async fn currency_counts<'e>(db: impl PgExecutor<'e>) -> Result<Vec<(CurrencyCode, i64)>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(&format!(
        "WITH latest AS ({ACTIVE_LATEST})
         SELECT r.currency, count(*) FROM rates r
         JOIN latest l ON r.bank_id = l.bank_id AND r.as_of = l.as_of
         GROUP BY r.currency"
    ))
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(code, n)| CurrencyCode::parse(code.trim()).ok().map(|c| (c, n)))
        .collect())
}

/// Every currency any board ever quoted.
pub async fn known_currencies<'e>(db: impl PgExecutor<'e>) -> Result<Vec<CurrencyCode>> {
    let codes: Vec<String> = sqlx::query_scalar("SELECT code FROM currencies ORDER BY code")
        .fetch_all(db)
        .await?;
    Ok(codes
        .iter()
        .filter_map(|c| CurrencyCode::parse(c.trim()).ok())
        .collect())
}

pub async fn currency_known<'e>(db: impl PgExecutor<'e>, code: CurrencyCode) -> Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM currencies WHERE code = $1)")
            .bind(code.as_str())
            .fetch_one(db)
            .await?,
    )
}

/// Each active bank's current quote for `code`, with its previous values.
pub async fn quotes(pool: &sqlx::PgPool, code: CurrencyCode) -> Result<Vec<(BankInfo, RateView)>> {
    Ok(quotes_of(pool, &[code])
        .await?
        .remove(&code)
        .unwrap_or_default())
}

/// [`quotes`] of several currencies in one statement, by currency (a
/// currency nobody quotes is absent).
pub async fn quotes_of<'e>(
    db: impl PgExecutor<'e>,
    codes: &[CurrencyCode],
) -> Result<HashMap<CurrencyCode, Vec<(BankInfo, RateView)>>> {
    let codes: Vec<&str> = codes.iter().map(CurrencyCode::as_str).collect();
    let rows = sqlx::query(&format!(
        // Each bank's latest as-of once (MATERIALIZED: inlined, it was
        // computed again for every output row), then that board's rates in
        // one range of the (bank, as-of) index per bank: from missing or
        // stale statistics the planner otherwise probed every bank and
        // currency apart, or scanned every rate of a currency.
        "WITH latest AS MATERIALIZED ({ACTIVE_LATEST})
         SELECT b.id, b.code, b.name, b.image_url, b.social_links, b.active,
                l.as_of AS last_rates_updated_at, {RATE_COLUMNS}
         FROM latest l
         JOIN banks b ON b.id = l.bank_id
         JOIN rates r ON r.bank_id = l.bank_id AND r.as_of = l.as_of
                     AND r.currency = ANY($1::text[]::bpchar[])
         {PREVIOUS_JOIN}
         ORDER BY b.id"
    ))
    .bind(&codes)
    .fetch_all(db)
    .await?;
    let mut quotes: HashMap<CurrencyCode, Vec<(BankInfo, RateView)>> = HashMap::new();
    for row in &rows {
        let rate = rate_from_row(row)?;
        quotes
            .entry(rate.currency)
            .or_default()
            .push((bank_from_row(row)?.0, rate));
    }
    Ok(quotes)
}

/// How far back the best-rates series reaches, and how many points it has at most.
pub const SERIES_DAYS: i64 = 30;
pub const SERIES_POINTS: i64 = 100;
/// A busy series keeps the last value of each bucket: fixed slices of time,
/// a whole number of seconds, aligned to the Unix epoch.
pub const SERIES_BUCKET_SECONDS: i64 = SERIES_DAYS * 86_400 / SERIES_POINTS;
const _: () = assert!(SERIES_DAYS * 86_400 % SERIES_POINTS == 0);

/// The bucket of a busy series that `at` falls in.
pub fn series_bucket(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(SERIES_BUCKET_SECONDS)
}

/// One point of a series: when, and the value.
pub type Point = (DateTime<Utc>, Decimal);

/// A series as read, with what a reader needs to carry it forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesRead {
    pub points: Vec<Point>,
    /// The 101st-newest value's time when the window holds more than
    /// `SERIES_POINTS` values (the series is then bucketed): as long as it
    /// stays inside the window, so do at least 101 values.
    pub pivot: Option<DateTime<Utc>>,
    /// The newest value's time (`None`: no value in the window).
    pub newest: Option<DateTime<Utc>>,
}

/// The bank's values of `column` for `code` over the `SERIES_DAYS` before
/// `until`, oldest first: every value when there are at most
/// `SERIES_POINTS`, else the last value of each of the newest
/// `SERIES_POINTS` buckets that hold one, so a bank publishing every few
/// seconds still gives an even 30-day curve.
pub async fn series(
    pool: &sqlx::PgPool,
    bank: BankId,
    code: CurrencyCode,
    column: &'static str,
    until: DateTime<Utc>,
) -> Result<Vec<Point>> {
    let mut db = pool.acquire().await?;
    Ok(series_read(&mut db, bank, code, column, until)
        .await?
        .points)
}

/// [`series`], with its pivot and newest time.
pub async fn series_read(
    db: &mut PgConnection,
    bank: BankId,
    code: CurrencyCode,
    column: &'static str,
    until: DateTime<Utc>,
) -> Result<SeriesRead> {
    let since = until - chrono::Duration::days(SERIES_DAYS);
    let window = format!(
        "FROM rates WHERE bank_id = $1 AND currency = $2::bpchar AND as_of > $3 AND as_of <= $4 AND {column} IS NOT NULL"
    );
    // At most SERIES_POINTS + 1 rows tell whether bucketing is needed.
    let mut points: Vec<Point> = sqlx::query_as(&format!(
        "SELECT as_of, {column} {window} ORDER BY as_of DESC LIMIT $5"
    ))
    .bind(bank.get())
    .bind(code.as_str())
    .bind(since)
    .bind(until)
    .bind(SERIES_POINTS + 1)
    .fetch_all(&mut *db)
    .await?;
    let newest = points.first().map(|(at, _)| *at);
    let mut pivot = None;
    if points.len() as i64 > SERIES_POINTS {
        pivot = points.last().map(|(at, _)| *at);
        // Buckets are fixed slices of time, not slices of the window: the
        // series then depends only on the data, so every render of the same
        // history (another API instance, a replay, a later refresh) gives
        // the same points. One index probe per bucket (the last value in
        // it), newest bucket first: the cost stays ~100 probes however many
        // rows 30 days of frequent boards hold, where grouping every row
        // grew with them.
        points = sqlx::query_as(&format!(
            "SELECT p.as_of, p.value
             FROM generate_series(
                     div(extract(epoch FROM $4::timestamptz)::numeric, $5)::bigint,
                     div(extract(epoch FROM $3::timestamptz)::numeric, $5)::bigint,
                     -1) AS b (bucket)
             CROSS JOIN LATERAL (
                 SELECT as_of, {column} AS value {window}
                   AND as_of >= to_timestamp(b.bucket * $5)
                   AND as_of < to_timestamp((b.bucket + 1) * $5)
                 ORDER BY as_of DESC LIMIT 1
             ) p
             ORDER BY b.bucket DESC LIMIT $6"
        ))
        .bind(bank.get())
        .bind(code.as_str())
        .bind(since)
        .bind(until)
        .bind(SERIES_BUCKET_SECONDS)
        .bind(SERIES_POINTS)
        .fetch_all(&mut *db)
        .await?;
    }
    points.sort_by_key(|(at, _)| *at);
    Ok(SeriesRead {
        points,
        pivot,
        newest,
    })
}

/// A bank's rate rows for one currency after a time, as [`rates_after`]
/// reads them: the four values, by field order.
#[derive(Debug, Clone)]
pub struct RateRow {
    pub as_of: DateTime<Utc>,
    pub values: [Option<Decimal>; 4],
}

/// The rows of each (bank, currency) with `after < as_of <= until`, oldest
/// first, at most `limit` of them (the newest when there are more), in one
/// statement.
pub async fn rates_after(
    db: &mut PgConnection,
    keys: &[(BankId, CurrencyCode, DateTime<Utc>)],
    until: DateTime<Utc>,
    limit: i64,
) -> Result<HashMap<(BankId, CurrencyCode), Vec<RateRow>>> {
    let banks: Vec<i64> = keys.iter().map(|(b, _, _)| b.get()).collect();
    let codes: Vec<&str> = keys.iter().map(|(_, c, _)| c.as_str()).collect();
    let after: Vec<DateTime<Utc>> = keys.iter().map(|(_, _, t)| *t).collect();
    let rows = sqlx::query(
        "SELECT k.bank_id, k.currency, r.as_of, r.cash_buying, r.cash_selling,
                r.transactional_buying, r.transactional_selling
         FROM UNNEST($1::bigint[], $2::text[], $3::timestamptz[]) AS k (bank_id, currency, after)
         CROSS JOIN LATERAL (
             SELECT * FROM rates
             WHERE bank_id = k.bank_id AND currency = k.currency::bpchar
               AND as_of > k.after AND as_of <= $4
             ORDER BY as_of DESC LIMIT $5
         ) r
         ORDER BY k.bank_id, k.currency, r.as_of",
    )
    .bind(&banks)
    .bind(&codes)
    .bind(&after)
    .bind(until)
    .bind(limit)
    .fetch_all(&mut *db)
    .await?;
    let mut found: HashMap<(BankId, CurrencyCode), Vec<RateRow>> = HashMap::new();
    for row in &rows {
        let bank: i64 = row.try_get("bank_id")?;
        let code: String = row.try_get("currency")?;
        let (Ok(bank), Ok(code)) = (BankId::new(bank), CurrencyCode::parse(code.trim())) else {
            continue;
        };
        found.entry((bank, code)).or_default().push(RateRow {
            as_of: row.try_get("as_of")?,
            values: [
                Some(row.try_get("cash_buying")?),
                Some(row.try_get("cash_selling")?),
                row.try_get("transactional_buying")?,
                row.try_get("transactional_selling")?,
            ],
        });
    }
    Ok(found)
}

/// Each bank's `history_rev` (see migration 0003).
pub async fn history_revisions<'e>(
    db: impl PgExecutor<'e>,
    banks: &[BankId],
) -> Result<HashMap<BankId, i64>> {
    let ids: Vec<i64> = banks.iter().map(|b| b.get()).collect();
    let rows: Vec<(i64, i64)> =
        sqlx::query_as("SELECT id, history_rev FROM banks WHERE id = ANY($1)")
            .bind(&ids)
            .fetch_all(db)
            .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, rev)| BankId::new(id).ok().map(|id| (id, rev)))
        .collect())
}

/// The best rates for `code` at `now`; `None` when no active bank quotes it.
pub async fn best_rates(
    pool: &sqlx::PgPool,
    code: CurrencyCode,
    now: DateTime<Utc>,
) -> Result<Option<[Option<BestEntry>; 4]>> {
    best_rates_from(pool, code, &quotes(pool, code).await?, now).await
}

/// Which quote is best for each field (by [`Field::ALL`] order).
pub fn best_picks(quotes: &[(BankInfo, RateView)]) -> [Option<usize>; 4] {
    let candidates: Vec<Candidate<'_>> = quotes
        .iter()
        .map(|(bank, rate)| Candidate { bank, rate })
        .collect();
    Field::ALL.map(|field| pick_best(field, &candidates))
}

/// The entry for `field` of a best quote, with its series.
pub fn best_entry(
    field: Field,
    (bank, rate): &(BankInfo, RateView),
    series: Vec<Point>,
) -> BestEntry {
    BestEntry {
        bank: bank.clone(),
        price: field.of(rate).expect("pick_best only picks quoted fields"),
        updated_at: rate.updated_at,
        previous: rate.previous.as_ref().and_then(|p| field.of_previous(p)),
        series,
    }
}

/// [`best_rates`] from quotes already read (see [`quotes_of`]).
pub async fn best_rates_from(
    pool: &sqlx::PgPool,
    code: CurrencyCode,
    quotes: &[(BankInfo, RateView)],
    now: DateTime<Utc>,
) -> Result<Option<[Option<BestEntry>; 4]>> {
    if quotes.is_empty() {
        return Ok(None);
    }
    let mut entries: [Option<BestEntry>; 4] = Default::default();
    for ((slot, field), pick) in entries.iter_mut().zip(Field::ALL).zip(best_picks(quotes)) {
        let Some(i) = pick else {
            continue;
        };
        let quote = &quotes[i];
        let series = series(pool, quote.0.id, code, field.column(), now).await?;
        *slot = Some(best_entry(field, quote, series));
    }
    Ok(Some(entries))
}

/// The record of `bank` for `code` in force just before `before`.
pub async fn history<'e>(
    db: impl PgExecutor<'e>,
    bank: BankId,
    code: CurrencyCode,
    before: DateTime<Utc>,
) -> Result<Option<HistoryRecord>> {
    let row = sqlx::query(
        "SELECT as_of, cash_buying, cash_selling, transactional_buying, transactional_selling
         FROM rates WHERE bank_id = $1 AND currency = $2::bpchar AND as_of < $3
         ORDER BY as_of DESC LIMIT 1",
    )
    .bind(bank.get())
    .bind(code.as_str())
    .bind(before)
    .fetch_optional(db)
    .await?;
    row.map(|row| {
        Ok(HistoryRecord {
            currency: code,
            as_of: row.try_get("as_of")?,
            cash_buying: row.try_get("cash_buying")?,
            cash_selling: row.try_get("cash_selling")?,
            transactional_buying: row.try_get("transactional_buying")?,
            transactional_selling: row.try_get("transactional_selling")?,
        })
    })
    .transpose()
}
