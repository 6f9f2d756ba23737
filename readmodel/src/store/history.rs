//! History: the record in force at a moment.

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use sqlx::{PgExecutor, Row};

use crate::error::Result;
use crate::views::HistoryRecord;

/// The record of `bank` for `code` in force just before `before`.
pub async fn history<'e>(
    db: impl PgExecutor<'e>,
    bank: BankId,
    code: CurrencyCode,
    before: DateTime<Utc>,
) -> Result<Option<HistoryRecord>> {
    let row = sqlx::query(
        "SELECT as_of, cash_buying, cash_selling, transactional_buying, transactional_selling
         FROM rates_of($2::bpchar) WHERE bank_id = $1 AND as_of < $3
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
