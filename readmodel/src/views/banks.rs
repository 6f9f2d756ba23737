//! /api/v1/banks: active banks, optionally with their current board.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::{serialize_bank_head, BankView, QuoteJson, ViewStyle};

struct BankJson<'a> {
    view: &'a BankView,
    with_recent: bool,
    style: &'a ViewStyle,
}

impl Serialize for BankJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        serialize_bank_head(&mut map, self.view, true)?;
        if self.with_recent {
            let rates: Vec<_> = self
                .view
                .rates
                .iter()
                .map(|r| QuoteJson {
                    cash_buying: r.cash_buying,
                    cash_selling: r.cash_selling,
                    transactional_buying: r.transactional_buying,
                    transactional_selling: r.transactional_selling,
                    // No difference here: /banks shows the board as published.
                    time_key: "updatedAt",
                    at: r.updated_at,
                    currency: r.currency,
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
