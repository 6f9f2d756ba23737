//! Which values of a board were outliers when it was published
//! ([`crate::quality::outliers`]), judged on the model as known then.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use rust_decimal::Decimal;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};

use super::{begin_known_at, quotes_of};
use crate::error::Result;
use crate::quality::References;
use crate::views::{Field, HistoryRecord, RateView};

/// A value of a board that departed by more than the outlier percent from
/// everything it could be held against as known when the board was
/// published (see [`crate::quality::outliers`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Outlier {
    pub currency: CurrencyCode,
    pub field: Field,
    pub value: Decimal,
    /// The bank's previous value of the field.
    pub previous: Option<Decimal>,
    /// The median of the other active banks' values, when two or more
    /// quoted the currency.
    pub median: Option<Decimal>,
}

/// The values of `rates` (a board of `bank`'s) that were outliers at
/// `percent` as known at `at`, when it was published: each held against
/// the bank's previous value and the other active banks' values as they
/// stood then.
pub async fn outliers_at(
    pool: &PgPool,
    bank: BankId,
    at: DateTime<Utc>,
    rates: &[HistoryRecord],
    percent: Decimal,
) -> Result<Vec<Outlier>> {
    let Some(as_of) = rates.first().map(|r| r.as_of) else {
        return Ok(Vec::new());
    };
    let codes: Vec<CurrencyCode> = rates.iter().map(|r| r.currency).collect();
    let mut tx = begin_known_at(pool, at).await?;
    let market = quotes_of(&mut *tx, &codes).await?;
    let previous = previous_values(&mut tx, bank, as_of, &codes).await?;
    tx.commit().await?;
    let mut outliers = Vec::new();
    for rate in rates {
        let others: Vec<&RateView> = market
            .get(&rate.currency)
            .into_iter()
            .flatten()
            .filter(|(info, _)| info.id != bank)
            .map(|(_, rate)| rate)
            .collect();
        for field in Field::ALL {
            let Some(value) = field.of_record(rate) else {
                continue;
            };
            let values: Vec<Decimal> = others.iter().filter_map(|r| field.of(r)).collect();
            let before = previous
                .get(&rate.currency)
                .and_then(|p| field.of_record(p));
            let references = References::of(before, &values);
            if references.flag(value, percent) {
                outliers.push(Outlier {
                    currency: rate.currency,
                    field,
                    value,
                    previous: references.previous,
                    median: references.median,
                });
            }
        }
    }
    Ok(outliers)
}

/// The bank's last values of `codes` before `as_of`, by currency.
async fn previous_values(
    db: &mut PgConnection,
    bank: BankId,
    as_of: DateTime<Utc>,
    codes: &[CurrencyCode],
) -> Result<HashMap<CurrencyCode, HistoryRecord>> {
    let codes: Vec<&str> = codes.iter().map(CurrencyCode::as_str).collect();
    let rows = sqlx::query(
        "SELECT p.* FROM UNNEST($2::text[]) AS c (code)
         CROSS JOIN LATERAL (
             SELECT currency, as_of, cash_buying, cash_selling,
                    transactional_buying, transactional_selling
             FROM rates_of(c.code::bpchar)
             WHERE bank_id = $1 AND as_of < $3
             ORDER BY as_of DESC LIMIT 1
         ) p",
    )
    .bind(bank.get())
    .bind(&codes)
    .bind(as_of)
    .fetch_all(db)
    .await?;
    rows.iter()
        .map(|row| {
            let record = history_record(row, row.try_get("as_of")?)?;
            Ok((record.currency, record))
        })
        .collect()
}

/// A rate row (`currency` and the four values) of a board as of `as_of`.
pub fn history_record(row: &PgRow, as_of: DateTime<Utc>) -> Result<HistoryRecord> {
    let code: String = row.try_get("currency")?;
    Ok(HistoryRecord {
        currency: CurrencyCode::parse(code.trim()).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        as_of,
        cash_buying: row.try_get("cash_buying")?,
        cash_selling: row.try_get("cash_selling")?,
        transactional_buying: row.try_get("transactional_buying")?,
        transactional_selling: row.try_get("transactional_selling")?,
    })
}
