//! Reference boards: the days a source published, and one day's rates.

use chrono::NaiveDate;
use ratewire_proto::CurrencyCode;
use rust_decimal::Decimal;

use crate::error::Result;
use crate::views::{ReferenceDay, ReferenceRow};

/// Every source with a stored day.
pub async fn reference_sources<'e>(db: impl sqlx::PgExecutor<'e>) -> Result<Vec<String>> {
    Ok(
        sqlx::query_scalar("SELECT DISTINCT source FROM reference_boards ORDER BY source")
            .fetch_all(db)
            .await?,
    )
}

/// The days `source` published, oldest first.
pub async fn reference_dates<'e>(
    db: impl sqlx::PgExecutor<'e>,
    source: &str,
) -> Result<Vec<NaiveDate>> {
    Ok(
        sqlx::query_scalar("SELECT date FROM reference_boards WHERE source = $1 ORDER BY date")
            .bind(source)
            .fetch_all(db)
            .await?,
    )
}

/// `source`'s boards for `dates` (every day it published: `None`), oldest
/// first; a day it did not publish is left out.
pub async fn reference_days<'e>(
    db: impl sqlx::PgExecutor<'e>,
    source: &str,
    dates: Option<&[NaiveDate]>,
) -> Result<Vec<ReferenceDay>> {
    let rows: Vec<(NaiveDate, String, Decimal, Decimal, Decimal)> = sqlx::query_as(
        "SELECT date, currency::text, buying, selling, weighted_average FROM reference_rates
         WHERE source = $1 AND ($2::date[] IS NULL OR date = ANY ($2))
         ORDER BY date, currency",
    )
    .bind(source)
    .bind(dates)
    .fetch_all(db)
    .await?;
    let mut days: Vec<ReferenceDay> = Vec::new();
    for (date, code, buying, selling, weighted_average) in rows {
        let Ok(currency) = CurrencyCode::parse(code.trim()) else {
            continue;
        };
        if days.last().is_none_or(|d| d.date != date) {
            days.push(ReferenceDay {
                source: source.to_owned(),
                date,
                rates: Vec::new(),
            });
        }
        let day = days.last_mut().expect("pushed above");
        day.rates.push(ReferenceRow {
            currency,
            buying,
            selling,
            weighted_average,
        });
    }
    Ok(days)
}

/// `source`'s rates of `currency` on each day from `from` to `to`, oldest
/// first, as (day, rates).
pub async fn reference_series<'e>(
    db: impl sqlx::PgExecutor<'e>,
    source: &str,
    currency: CurrencyCode,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<(NaiveDate, ReferenceRow)>> {
    let rows: Vec<(NaiveDate, Decimal, Decimal, Decimal)> = sqlx::query_as(
        "SELECT date, buying, selling, weighted_average FROM reference_rates
         WHERE source = $1 AND currency = $2 AND date BETWEEN $3 AND $4 ORDER BY date",
    )
    .bind(source)
    .bind(currency.as_str())
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(date, buying, selling, weighted_average)| {
            (
                date,
                ReferenceRow {
                    currency,
                    buying,
                    selling,
                    weighted_average,
                },
            )
        })
        .collect())
}

/// The last day of `dates` (ascending) on or before `day`.
pub fn in_force(dates: &[NaiveDate], day: NaiveDate) -> Option<NaiveDate> {
    match dates.binary_search(&day) {
        Ok(i) => Some(dates[i]),
        Err(0) => None,
        Err(i) => Some(dates[i - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_in_force_is_the_last_one_on_or_before_the_day() {
        let d = |s: &str| s.parse::<NaiveDate>().unwrap();
        let dates = [d("2026-05-14"), d("2026-05-15"), d("2026-05-18")];
        assert_eq!(in_force(&dates, d("2026-05-13")), None);
        assert_eq!(in_force(&dates, d("2026-05-15")), Some(d("2026-05-15")));
        // A Saturday and a Sunday carry Friday's.
        assert_eq!(in_force(&dates, d("2026-05-16")), Some(d("2026-05-15")));
        assert_eq!(in_force(&dates, d("2026-05-17")), Some(d("2026-05-15")));
        assert_eq!(in_force(&dates, d("2026-06-01")), Some(d("2026-05-18")));
    }
}
