//! /api/v1/banks: active banks, optionally with their current board.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::{timestamp, BankView, CurrencyJson, Num, OptNum, RateView, ViewStyle};

/// A board entry as /banks shows it: all four values, no difference.
struct RecentRateJson<'a> {
    rate: &'a RateView,
    style: &'a ViewStyle,
}

impl Serialize for RecentRateJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let r = self.rate;
        let mut map = serializer.serialize_map(Some(6))?;
        map.serialize_entry("cashBuying", &Num(r.cash_buying))?;
        map.serialize_entry("cashSelling", &Num(r.cash_selling))?;
        map.serialize_entry("transactionalBuying", &OptNum(r.transactional_buying))?;
        map.serialize_entry("transactionalSelling", &OptNum(r.transactional_selling))?;
        map.serialize_entry("updatedAt", &timestamp(r.updated_at))?;
        map.serialize_entry(
            "currency",
            &CurrencyJson {
                code: r.currency,
                style: self.style,
            },
        )?;
        map.end()
    }
}

struct BankJson<'a> {
    view: &'a BankView,
    with_recent: bool,
    style: &'a ViewStyle,
}

impl Serialize for BankJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let bank = &self.view.bank;
        let mut map = serializer.serialize_map(None)?;
        // A string here, unlike every other endpoint (api-v1).
        map.serialize_entry("id", &bank.id.to_string())?;
        map.serialize_entry(
            "lastRatesUpdatedAt",
            &self.view.last_rates_updated_at.map(timestamp),
        )?;
        map.serialize_entry("name", &bank.name)?;
        map.serialize_entry("code", &bank.code)?;
        map.serialize_entry("imageUrl", &bank.image_url)?;
        if self.with_recent {
            let rates: Vec<_> = self
                .view
                .rates
                .iter()
                .map(|rate| RecentRateJson {
                    rate,
                    style: self.style,
                })
                .collect();
            map.serialize_entry("exchangeRates", &rates)?;
        }
        map.end()
    }
}

/// One element of /banks' `data`.
pub fn banks_element(view: &BankView, with_recent: bool, style: &ViewStyle) -> String {
    serde_json::to_string(&BankJson {
        view,
        with_recent,
        style,
    })
    .expect("views serialize to JSON")
}

/// The whole /banks body around already rendered, comma-joined elements.
pub fn banks_response(joined_elements: &str) -> String {
    format!(r#"{{"message":"Success","status":200,"data":[{joined_elements}]}}"#)
}
