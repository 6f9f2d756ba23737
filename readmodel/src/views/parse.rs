//! Reading the /rates elements back: the stored list of every active
//! bank's board (the transactional variant) is what a conversion needs, and
//! reading it back is cheaper than asking Postgres. Numbers come back with
//! their published digits (read from their JSON text, never through a
//! float).

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{BankInfo, BankView, RateView};

#[derive(Deserialize)]
struct Element<'a> {
    #[serde(borrow)]
    data: Vec<Bank<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bank<'a> {
    id: i64,
    last_rates_updated_at: Option<DateTime<Utc>>,
    name: String,
    code: String,
    image_url: String,
    #[serde(borrow)]
    exchange_rates: Vec<Rate<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rate<'a> {
    #[serde(borrow)]
    cash_buying: &'a RawValue,
    #[serde(borrow)]
    cash_selling: &'a RawValue,
    #[serde(borrow, default)]
    transactional_buying: Option<&'a RawValue>,
    #[serde(borrow, default)]
    transactional_selling: Option<&'a RawValue>,
    updated_at: DateTime<Utc>,
    currency: Currency,
}

#[derive(Deserialize)]
struct Currency {
    symbol: String,
}

fn number(raw: &RawValue) -> Result<Decimal, String> {
    Decimal::from_str_exact(raw.get()).map_err(|e| format!("{}: {e}", raw.get()))
}

fn optional(raw: Option<&RawValue>) -> Result<Option<Decimal>, String> {
    match raw.filter(|r| r.get() != "null") {
        Some(raw) => number(raw).map(Some),
        None => Ok(None),
    }
}

/// The banks of comma-joined /rates elements (as stored for the list of
/// every active bank), without their previous values.
pub fn rates_elements(joined: &[u8]) -> Result<Vec<BankView>, String> {
    let text = std::str::from_utf8(joined).map_err(|e| e.to_string())?;
    let list = format!("[{text}]");
    let elements: Vec<Element<'_>> = serde_json::from_str(&list).map_err(|e| e.to_string())?;
    let mut banks = Vec::new();
    for bank in elements.into_iter().flat_map(|e| e.data) {
        let rates = bank
            .exchange_rates
            .iter()
            .map(|r| {
                Ok(RateView {
                    currency: CurrencyCode::parse(&r.currency.symbol).map_err(|e| e.to_string())?,
                    updated_at: r.updated_at,
                    cash_buying: number(r.cash_buying)?,
                    cash_selling: number(r.cash_selling)?,
                    transactional_buying: optional(r.transactional_buying)?,
                    transactional_selling: optional(r.transactional_selling)?,
                    previous: None,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        banks.push(BankView {
            bank: BankInfo {
                id: BankId::new(bank.id).map_err(|e| e.to_string())?,
                code: bank.code,
                name: bank.name,
                image_url: bank.image_url,
                social_links: Vec::new(),
                active: true,
            },
            last_rates_updated_at: bank.last_rates_updated_at,
            rates,
        });
    }
    Ok(banks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::{rates_element, RatesVariant, ViewStyle};
    use std::str::FromStr;

    #[test]
    fn what_is_rendered_reads_back_with_its_digits() {
        let view = BankView {
            bank: BankInfo {
                id: BankId::new(4).unwrap(),
                code: "CBE".into(),
                name: "CBE".into(),
                image_url: "https://i.test/c.png".into(),
                social_links: vec![],
                active: true,
            },
            last_rates_updated_at: Some("2026-11-23T08:00:00Z".parse().unwrap()),
            rates: vec![RateView {
                currency: CurrencyCode::parse("USD").unwrap(),
                updated_at: "2026-11-23T08:00:00Z".parse().unwrap(),
                cash_buying: Decimal::from_str("155.10").unwrap(),
                cash_selling: Decimal::from_str("158.2").unwrap(),
                transactional_buying: Some(Decimal::from_str("155.0").unwrap()),
                transactional_selling: None,
                previous: None,
            }],
        };
        let style = ViewStyle {
            currency_image_base: "https://i.test".into(),
            outliers: crate::quality::OutlierRule::default(),
        };
        let variant = RatesVariant {
            transactional: true,
            social_links: false,
        };
        let element = rates_element(&view, variant, &style);
        let joined = format!("{element},{element}");
        let banks = rates_elements(joined.as_bytes()).unwrap();
        assert_eq!(banks.len(), 2);
        assert_eq!(banks[0].rates[0].cash_buying.to_string(), "155.10");
        assert_eq!(
            banks[0].rates[0].transactional_buying.unwrap().to_string(),
            "155.0"
        );
        assert_eq!(banks[0].rates[0].transactional_selling, None);
        assert_eq!(banks[0].bank.id.get(), 4);
    }
}
