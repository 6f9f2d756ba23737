//! Currencies: which are quoted, by how many active banks, and every active
//! bank's current quote of one.

use std::collections::HashMap;

use ratewire_proto::CurrencyCode;
use sqlx::PgExecutor;

use super::{
    bank_from_row, rate_from_row, ACTIVE_LATEST, BANK_FIELDS, PREVIOUS_JOIN, RATE_COLUMNS,
};
use crate::error::Result;
use crate::views::{BankInfo, RateView};

/// How many active banks quote each currency on their current board.
pub async fn currency_counts<'e>(db: impl PgExecutor<'e>) -> Result<Vec<(CurrencyCode, i64)>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(&format!(
        "WITH latest AS ({ACTIVE_LATEST})
         SELECT c.currency::text, count(*) FROM latest l, unnest(l.currencies) AS c (currency)
         GROUP BY c.currency"
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
pub async fn quotes<'e>(
    db: impl PgExecutor<'e>,
    code: CurrencyCode,
) -> Result<Vec<(BankInfo, RateView)>> {
    Ok(quotes_of(db, &[code])
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
        // Each bank's latest board once (MATERIALIZED: inlined, it was
        // computed again for every output row), then the rates' key probed
        // for the asked currencies on that board; from missing or stale
        // statistics the planner otherwise scanned every rate of a currency.
        "WITH latest AS MATERIALIZED ({ACTIVE_LATEST})
         SELECT {BANK_FIELDS}, l.as_of AS last_rates_updated_at, {RATE_COLUMNS}
         FROM latest l
         JOIN banks b ON b.id = l.bank_id
         CROSS JOIN LATERAL (
             SELECT * FROM rates r
             WHERE r.bank_id = l.bank_id AND r.as_of = l.as_of
               AND r.currency = ANY ($1::text[]::bpchar[])
             OFFSET 0
         ) r
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
