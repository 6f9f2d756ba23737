//! /api/v1/rates/series: a bank's values of one currency over a range, or
//! the best value across banks, as JSON or CSV.
//!
//! Each point has its `timestamp` (the published time for `raw`, the
//! interval's start for `hour` and `day`, whose value is the one in force
//! at the interval's end) and `updatedAt` (when that value was published).
//! An `hour` or `day` point also says whether its value was carried into
//! the interval: `carriedFrom` is `updatedAt` when that is before the
//! interval, null when the value was published within it.

use std::fmt::Write;

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use rust_decimal::Decimal;
use serde::Serialize;

use super::{timestamp, Field, HistoryRecord, Num, OptNum};

/// What a series is of.
#[derive(Debug, Clone, Copy)]
pub struct SeriesOf<'a> {
    /// `raw`, `hour` or `day`.
    pub currency: CurrencyCode,
    pub interval: &'a str,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The link to the rest of the range, when this answer is one page of it.
    pub next: Option<&'a str>,
}

impl SeriesOf<'_> {
    /// A point's `carriedFrom` (see the module docs): `None` for `raw`
    /// points, which are boards themselves.
    fn carried_from(&self, at: DateTime<Utc>, published: DateTime<Utc>) -> Option<Option<String>> {
        (self.interval != "raw").then(|| (published < at).then(|| timestamp(published)))
    }
}

/// One bank's point: its time and the record in force then.
pub type BankPoint = (DateTime<Utc>, HistoryRecord);

/// The best value at one time: the bank, the value and when it was published.
pub type BestPoint = (DateTime<Utc>, BankId, Decimal, DateTime<Utc>);

#[derive(Serialize)]
struct Envelope<T> {
    message: &'static str,
    status: u16,
    data: T,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BankSeries<'a> {
    bank_id: i64,
    currency_code: CurrencyCode,
    interval: String,
    from: String,
    to: String,
    next: Option<&'a str>,
    points: Vec<BankPointJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BankPointJson {
    timestamp: String,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    carried_from: Option<Option<String>>,
    cash_buying: Num,
    cash_selling: Num,
    transactional_buying: OptNum,
    transactional_selling: OptNum,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BestSeries<'a> {
    currency_code: CurrencyCode,
    field: &'static str,
    interval: String,
    from: String,
    to: String,
    next: Option<&'a str>,
    points: Vec<BestPointJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BestPointJson {
    timestamp: String,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    carried_from: Option<Option<String>>,
    value: Num,
    bank_id: i64,
}

pub fn bank_series_json(of: SeriesOf<'_>, bank: BankId, points: &[BankPoint]) -> String {
    let data = BankSeries {
        bank_id: bank.get(),
        currency_code: of.currency,
        interval: of.interval.to_owned(),
        from: timestamp(of.from),
        to: timestamp(of.to),
        next: of.next,
        points: points
            .iter()
            .map(|(at, r)| BankPointJson {
                timestamp: timestamp(*at),
                updated_at: timestamp(r.as_of),
                carried_from: of.carried_from(*at, r.as_of),
                cash_buying: Num(r.cash_buying),
                cash_selling: Num(r.cash_selling),
                transactional_buying: OptNum(r.transactional_buying),
                transactional_selling: OptNum(r.transactional_selling),
            })
            .collect(),
    };
    success(data)
}

pub fn best_series_json(of: SeriesOf<'_>, field: Field, points: &[BestPoint]) -> String {
    let data = BestSeries {
        currency_code: of.currency,
        field: field.key(),
        interval: of.interval.to_owned(),
        from: timestamp(of.from),
        to: timestamp(of.to),
        next: of.next,
        points: points
            .iter()
            .map(|(at, bank, value, published)| BestPointJson {
                timestamp: timestamp(*at),
                updated_at: timestamp(*published),
                carried_from: of.carried_from(*at, *published),
                value: Num(*value),
                bank_id: bank.get(),
            })
            .collect(),
    };
    success(data)
}

fn success<T: Serialize>(data: T) -> String {
    serde_json::to_string(&Envelope {
        message: "success",
        status: 200,
        data,
    })
    .expect("views serialize to JSON")
}

/// The same points as CSV: a header row, one row per point, numbers with
/// their published digits, empty cells for a value not quoted (and for a
/// `carriedFrom` that is null or, for `raw`, absent).
pub fn bank_series_csv(of: SeriesOf<'_>, points: &[BankPoint]) -> String {
    let mut csv = String::from(
        "timestamp,updatedAt,cashBuying,cashSelling,transactionalBuying,transactionalSelling,carriedFrom\n",
    );
    let optional = |v: Option<Decimal>| v.map(|d| d.to_string()).unwrap_or_default();
    for (at, r) in points {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{}",
            timestamp(*at),
            timestamp(r.as_of),
            r.cash_buying,
            r.cash_selling,
            optional(r.transactional_buying),
            optional(r.transactional_selling),
            of.carried_from(*at, r.as_of).flatten().unwrap_or_default()
        );
    }
    csv
}

pub fn best_series_csv(of: SeriesOf<'_>, points: &[BestPoint]) -> String {
    let mut csv = String::from("timestamp,updatedAt,value,bankId,carriedFrom\n");
    for (at, bank, value, published) in points {
        let _ = writeln!(
            csv,
            "{},{},{},{},{}",
            timestamp(*at),
            timestamp(*published),
            value,
            bank,
            of.carried_from(*at, *published)
                .flatten()
                .unwrap_or_default()
        );
    }
    csv
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn record(at: &str, buying: &str) -> HistoryRecord {
        HistoryRecord {
            currency: CurrencyCode::parse("USD").unwrap(),
            as_of: at.parse().unwrap(),
            cash_buying: Decimal::from_str(buying).unwrap(),
            cash_selling: Decimal::from_str("158.20").unwrap(),
            transactional_buying: None,
            transactional_selling: Some(Decimal::from_str("158.0").unwrap()),
        }
    }

    #[test]
    fn a_bank_series_keeps_published_digits_in_json_and_csv() {
        let of = SeriesOf {
            currency: CurrencyCode::parse("USD").unwrap(),
            interval: "day",
            from: "2026-11-01T00:00:00Z".parse().unwrap(),
            to: "2026-11-03T00:00:00Z".parse().unwrap(),
            next: None,
        };
        let points = vec![(
            "2026-11-01T00:00:00Z".parse().unwrap(),
            record("2026-10-31T08:00:00Z", "155.10"),
        )];
        let json = bank_series_json(of, BankId::new(3).unwrap(), &points);
        assert!(json.contains(r#""cashBuying":155.10"#), "{json}");
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["data"]["bankId"], 3);
        assert!(value["data"]["next"].is_null(), "{json}");
        assert_eq!(
            value["data"]["points"][0]["timestamp"],
            "2026-11-01T00:00:00.000Z"
        );
        assert_eq!(
            value["data"]["points"][0]["updatedAt"],
            "2026-10-31T08:00:00.000Z"
        );
        assert!(value["data"]["points"][0]["transactionalBuying"].is_null());
        let csv = bank_series_csv(of, &points);
        assert_eq!(
            csv,
            "timestamp,updatedAt,cashBuying,cashSelling,transactionalBuying,transactionalSelling,carriedFrom\n\
             2026-11-01T00:00:00.000Z,2026-10-31T08:00:00.000Z,155.10,158.20,,158.0,2026-10-31T08:00:00.000Z\n"
        );
    }

    #[test]
    fn a_day_or_hour_point_says_when_its_value_was_carried_into_it() {
        let of = |interval| SeriesOf {
            currency: CurrencyCode::parse("USD").unwrap(),
            interval,
            from: "2026-11-06T00:00:00Z".parse().unwrap(),
            to: "2026-11-10T00:00:00Z".parse().unwrap(),
            next: None,
        };
        // Friday's board carried over the weekend, then Monday's own.
        let friday = record("2026-11-06T09:00:00Z", "155.10");
        let monday = record("2026-11-09T09:00:00Z", "155.30");
        let points = vec![
            ("2026-11-06T00:00:00Z".parse().unwrap(), friday.clone()),
            ("2026-11-07T00:00:00Z".parse().unwrap(), friday.clone()),
            ("2026-11-08T00:00:00Z".parse().unwrap(), friday),
            ("2026-11-09T00:00:00Z".parse().unwrap(), monday),
        ];
        let json = bank_series_json(of("day"), BankId::new(3).unwrap(), &points);
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        let carried: Vec<&serde_json::Value> = value["data"]["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["carriedFrom"])
            .collect();
        assert_eq!(
            carried,
            [
                &serde_json::Value::Null,
                &serde_json::json!("2026-11-06T09:00:00.000Z"),
                &serde_json::json!("2026-11-06T09:00:00.000Z"),
                &serde_json::Value::Null,
            ]
        );
        // A raw point is a board: it has no carriedFrom.
        let raw = bank_series_json(of("raw"), BankId::new(3).unwrap(), &points[..1]);
        assert!(!raw.contains("carriedFrom"), "{raw}");
    }
}
