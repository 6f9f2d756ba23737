//! The API's read views as pure functions of the read model: no I/O here.
//!
//! The projector renders these once per change and stores the bytes in
//! Redis; the API sends them as they are. Numbers are written with exactly
//! the digits the bank published (see [`Num`]).
//!
//! One module per endpoint renders its body; this module holds what they
//! share: the model read from Postgres, numbers, timestamps, currencies.

mod banks;
mod best;
mod currencies;
mod history;
mod parse;
pub mod quality;
mod rates;
mod reference;
mod series;

pub use banks::banks_element;
pub use best::{
    best_offer, best_rates_fingerprinted, best_rates_response, signed_difference, BankRef,
    BestEntry, Field, Offer,
};
pub use currencies::currencies_response;
pub use history::{history_response, HistoryRecord};
pub use parse::rates_elements;
pub use rates::rates_element;
pub use reference::{
    reference_dates_body, reference_dates_from_body, reference_day_from_body,
    reference_day_response, ReferenceDay, ReferenceJson, ReferencePoint, ReferenceRow, StoredDay,
};
pub use series::{
    bank_series_csv, bank_series_json, best_series_csv, best_series_json, BankPoint, BestPoint,
    SeriesOf,
};

/// The outer envelope of /rates and /banks around their comma-joined
/// elements: the API sends a stored view between these two without copying it.
pub const LIST_HEAD: &str = r#"{"message":"Success","status":200,"data":["#;
pub const LIST_TAIL: &str = "]}";

/// A rendering's fingerprint: what the writer compares to know whether a
/// view changed, and what the API sends as its strong `ETag` (quoted).
/// Computed once, when the view is rendered. 16 hex digits of SHA-256.
pub fn digest(body: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(body.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The whole /rates or /banks body around already rendered, comma-joined
/// elements.
pub fn list_response(joined_elements: &str) -> String {
    [LIST_HEAD, joined_elements, LIST_TAIL].concat()
}

use chrono::{DateTime, SecondsFormat, Utc};
use ratewire_proto::{BankId, CurrencyCode, SocialLink};
use rust_decimal::Decimal;
use serde::ser::{Serialize, SerializeMap, Serializer};

/// What the projector and the API's fallback make views with: their
/// presentation, and how the best rates treat outliers.
#[derive(Debug, Clone)]
pub struct ViewStyle {
    /// Base URL for currency images, without a trailing slash.
    pub currency_image_base: String,
    pub outliers: crate::quality::OutlierRule,
}

/// A bank as every view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct BankInfo {
    pub id: BankId,
    pub code: String,
    pub name: String,
    pub image_url: String,
    pub social_links: Vec<SocialLink>,
    pub active: bool,
}

/// One currency of a bank's current board, with the bank's previous value
/// for each field (from the latest earlier board quoting that currency).
#[derive(Debug, Clone, PartialEq)]
pub struct RateView {
    pub currency: CurrencyCode,
    pub updated_at: DateTime<Utc>,
    pub cash_buying: Decimal,
    pub cash_selling: Decimal,
    pub transactional_buying: Option<Decimal>,
    pub transactional_selling: Option<Decimal>,
    pub previous: Option<PreviousRate>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PreviousRate {
    pub cash_buying: Decimal,
    pub cash_selling: Decimal,
    pub transactional_buying: Option<Decimal>,
    pub transactional_selling: Option<Decimal>,
}

/// A bank and its current board.
#[derive(Debug, Clone, PartialEq)]
pub struct BankView {
    pub bank: BankInfo,
    pub last_rates_updated_at: Option<DateTime<Utc>>,
    pub rates: Vec<RateView>,
}

/// The four shapes of a bank on /rates: with or without the transactional
/// fields, with or without social links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RatesVariant {
    pub transactional: bool,
    pub social_links: bool,
}

impl RatesVariant {
    pub const ALL: [RatesVariant; 4] = [
        RatesVariant {
            transactional: false,
            social_links: false,
        },
        RatesVariant {
            transactional: false,
            social_links: true,
        },
        RatesVariant {
            transactional: true,
            social_links: false,
        },
        RatesVariant {
            transactional: true,
            social_links: true,
        },
    ];

    /// Two characters naming the variant in Redis keys ("10" = transactional only).
    pub fn tag(self) -> &'static str {
        match (self.transactional, self.social_links) {
            (false, false) => "00",
            (false, true) => "01",
            (true, false) => "10",
            (true, true) => "11",
        }
    }
}

/// `this value - previous value`, 0 when there is no previous value
/// (decisions.md). `None` when this value itself is absent.
pub fn difference(current: Option<Decimal>, previous: Option<Decimal>) -> Option<Decimal> {
    let current = current?;
    Some(match previous {
        Some(previous) => current - previous,
        None => Decimal::ZERO,
    })
}

/// ISO 8601 in UTC with milliseconds, the way every timestamp is shown.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// `serialize_with` for times, as [`timestamp`] writes them.
pub mod millis {
    use chrono::{DateTime, Utc};
    use serde::Serializer;

    pub fn one<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::timestamp(*at))
    }

    pub fn maybe<S: Serializer>(at: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => one(at, s),
            None => s.serialize_none(),
        }
    }
}

/// `serialize_with` for decimals, as [`Num`]s.
pub mod numbers {
    use rust_decimal::Decimal;
    use serde::{Serialize, Serializer};

    pub fn one<S: Serializer>(d: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        super::Num(*d).serialize(s)
    }

    pub fn maybe<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        super::OptNum(*d).serialize(s)
    }
}

/// A decimal written as a JSON number with exactly its own digits: 155.10
/// stays 155.10, never 155.09999999999999.
#[derive(Debug, Clone, Copy)]
pub struct Num(pub Decimal);

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = serde_json::value::RawValue::from_string(self.0.to_string())
            .map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

pub(crate) struct OptNum(pub Option<Decimal>);

impl Serialize for OptNum {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(d) => Num(d).serialize(serializer),
            None => serializer.serialize_none(),
        }
    }
}

/// The api-v1 Currency object.
pub struct CurrencyJson<'a> {
    pub code: CurrencyCode,
    pub style: &'a ViewStyle,
}

impl Serialize for CurrencyJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let code = self.code.as_str();
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("id", code)?;
        map.serialize_entry("name", &self.code.name())?;
        map.serialize_entry("symbol", code)?;
        map.serialize_entry(
            "imageUrl",
            &format!(
                "{}/{}.png",
                self.style.currency_image_base,
                code.to_ascii_lowercase()
            ),
        )?;
        map.end()
    }
}

/// All four values of one currency at one moment, with the currency: an
/// entry of /banks (`updatedAt`) or the record of /history (`timestamp`).
pub(crate) struct QuoteJson<'a> {
    pub cash_buying: Decimal,
    pub cash_selling: Decimal,
    pub transactional_buying: Option<Decimal>,
    pub transactional_selling: Option<Decimal>,
    pub time_key: &'static str,
    pub at: DateTime<Utc>,
    pub currency: CurrencyCode,
    pub style: &'a ViewStyle,
}

impl Serialize for QuoteJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(6))?;
        map.serialize_entry("cashBuying", &Num(self.cash_buying))?;
        map.serialize_entry("cashSelling", &Num(self.cash_selling))?;
        map.serialize_entry("transactionalBuying", &OptNum(self.transactional_buying))?;
        map.serialize_entry("transactionalSelling", &OptNum(self.transactional_selling))?;
        map.serialize_entry(self.time_key, &timestamp(self.at))?;
        map.serialize_entry(
            "currency",
            &CurrencyJson {
                code: self.currency,
                style: self.style,
            },
        )?;
        map.end()
    }
}

/// The fields every bank object starts with; the id is a string on /banks
/// and a number elsewhere (api-v1).
pub(crate) fn serialize_bank_head<M: SerializeMap>(
    map: &mut M,
    view: &BankView,
    id_as_string: bool,
) -> Result<(), M::Error> {
    let bank = &view.bank;
    if id_as_string {
        map.serialize_entry("id", &bank.id.to_string())?;
    } else {
        map.serialize_entry("id", &bank.id.get())?;
    }
    map.serialize_entry(
        "lastRatesUpdatedAt",
        &view.last_rates_updated_at.map(timestamp),
    )?;
    map.serialize_entry("name", &bank.name)?;
    map.serialize_entry("code", &bank.code)?;
    map.serialize_entry("imageUrl", &bank.image_url)
}

/// The api-v1 success envelope.
#[derive(serde::Serialize)]
pub struct Envelope<T> {
    pub message: &'static str,
    pub status: u16,
    pub data: T,
}

/// `data` in a "success" envelope, as JSON.
pub fn success<T: Serialize>(data: T) -> String {
    serde_json::to_string(&Envelope {
        message: "success",
        status: 200,
        data,
    })
    .expect("views serialize to JSON")
}
