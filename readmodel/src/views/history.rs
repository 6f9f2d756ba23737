//! /api/v1/history: the record in force at the end of a day.

use chrono::{DateTime, NaiveDate, Utc};
use ratewire_proto::CurrencyCode;
use rust_decimal::Decimal;

use super::{QuoteJson, ViewStyle};

/// One published rate of one bank.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRecord {
    pub currency: CurrencyCode,
    pub as_of: DateTime<Utc>,
    pub cash_buying: Decimal,
    pub cash_selling: Decimal,
    pub transactional_buying: Option<Decimal>,
    pub transactional_selling: Option<Decimal>,
}

#[derive(serde::Serialize)]
struct HistoryEnvelope<'a> {
    message: &'static str,
    status: u16,
    date: String,
    data: QuoteJson<'a>,
}

pub fn history_response(date: NaiveDate, record: &HistoryRecord, style: &ViewStyle) -> String {
    let body = HistoryEnvelope {
        message: "success",
        status: 200,
        date: date.format("%Y-%m-%d").to_string(),
        data: QuoteJson {
            cash_buying: record.cash_buying,
            cash_selling: record.cash_selling,
            transactional_buying: record.transactional_buying,
            transactional_selling: record.transactional_selling,
            time_key: "timestamp",
            at: record.as_of,
            currency: record.currency,
            style,
        },
    };
    serde_json::to_string(&body).expect("views serialize to JSON")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn the_history_envelope_carries_the_date_and_one_record() {
        let record = HistoryRecord {
            currency: CurrencyCode::parse("EUR").unwrap(),
            as_of: "2026-11-20T16:30:00Z".parse().unwrap(),
            cash_buying: Decimal::from_str("180.40").unwrap(),
            cash_selling: Decimal::from_str("184").unwrap(),
            transactional_buying: None,
            transactional_selling: None,
        };
        let style = ViewStyle {
            currency_image_base: "https://i.test".into(),
            outliers: crate::quality::OutlierRule::default(),
        };
        let body = history_response(
            NaiveDate::from_ymd_opt(2026, 11, 22).unwrap(),
            &record,
            &style,
        );
        assert!(body.contains(r#""cashBuying":180.40"#), "{body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["message"], "success");
        assert_eq!(json["date"], "2026-11-22");
        assert_eq!(json["data"]["timestamp"], "2026-11-20T16:30:00.000Z");
        assert_eq!(json["data"]["currency"]["symbol"], "EUR");
        assert!(json["data"]["transactionalBuying"].is_null());
    }
}
