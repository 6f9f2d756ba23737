//! A bank's values of one currency over a range (every published board,
//! or the value in force at given instants), and the best value across
//! active banks at given instants: what /api/v1/rates/series reads.
//!
//! "In force at an instant" is /history's rule: the last record published
//! strictly before it. Each instant is one index probe on the rates' key,
//! so a five-year daily series is 1,827 probes, whatever the bank published
//! in between.

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use sqlx::{PgExecutor, Row};

use crate::error::Result;
use crate::views::{Field, HistoryRecord};

const RECORD_COLUMNS: &str =
    "as_of, cash_buying, cash_selling, transactional_buying, transactional_selling";

fn record(code: CurrencyCode, row: &sqlx::postgres::PgRow) -> Result<HistoryRecord> {
    Ok(HistoryRecord {
        currency: code,
        as_of: row.try_get("as_of")?,
        cash_buying: row.try_get("cash_buying")?,
        cash_selling: row.try_get("cash_selling")?,
        transactional_buying: row.try_get("transactional_buying")?,
        transactional_selling: row.try_get("transactional_selling")?,
    })
}

/// Every record of `bank` and `code` published in `[from, to)`, oldest
/// first.
pub async fn records_between<'e>(
    db: impl PgExecutor<'e>,
    bank: BankId,
    code: CurrencyCode,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<HistoryRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {RECORD_COLUMNS} FROM rates
         WHERE bank_id = $1 AND currency = $2::bpchar AND as_of >= $3 AND as_of < $4
         ORDER BY as_of"
    ))
    .bind(bank.get())
    .bind(code.as_str())
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await?;
    rows.iter().map(|row| record(code, row)).collect()
}

/// The record of `bank` and `code` in force at each of `instants` (`None`
/// before its first), in the order given.
pub async fn records_at<'e>(
    db: impl PgExecutor<'e>,
    bank: BankId,
    code: CurrencyCode,
    instants: &[DateTime<Utc>],
) -> Result<Vec<(DateTime<Utc>, Option<HistoryRecord>)>> {
    let rows = sqlx::query(&format!(
        "SELECT t.at, t.n, r.* FROM UNNEST($3::timestamptz[]) WITH ORDINALITY AS t (at, n)
         LEFT JOIN LATERAL (
             SELECT {RECORD_COLUMNS} FROM rates
             WHERE bank_id = $1 AND currency = $2::bpchar AND as_of < t.at
             ORDER BY as_of DESC LIMIT 1
         ) r ON true
         ORDER BY t.n"
    ))
    .bind(bank.get())
    .bind(code.as_str())
    .bind(instants)
    .fetch_all(db)
    .await?;
    rows.iter()
        .map(|row| {
            let at: DateTime<Utc> = row.try_get("at")?;
            let as_of: Option<DateTime<Utc>> = row.try_get("as_of")?;
            Ok((at, as_of.map(|_| record(code, row)).transpose()?))
        })
        .collect()
}

/// The best value of `field` across the banks active now, for `code`, in
/// force at each of `instants`: the bank, its value and when it published
/// it (best-rates' rule: highest buying, lowest selling, ties to the
/// earlier record, then the lower bank id). `None` where no bank had one.
pub async fn best_at<'e>(
    db: impl PgExecutor<'e>,
    code: CurrencyCode,
    field: Field,
    instants: &[DateTime<Utc>],
) -> Result<
    Vec<(
        DateTime<Utc>,
        Option<(BankId, rust_decimal::Decimal, DateTime<Utc>)>,
    )>,
> {
    let column = field.column();
    let order = if field.higher_is_better() {
        "DESC"
    } else {
        "ASC"
    };
    let rows = sqlx::query(&format!(
        "SELECT t.at, t.n, best.bank_id, best.value, best.as_of
         FROM UNNEST($2::timestamptz[]) WITH ORDINALITY AS t (at, n)
         LEFT JOIN LATERAL (
             SELECT b.id AS bank_id, r.{column} AS value, r.as_of
             FROM banks b
             CROSS JOIN LATERAL (
                 SELECT {column}, as_of FROM rates
                 WHERE bank_id = b.id AND currency = $1::bpchar AND as_of < t.at
                 ORDER BY as_of DESC LIMIT 1
             ) r
             WHERE b.active AND r.{column} IS NOT NULL
             ORDER BY r.{column} {order}, r.as_of ASC, b.id ASC
             LIMIT 1
         ) best ON true
         ORDER BY t.n"
    ))
    .bind(code.as_str())
    .bind(instants)
    .fetch_all(db)
    .await?;
    rows.iter()
        .map(|row| {
            let at: DateTime<Utc> = row.try_get("at")?;
            let bank: Option<i64> = row.try_get("bank_id")?;
            let best = match bank {
                Some(bank) => Some((
                    BankId::new(bank).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
                    row.try_get("value")?,
                    row.try_get("as_of")?,
                )),
                None => None,
            };
            Ok((at, best))
        })
        .collect()
}
