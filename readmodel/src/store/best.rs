//! Best rates: which active bank quotes best for each field of a currency,
//! with its series.

use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use sqlx::PgConnection;

use super::{quotes, series_read, Point};
use crate::error::Result;
use crate::quality::{OutlierRule, Quoted};
use crate::views::{best_offer, BankInfo, BestEntry, Field, Offer, RateView};

/// The best rates for `code` at `now`, outliers treated by `rule`; `None`
/// when no active bank quotes it.
pub async fn best_rates(
    pool: &sqlx::PgPool,
    code: CurrencyCode,
    now: DateTime<Utc>,
    rule: OutlierRule,
) -> Result<Option<[Option<BestEntry>; 4]>> {
    best_rates_in(&mut *pool.acquire().await?, code, now, rule).await
}

/// [`best_rates`] on one connection (in a transaction's snapshot).
pub async fn best_rates_in(
    db: &mut PgConnection,
    code: CurrencyCode,
    now: DateTime<Utc>,
    rule: OutlierRule,
) -> Result<Option<[Option<BestEntry>; 4]>> {
    let quotes = quotes(&mut *db, code).await?;
    best_rates_from_in(db, code, &quotes, now, rule).await
}

/// Which quote is best for each field (by [`Field::ALL`] order), the
/// values `rule` flags as outliers left out.
pub fn best_picks(quotes: &[(BankInfo, RateView)], rule: OutlierRule) -> [Option<usize>; 4] {
    Field::ALL.map(|field| {
        let left_out = rule.left_out(&market(field, quotes));
        best_offer(
            field,
            quotes
                .iter()
                .zip(left_out)
                .map(|((bank, rate), out)| Offer {
                    value: field.of(rate).filter(|_| !out),
                    updated_at: rate.updated_at,
                    bank: bank.id.get(),
                }),
        )
    })
}

/// Each bank's value of `field` beside its previous one.
pub fn market(field: Field, quotes: &[(BankInfo, RateView)]) -> Vec<Quoted> {
    quotes
        .iter()
        .map(|(_, rate)| Quoted {
            value: field.of(rate),
            previous: rate.previous.as_ref().and_then(|p| field.of_previous(p)),
        })
        .collect()
}

/// The entry for `field` of a best quote, with its series.
pub fn best_entry(
    field: Field,
    (bank, rate): &(BankInfo, RateView),
    series: Vec<Point>,
) -> BestEntry {
    BestEntry {
        bank: bank.clone(),
        price: field.of(rate).expect("best_picks only picks quoted fields"),
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
    rule: OutlierRule,
) -> Result<Option<[Option<BestEntry>; 4]>> {
    best_rates_from_in(&mut *pool.acquire().await?, code, quotes, now, rule).await
}

async fn best_rates_from_in(
    db: &mut PgConnection,
    code: CurrencyCode,
    quotes: &[(BankInfo, RateView)],
    now: DateTime<Utc>,
    rule: OutlierRule,
) -> Result<Option<[Option<BestEntry>; 4]>> {
    if quotes.is_empty() {
        return Ok(None);
    }
    let mut entries: [Option<BestEntry>; 4] = Default::default();
    for ((slot, field), pick) in entries
        .iter_mut()
        .zip(Field::ALL)
        .zip(best_picks(quotes, rule))
    {
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
