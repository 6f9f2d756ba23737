//! The alerts' copy of each bank's latest quotes (`quotes`, with the
//! bank's previous values and whether it is listed from `quote_banks`),
//! read by the judge in the fold and by an alert's creation alike.

use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use rust_decimal::Decimal;
use sqlx::PgConnection;

use crate::judge::Quote;

/// The statement reading the quotes of currencies (`$1`) and of banks
/// (`$2`), in the alerts schema `s` (named, for the fold's connection,
/// whose search path is a generation's).
pub fn statement(s: &str) -> String {
    format!(
        "SELECT q.bank_id, q.currency, q.cash_buying, q.cash_selling,
                q.transactional_buying, q.transactional_selling, q.updated_at,
                q.previous_cash_buying, q.previous_cash_selling,
                q.previous_transactional_buying, q.previous_transactional_selling,
                COALESCE(b.active, FALSE) AS active
         FROM {s}.quotes q LEFT JOIN {s}.quote_banks b ON b.bank_id = q.bank_id
         WHERE q.currency = ANY ($1) OR q.bank_id = ANY ($2)"
    )
}

#[derive(sqlx::FromRow)]
struct Row {
    bank_id: i64,
    currency: String,
    cash_buying: Option<Decimal>,
    cash_selling: Option<Decimal>,
    transactional_buying: Option<Decimal>,
    transactional_selling: Option<Decimal>,
    updated_at: DateTime<Utc>,
    previous_cash_buying: Option<Decimal>,
    previous_cash_selling: Option<Decimal>,
    previous_transactional_buying: Option<Decimal>,
    previous_transactional_selling: Option<Decimal>,
    active: bool,
}

/// The quotes of `currencies` and of `banks`, each with whether its bank
/// is listed, by [`statement`].
pub async fn read(
    db: &mut PgConnection,
    statement: &str,
    currencies: &[String],
    banks: &[i64],
) -> sqlx::Result<Vec<(Quote, bool)>> {
    let rows: Vec<Row> = sqlx::query_as(statement)
        .bind(currencies)
        .bind(banks)
        .fetch_all(db)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let quote = Quote {
                bank: row.bank_id,
                currency: CurrencyCode::parse(&row.currency).ok()?,
                cash_buying: row.cash_buying,
                cash_selling: row.cash_selling,
                transactional_buying: row.transactional_buying,
                transactional_selling: row.transactional_selling,
                updated_at: row.updated_at,
                previous: [
                    row.previous_cash_buying,
                    row.previous_cash_selling,
                    row.previous_transactional_buying,
                    row.previous_transactional_selling,
                ],
            };
            Some((quote, row.active))
        })
        .collect())
}
