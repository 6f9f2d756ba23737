//! /api/v1/rates/best-rates: for one currency, the bank that pays the most
//! when buying and asks the least when selling.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::ser::{Serialize, SerializeMap, Serializer};

use super::{timestamp, BankInfo, HistoryRecord, Num, PreviousRate, RateView};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    CashBuying,
    CashSelling,
    TransactionalBuying,
    TransactionalSelling,
}

impl Field {
    pub const ALL: [Field; 4] = [
        Field::CashBuying,
        Field::CashSelling,
        Field::TransactionalBuying,
        Field::TransactionalSelling,
    ];

    /// The JSON key, also the column name in camel case.
    pub fn key(self) -> &'static str {
        match self {
            Field::CashBuying => "cashBuying",
            Field::CashSelling => "cashSelling",
            Field::TransactionalBuying => "transactionalBuying",
            Field::TransactionalSelling => "transactionalSelling",
        }
    }

    /// The field whose JSON key is `key`.
    pub fn from_key(key: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.key() == key)
    }

    pub fn column(self) -> &'static str {
        match self {
            Field::CashBuying => "cash_buying",
            Field::CashSelling => "cash_selling",
            Field::TransactionalBuying => "transactional_buying",
            Field::TransactionalSelling => "transactional_selling",
        }
    }

    /// Buying rates are best when highest (the bank pays the customer most),
    /// selling rates when lowest.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Field::CashBuying | Field::TransactionalBuying)
    }

    pub fn of(self, rate: &RateView) -> Option<Decimal> {
        match self {
            Field::CashBuying => Some(rate.cash_buying),
            Field::CashSelling => Some(rate.cash_selling),
            Field::TransactionalBuying => rate.transactional_buying,
            Field::TransactionalSelling => rate.transactional_selling,
        }
    }

    /// The field of a board's record.
    pub fn of_record(self, record: &HistoryRecord) -> Option<Decimal> {
        match self {
            Field::CashBuying => Some(record.cash_buying),
            Field::CashSelling => Some(record.cash_selling),
            Field::TransactionalBuying => record.transactional_buying,
            Field::TransactionalSelling => record.transactional_selling,
        }
    }

    pub fn of_previous(self, previous: &PreviousRate) -> Option<Decimal> {
        match self {
            Field::CashBuying => Some(previous.cash_buying),
            Field::CashSelling => Some(previous.cash_selling),
            Field::TransactionalBuying => previous.transactional_buying,
            Field::TransactionalSelling => previous.transactional_selling,
        }
    }
}

/// One bank's value of a field as the best-rate rule compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// `None`: the bank does not quote the field.
    pub value: Option<Decimal>,
    /// The as-of of the board it is on.
    pub updated_at: DateTime<Utc>,
    pub bank: i64,
}

/// The index of the best offer for `field`: the best value; ties go to the
/// earlier update, then the lower bank id (decisions.md). `None` when no
/// offer quotes the field. Rate alerts on the best rate judge by this rule
/// too.
pub fn best_offer(field: Field, offers: impl IntoIterator<Item = Offer>) -> Option<usize> {
    let better = |a: &Offer, b: &Offer| -> Ordering {
        let by_value = if field.higher_is_better() {
            a.value.cmp(&b.value)
        } else {
            b.value.cmp(&a.value)
        };
        by_value
            .then(b.updated_at.cmp(&a.updated_at))
            .then(b.bank.cmp(&a.bank))
    };
    offers
        .into_iter()
        .enumerate()
        .filter(|(_, o)| o.value.is_some())
        .max_by(|(_, a), (_, b)| better(a, b))
        .map(|(i, _)| i)
}

/// A change as a signed string with four fraction digits: "+0.2500",
/// "-1.1000", "0.0000".
pub fn signed_difference(d: Decimal) -> String {
    let rounded = d.round_dp_with_strategy(4, RoundingStrategy::MidpointAwayFromZero);
    let text = format!("{:.4}", rounded.abs());
    match rounded.cmp(&Decimal::ZERO) {
        Ordering::Greater => format!("+{text}"),
        Ordering::Less => format!("-{text}"),
        Ordering::Equal => text,
    }
}

/// The winner of one field, with what the entry shows about it.
#[derive(Debug, Clone, PartialEq)]
pub struct BestEntry {
    pub bank: BankInfo,
    pub price: Decimal,
    pub updated_at: DateTime<Utc>,
    /// The same bank's previous value of the field, if any.
    pub previous: Option<Decimal>,
    /// The bank's values of the field over the last 30 days, oldest first.
    pub series: Vec<(DateTime<Utc>, Decimal)>,
}

struct EntryJson<'a> {
    entry: &'a BestEntry,
    computed_at: DateTime<Utc>,
}

impl Serialize for EntryJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let e = self.entry;
        let mut map = serializer.serialize_map(Some(6))?;
        map.serialize_entry("price", &Num(e.price))?;
        map.serialize_entry("updatedAt", &timestamp(e.updated_at))?;
        map.serialize_entry("timestamp", &timestamp(self.computed_at))?;
        let change = e
            .previous
            .map_or(Decimal::ZERO, |previous| e.price - previous);
        map.serialize_entry("difference", &signed_difference(change))?;
        map.serialize_entry("bank", &BankRef(&e.bank))?;
        let rates: Vec<_> = e
            .series
            .iter()
            .map(|(at, value)| Point {
                value: *value,
                at: *at,
            })
            .collect();
        map.serialize_entry("rates", &rates)?;
        map.end()
    }
}

/// A bank as best rates, conversions and spreads show it: id (a number),
/// name, code and image.
pub struct BankRef<'a>(pub &'a BankInfo);

impl Serialize for BankRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("id", &self.0.id.get())?;
        map.serialize_entry("name", &self.0.name)?;
        map.serialize_entry("code", &self.0.code)?;
        map.serialize_entry("imageUrl", &self.0.image_url)?;
        map.end()
    }
}

struct Point {
    value: Decimal,
    at: DateTime<Utc>,
}

impl Serialize for Point {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("value", &Num(self.value))?;
        map.serialize_entry("timestamp", &timestamp(self.at))?;
        map.end()
    }
}

struct BestJson<'a> {
    entries: &'a [Option<BestEntry>; 4],
    computed_at: DateTime<Utc>,
}

impl Serialize for BestJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        for (field, entry) in Field::ALL.iter().zip(self.entries) {
            let entry = entry.as_ref().map(|entry| EntryJson {
                entry,
                computed_at: self.computed_at,
            });
            map.serialize_entry(field.key(), &entry)?;
        }
        map.end()
    }
}

/// The whole best-rates body; `entries` in [`Field::ALL`] order, `None`
/// where no active bank quotes the field.
pub fn best_rates_response(entries: &[Option<BestEntry>; 4], computed_at: DateTime<Utc>) -> String {
    let data = BestJson {
        entries,
        computed_at,
    };
    serde_json::to_string(&super::Envelope {
        message: "success",
        status: 200,
        data,
    })
    .expect("views serialize to JSON")
}

/// The best-rates body at `computed_at`, and its fingerprint without that
/// time (a recomputation that changes nothing else is no change), from one
/// rendering: rendered at the Unix epoch, fingerprinted, then the epoch's
/// timestamps replaced by `computed_at`'s, instead of rendering twice, once
/// at each time. Nothing else
/// in the body can read as the epoch: every board's as-of, so every
/// `updatedAt` and series point, is from 1990 on
/// (`ratewire_proto::rules::earliest_as_of`).
pub fn best_rates_fingerprinted(
    entries: &[Option<BestEntry>; 4],
    computed_at: DateTime<Utc>,
) -> (String, String) {
    let at_epoch = best_rates_response(entries, DateTime::UNIX_EPOCH);
    let digest = super::digest(&at_epoch);
    let body = at_epoch.replace(&timestamp(DateTime::UNIX_EPOCH), &timestamp(computed_at));
    (body, digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewire_proto::{BankId, CurrencyCode};
    use std::str::FromStr;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn bank(id: i64) -> BankInfo {
        BankInfo {
            id: BankId::new(id).unwrap(),
            code: format!("B{id}"),
            name: format!("Bank {id}"),
            image_url: format!("https://i.test/{id}.png"),
            social_links: vec![],
            active: true,
        }
    }

    fn rate(buy: &str, sell: &str, tx: Option<(&str, &str)>, at: &str) -> RateView {
        RateView {
            currency: CurrencyCode::parse("USD").unwrap(),
            updated_at: at.parse().unwrap(),
            cash_buying: dec(buy),
            cash_selling: dec(sell),
            transactional_buying: tx.map(|t| dec(t.0)),
            transactional_selling: tx.map(|t| dec(t.1)),
            previous: None,
        }
    }

    fn pick_best(field: Field, banks: &[BankInfo], rates: &[RateView]) -> Option<usize> {
        best_offer(
            field,
            banks.iter().zip(rates).map(|(bank, rate)| Offer {
                value: field.of(rate),
                updated_at: rate.updated_at,
                bank: bank.id.get(),
            }),
        )
    }

    #[test]
    fn buying_is_best_highest_and_selling_lowest() {
        let banks = [bank(1), bank(2), bank(3)];
        let rates = [
            rate("150", "160", None, "2026-11-20T08:00:00Z"),
            rate("152", "161", None, "2026-11-20T08:00:00Z"),
            rate("151", "159", None, "2026-11-20T08:00:00Z"),
        ];
        let pick = |field| pick_best(field, &banks, &rates);
        assert_eq!(pick(Field::CashBuying), Some(1));
        assert_eq!(pick(Field::CashSelling), Some(2));
        assert_eq!(pick(Field::TransactionalBuying), None);
    }

    #[test]
    fn ties_go_to_the_earlier_update_then_the_lower_bank_id() {
        let banks = [bank(5), bank(2), bank(9)];
        let rates = [
            rate("150", "160", None, "2026-11-20T08:00:00Z"),
            rate("150", "160", None, "2026-11-20T09:00:00Z"),
            rate("150", "160", None, "2026-11-20T08:00:00Z"),
        ];
        let pick = |field| pick_best(field, &banks, &rates);
        assert_eq!(
            pick(Field::CashBuying),
            Some(0),
            "earlier update, then bank 5 < 9"
        );
        assert_eq!(pick(Field::CashSelling), Some(0));
    }

    #[test]
    fn differences_are_signed_with_four_digits() {
        assert_eq!(signed_difference(dec("0.25")), "+0.2500");
        assert_eq!(signed_difference(dec("-1.1")), "-1.1000");
        assert_eq!(signed_difference(Decimal::ZERO), "0.0000");
        assert_eq!(signed_difference(dec("0.00004")), "0.0000");
        assert_eq!(signed_difference(dec("0.00005")), "+0.0001");
    }

    /// Bank 3's best price, up 0.25 on the day before.
    fn entry() -> BestEntry {
        BestEntry {
            bank: bank(3),
            price: dec("155.10"),
            updated_at: "2026-11-20T08:00:00Z".parse().unwrap(),
            previous: Some(dec("154.85")),
            series: vec![
                ("2026-11-19T08:00:00Z".parse().unwrap(), dec("154.85")),
                ("2026-11-20T08:00:00Z".parse().unwrap(), dec("155.10")),
            ],
        }
    }

    #[test]
    fn the_response_has_four_keys_and_null_for_unquoted_fields() {
        let entry = entry();
        let body = best_rates_response(
            &[Some(entry.clone()), Some(entry), None, None],
            "2026-11-20T08:00:01Z".parse().unwrap(),
        );
        assert!(body.contains(r#""price":155.10"#), "{body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["message"], "success");
        let best = &json["data"]["cashBuying"];
        assert_eq!(best["difference"], "+0.2500");
        assert_eq!(best["timestamp"], "2026-11-20T08:00:01.000Z");
        assert_eq!(best["updatedAt"], "2026-11-20T08:00:00.000Z");
        assert_eq!(
            best["bank"],
            serde_json::json!({"id": 3, "name": "Bank 3", "code": "B3", "imageUrl": "https://i.test/3.png"})
        );
        assert_eq!(best["rates"][0]["timestamp"], "2026-11-19T08:00:00.000Z");
        assert!(json["data"]["transactionalBuying"].is_null());
    }

    #[test]
    fn one_rendering_gives_the_body_and_a_fingerprint_without_its_time() {
        let entries = [Some(entry()), None, Some(entry()), None];
        let at = "2026-11-20T08:00:01.25Z".parse().unwrap();
        let (body, digest) = best_rates_fingerprinted(&entries, at);
        assert_eq!(body, best_rates_response(&entries, at));
        assert_eq!(
            digest,
            crate::views::digest(&best_rates_response(&entries, DateTime::UNIX_EPOCH))
        );
        let later = best_rates_fingerprinted(&entries, "2026-11-21T00:00:00Z".parse().unwrap());
        assert_eq!(later.1, digest);
        assert_ne!(later.0, body);
    }
}
