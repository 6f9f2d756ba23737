//! A bank's 30-day series of one value, as the best-rates view shows it,
//! and the reads that let a writer carry a series forward instead of
//! reading it again (see the projector's series cache).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use rust_decimal::Decimal;
use sqlx::{PgConnection, PgExecutor, Row};

use crate::error::Result;

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

/// The most rows of a busy series' window read at once and bucketed here.
const READ_WHOLE: i64 = 2_000;

/// The last value of each of the newest `SERIES_POINTS` buckets that hold
/// one, from `points` newest first (what the probe per bucket finds).
fn last_of_each_bucket(points: Vec<Point>) -> Vec<Point> {
    let mut kept: Vec<Point> = Vec::with_capacity(SERIES_POINTS as usize);
    for point in points {
        if kept.len() as i64 == SERIES_POINTS {
            break;
        }
        if kept
            .last()
            .is_none_or(|(at, _)| series_bucket(*at) != series_bucket(point.0))
        {
            kept.push(point);
        }
    }
    kept
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
        "FROM rates_of($2::bpchar) WHERE bank_id = $1 AND as_of > $3 AND as_of <= $4 AND {column} IS NOT NULL"
    );
    // Up to READ_WHOLE rows at once: a window of hourly boards (720) is
    // then bucketed here from one index range, where a probe per bucket
    // cost ten times as much; a busier one is probed.
    let mut points: Vec<Point> = sqlx::query_as(&format!(
        "SELECT as_of, {column} {window} ORDER BY as_of DESC LIMIT $5"
    ))
    .bind(bank.get())
    .bind(code.as_str())
    .bind(since)
    .bind(until)
    .bind(READ_WHOLE + 1)
    .fetch_all(&mut *db)
    .await?;
    let newest = points.first().map(|(at, _)| *at);
    let mut pivot = None;
    if points.len() as i64 > SERIES_POINTS {
        pivot = points.get(SERIES_POINTS as usize).map(|(at, _)| *at);
    }
    if points.len() as i64 > SERIES_POINTS && points.len() as i64 <= READ_WHOLE {
        points = last_of_each_bucket(points);
    } else if points.len() as i64 > READ_WHOLE {
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
             SELECT * FROM rates_of(k.currency::bpchar)
             WHERE bank_id = k.bank_id AND as_of > k.after AND as_of <= $4
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
