//! The events of ratewire's log, in their current version.
//!
//! Money is `rust_decimal::Decimal` and travels as a JSON *string* on the log
//! ("155.10"), so the exact digits a bank published survive every hop; only
//! the API's edge renders them as JSON numbers.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::ids::CurrencyCode;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocialLink {
    pub platform: String,
    pub url: String,
}

/// A bank joined; its id is in the envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BankRegistered {
    pub code: String,
    pub name: String,
    pub image_url: String,
    #[serde(default)]
    pub social_links: Vec<SocialLink>,
}

/// Some of a bank's metadata changed; absent fields are unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BankUpdated {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub social_links: Option<Vec<SocialLink>>,
}

/// The bank leaves every list; its history stays readable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankDeactivated {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A deactivated bank is listed again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankReactivated {}

/// One rate board: every currency one bank quotes at one as-of time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BoardPublished {
    pub as_of: DateTime<Utc>,
    pub rates: Vec<RateEntry>,
}

/// Birr per unit of `currency`, as the bank published it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateEntry {
    pub currency: CurrencyCode,
    pub cash_buying: Decimal,
    pub cash_selling: Decimal,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactional_buying: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactional_selling: Option<Decimal>,
}

/// Every event, in its current shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    BankRegistered(BankRegistered),
    BankUpdated(BankUpdated),
    BankDeactivated(BankDeactivated),
    BankReactivated(BankReactivated),
    BoardPublished(BoardPublished),
}

impl Event {
    /// The `type` written in the envelope.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::BankRegistered(_) => "BankRegistered",
            Event::BankUpdated(_) => "BankUpdated",
            Event::BankDeactivated(_) => "BankDeactivated",
            Event::BankReactivated(_) => "BankReactivated",
            Event::BoardPublished(_) => "BoardPublished",
        }
    }

    /// The version this build writes, and the newest it can read, for the
    /// event's type.
    pub fn current_version(type_name: &str) -> Option<u32> {
        match type_name {
            "BankRegistered" | "BankUpdated" | "BankDeactivated" | "BankReactivated"
            | "BoardPublished" => Some(1),
            _ => None,
        }
    }
}
