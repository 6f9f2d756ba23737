//! /api/v1/rates: each active bank's latest board with differences.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::{
    difference, serialize_bank_head, timestamp, BankView, CurrencyJson, Envelope, Num, OptNum,
    PreviousRate, RateView, RatesVariant, ViewStyle,
};

struct RateJson<'a> {
    rate: &'a RateView,
    transactional: bool,
    style: &'a ViewStyle,
}

impl Serialize for RateJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let r = self.rate;
        let prev = r.previous.as_ref();
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("cashBuying", &Num(r.cash_buying))?;
        map.serialize_entry("cashSelling", &Num(r.cash_selling))?;
        if self.transactional {
            map.serialize_entry("transactionalBuying", &OptNum(r.transactional_buying))?;
            map.serialize_entry("transactionalSelling", &OptNum(r.transactional_selling))?;
        }
        map.serialize_entry("updatedAt", &timestamp(r.updated_at))?;
        map.serialize_entry(
            "currency",
            &CurrencyJson {
                code: r.currency,
                style: self.style,
            },
        )?;
        map.serialize_entry(
            "difference",
            &DifferenceJson {
                rate: r,
                previous: prev,
                transactional: self.transactional,
            },
        )?;
        map.end()
    }
}

struct DifferenceJson<'a> {
    rate: &'a RateView,
    previous: Option<&'a PreviousRate>,
    transactional: bool,
}

impl Serialize for DifferenceJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let r = self.rate;
        let p = self.previous;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(
            "cashBuying",
            &OptNum(difference(Some(r.cash_buying), p.map(|p| p.cash_buying))),
        )?;
        map.serialize_entry(
            "cashSelling",
            &OptNum(difference(Some(r.cash_selling), p.map(|p| p.cash_selling))),
        )?;
        if self.transactional {
            map.serialize_entry(
                "transactionalBuying",
                &OptNum(difference(
                    r.transactional_buying,
                    p.and_then(|p| p.transactional_buying),
                )),
            )?;
            map.serialize_entry(
                "transactionalSelling",
                &OptNum(difference(
                    r.transactional_selling,
                    p.and_then(|p| p.transactional_selling),
                )),
            )?;
        }
        map.end()
    }
}

struct RatesBankJson<'a> {
    view: &'a BankView,
    variant: RatesVariant,
    style: &'a ViewStyle,
}

impl Serialize for RatesBankJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        serialize_bank_head(&mut map, self.view, false)?;
        let rates: Vec<RateJson<'_>> = self
            .view
            .rates
            .iter()
            .map(|rate| RateJson {
                rate,
                transactional: self.variant.transactional,
                style: self.style,
            })
            .collect();
        map.serialize_entry("exchangeRates", &rates)?;
        if self.variant.social_links {
            map.serialize_entry("socialLinks", &self.view.bank.social_links)?;
        }
        map.end()
    }
}

/// One element of /rates' `data`: the inner envelope holding this bank.
pub fn rates_element(view: &BankView, variant: RatesVariant, style: &ViewStyle) -> String {
    // Serialized straight to text: going through `serde_json::Value` would
    // turn the exact numbers into floats.
    let inner = Envelope {
        message: "success",
        status: 200,
        data: [RatesBankJson {
            view,
            variant,
            style,
        }],
    };
    serde_json::to_string(&inner).expect("views serialize to JSON")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::{BankInfo, PreviousRate};
    use ratewire_proto::{BankId, CurrencyCode, SocialLink};
    use rust_decimal::Decimal;
    use std::str::FromStr;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn style() -> ViewStyle {
        ViewStyle {
            currency_image_base: "https://img.test/c".into(),
            outliers: crate::quality::OutlierRule::default(),
        }
    }

    fn view() -> BankView {
        BankView {
            bank: BankInfo {
                id: BankId::new(7).unwrap(),
                code: "CBE".into(),
                name: "Commercial Bank of Ethiopia".into(),
                image_url: "https://img.test/cbe.png".into(),
                social_links: vec![SocialLink {
                    platform: "telegram".into(),
                    url: "https://t.me/cbe".into(),
                }],
                active: true,
            },
            last_rates_updated_at: Some("2026-11-23T08:00:00Z".parse().unwrap()),
            rates: vec![RateView {
                currency: CurrencyCode::parse("USD").unwrap(),
                updated_at: "2026-11-23T08:00:00Z".parse().unwrap(),
                cash_buying: dec("155.10"),
                cash_selling: dec("158.2"),
                transactional_buying: Some(dec("155.0")),
                transactional_selling: None,
                previous: Some(PreviousRate {
                    cash_buying: dec("155.35"),
                    cash_selling: dec("158.2"),
                    transactional_buying: None,
                    transactional_selling: None,
                }),
            }],
        }
    }

    fn parse(s: &str) -> serde_json::Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn difference_is_current_minus_previous_and_zero_without_previous() {
        assert_eq!(
            difference(Some(dec("10.5")), Some(dec("10.25"))),
            Some(dec("0.25"))
        );
        assert_eq!(difference(Some(dec("10.5")), None), Some(Decimal::ZERO));
        assert_eq!(difference(None, Some(dec("1"))), None);
    }

    #[test]
    fn numbers_keep_the_published_digits() {
        let s = rates_element(&view(), RatesVariant::ALL[0], &style());
        assert!(s.contains(r#""cashBuying":155.10"#), "{s}");
        assert!(s.contains(r#""cashSelling":158.2"#), "{s}");
        assert!(
            s.contains(r#""difference":{"cashBuying":-0.25,"cashSelling":0.0}"#),
            "{s}"
        );
    }

    #[test]
    fn plain_variant_leaves_out_transactional_fields_and_social_links() {
        let json = parse(&rates_element(
            &view(),
            RatesVariant {
                transactional: false,
                social_links: false,
            },
            &style(),
        ));
        assert_eq!(json["message"], "success");
        assert_eq!(json["status"], 200);
        let bank = &json["data"][0];
        assert_eq!(bank["id"], 7);
        assert_eq!(bank["lastRatesUpdatedAt"], "2026-11-23T08:00:00.000Z");
        assert!(bank.get("socialLinks").is_none());
        let rate = &bank["exchangeRates"][0];
        assert!(rate.get("transactionalBuying").is_none());
        assert!(rate["difference"].get("transactionalBuying").is_none());
        assert_eq!(rate["currency"]["symbol"], "USD");
        assert_eq!(rate["currency"]["id"], "USD");
        assert_eq!(rate["currency"]["imageUrl"], "https://img.test/c/usd.png");
        assert_eq!(rate["updatedAt"], "2026-11-23T08:00:00.000Z");
    }

    #[test]
    fn full_variant_has_transactional_fields_and_social_links() {
        let json = parse(&rates_element(
            &view(),
            RatesVariant {
                transactional: true,
                social_links: true,
            },
            &style(),
        ));
        let bank = &json["data"][0];
        assert_eq!(bank["socialLinks"][0]["platform"], "telegram");
        let rate = &bank["exchangeRates"][0];
        assert_eq!(rate["transactionalBuying"], serde_json::json!(155.0));
        assert!(rate["transactionalSelling"].is_null());
        // The previous board had no transactional value: the difference is 0.
        assert_eq!(
            rate["difference"]["transactionalBuying"],
            serde_json::json!(0)
        );
    }

    #[test]
    fn the_response_wraps_elements_in_the_outer_envelope() {
        let element = rates_element(&view(), RatesVariant::ALL[0], &style());
        let json = parse(&crate::views::list_response(&format!(
            "{element},{element}"
        )));
        assert_eq!(json["message"], "Success");
        assert_eq!(json["status"], 200);
        assert_eq!(json["data"].as_array().unwrap().len(), 2);
        assert_eq!(
            parse(&crate::views::list_response(""))["data"],
            serde_json::json!([])
        );
    }
}
