//! The reference-rates views: a day's whole answer, and the days a source
//! published. The API reads a day back ([`reference_day_from_body`]) to
//! answer for one currency and to compute premiums.

use chrono::NaiveDate;
use ratewire_proto::CurrencyCode;
use rust_decimal::Decimal;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use super::{CurrencyJson, Envelope, Num, ViewStyle};

/// One currency of a stored reference day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceRow {
    pub currency: CurrencyCode,
    pub buying: Decimal,
    pub selling: Decimal,
    pub weighted_average: Decimal,
}

/// One stored reference day of a source, in currency order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceDay {
    pub source: String,
    pub date: NaiveDate,
    pub rates: Vec<ReferenceRow>,
}

impl ReferenceDay {
    pub fn rate(&self, currency: CurrencyCode) -> Option<&ReferenceRow> {
        self.rates.iter().find(|r| r.currency == currency)
    }
}

/// One currency of a reference day, as the API shows it.
pub struct ReferenceJson<'a> {
    pub source: &'a str,
    pub date: NaiveDate,
    pub row: &'a ReferenceRow,
    pub style: &'a ViewStyle,
}

impl Serialize for ReferenceJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(6))?;
        map.serialize_entry("date", &self.date)?;
        map.serialize_entry("source", self.source)?;
        map.serialize_entry(
            "currency",
            &CurrencyJson {
                code: self.row.currency,
                style: self.style,
            },
        )?;
        map.serialize_entry("buying", &Num(self.row.buying))?;
        map.serialize_entry("selling", &Num(self.row.selling))?;
        map.serialize_entry("weightedAverage", &Num(self.row.weighted_average))?;
        map.end()
    }
}

/// One currency's rates on one day without the currency: a point of the
/// reference series, and the reference beside the spreads.
pub struct ReferencePoint<'a> {
    pub date: NaiveDate,
    pub row: &'a ReferenceRow,
}

impl Serialize for ReferencePoint<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("date", &self.date)?;
        map.serialize_entry("buying", &Num(self.row.buying))?;
        map.serialize_entry("selling", &Num(self.row.selling))?;
        map.serialize_entry("weightedAverage", &Num(self.row.weighted_average))?;
        map.end()
    }
}

/// The answer for every currency of `day`.
pub fn reference_day_response(day: &ReferenceDay, style: &ViewStyle) -> String {
    let data: Vec<ReferenceJson> = day
        .rates
        .iter()
        .map(|row| ReferenceJson {
            source: &day.source,
            date: day.date,
            row,
            style,
        })
        .collect();
    serde_json::to_string(&Envelope {
        message: "success",
        status: 200,
        data,
    })
    .expect("a reference day serializes")
}

/// The days a source published, oldest first, as stored.
pub fn reference_dates_body(dates: &[NaiveDate]) -> String {
    serde_json::to_string(dates).expect("dates serialize")
}

pub fn reference_dates_from_body(body: &[u8]) -> Result<Vec<NaiveDate>, serde_json::Error> {
    serde_json::from_slice(body)
}

/// A stored day read back, each element with its text as stored.
pub struct StoredDay<'a> {
    pub day: ReferenceDay,
    pub elements: Vec<(CurrencyCode, &'a RawValue)>,
}

#[derive(serde::Deserialize)]
struct Stored<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Element<'a> {
    date: NaiveDate,
    source: String,
    currency: CodeOnly,
    #[serde(borrow)]
    buying: &'a RawValue,
    #[serde(borrow)]
    selling: &'a RawValue,
    #[serde(borrow)]
    weighted_average: &'a RawValue,
}

#[derive(serde::Deserialize)]
struct CodeOnly {
    symbol: String,
}

/// A stored day's answer read back exactly (numbers from their text).
pub fn reference_day_from_body(body: &[u8]) -> Result<StoredDay<'_>, String> {
    let stored: Stored = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut day: Option<ReferenceDay> = None;
    let mut elements = Vec::with_capacity(stored.data.len());
    let number = |raw: &RawValue| {
        Decimal::from_str_exact(raw.get()).map_err(|e| format!("{}: {e}", raw.get()))
    };
    for raw in stored.data {
        let element: Element = serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
        let currency = CurrencyCode::parse(&element.currency.symbol).map_err(|e| e.to_string())?;
        let row = ReferenceRow {
            currency,
            buying: number(element.buying)?,
            selling: number(element.selling)?,
            weighted_average: number(element.weighted_average)?,
        };
        day.get_or_insert_with(|| ReferenceDay {
            source: element.source.clone(),
            date: element.date,
            rates: Vec::new(),
        })
        .rates
        .push(row);
        elements.push((currency, raw));
    }
    let day = day.ok_or("a stored reference day has no currency")?;
    Ok(StoredDay { day, elements })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_reads_back_with_its_published_digits() {
        let day = ReferenceDay {
            source: "NBE".into(),
            date: "2026-05-18".parse().unwrap(),
            rates: vec![ReferenceRow {
                currency: CurrencyCode::parse("USD").unwrap(),
                buying: "157.2270".parse().unwrap(),
                selling: "158.7993".parse().unwrap(),
                weighted_average: "157.227".parse().unwrap(),
            }],
        };
        let style = ViewStyle {
            currency_image_base: "https://img.example".into(),
            outliers: crate::quality::OutlierRule::default(),
        };
        let body = reference_day_response(&day, &style);
        assert!(body.contains(r#""buying":157.2270"#), "{body}");
        let back = reference_day_from_body(body.as_bytes()).unwrap();
        assert_eq!(back.day, day);
        assert!(back.elements[0].1.get().contains(r#""source":"NBE""#));
    }
}
