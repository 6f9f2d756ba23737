//! Best rates: which active bank quotes best for each field of a currency,
//! with its series.

use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use sqlx::PgConnection;

use super::{quotes, series_read, Point};
use crate::error::Result;
use crate::views::{pick_best, BankInfo, BestEntry, Candidate, Field, RateView};

/// The best rates for `code` at `now`; `None` when no active bank quotes it.
pub async fn best_rates(
    pool: &sqlx::PgPool,
    code: CurrencyCode,
    now: DateTime<Utc>,
) -> Result<Option<[Option<BestEntry>; 4]>> {
    best_rates_in(&mut *pool.acquire().await?, code, now).await
}

/// [`best_rates`] on one connection (in a transaction's snapshot).
pub async fn best_rates_in(
    db: &mut PgConnection,
    code: CurrencyCode,
    now: DateTime<Utc>,
) -> Result<Option<[Option<BestEntry>; 4]>> {
    let quotes = quotes(&mut *db, code).await?;
    best_rates_from_in(db, code, &quotes, now).await
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

/// [`best_rates`] from quotes already read (see [`super::quotes_of`]).
pub async fn best_rates_from(
    pool: &sqlx::PgPool,
    code: CurrencyCode,
    quotes: &[(BankInfo, RateView)],
    now: DateTime<Utc>,
) -> Result<Option<[Option<BestEntry>; 4]>> {
    best_rates_from_in(&mut *pool.acquire().await?, code, quotes, now).await
}

async fn best_rates_from_in(
    db: &mut PgConnection,
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
        let series = series_read(&mut *db, quote.0.id, code, field.column(), now)
            .await?
            .points;
        *slot = Some(best_entry(field, quote, series));
    }
    Ok(Some(entries))
}
