//! The events of ratewire's log, in their current version (boards and
//! their parts are in [`crate::board`]).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use crate::board::BoardPublished;
pub use crate::reference::ReferenceBoardPublished;
use crate::rules::{check_reason, Rule, Violation};
use crate::schedule::{nullable, Schedule};

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
    /// When the bank is expected to publish (an optional addition to v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
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
    /// `Some(None)` (`null` on the log) clears the schedule (an optional
    /// addition to v1).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub schedule: Option<Option<Schedule>>,
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

/// A board the bank published is withdrawn: from then on the read model
/// answers as if it had never been published (the board before it is in
/// force again). Its bank is the envelope's, the board is named by the
/// event id it was published with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BoardRetracted {
    pub board_event_id: Uuid,
    /// Why, in the publisher's or operator's words (at most
    /// [`MAX_REASON_CHARS`](crate::rules::MAX_REASON_CHARS) characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl BoardRetracted {
    pub fn check(&self) -> Result<(), Violation> {
        match &self.reason {
            Some(reason) => check_reason(reason)
                .map_err(|message| Violation::new(Rule::Retraction, "reason", message)),
            None => Ok(()),
        }
    }
}

/// Every event, in its current shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    BankRegistered(BankRegistered),
    BankUpdated(BankUpdated),
    BankDeactivated(BankDeactivated),
    BankReactivated(BankReactivated),
    BoardPublished(BoardPublished),
    BoardRetracted(BoardRetracted),
    /// A central bank's reference board for a day (its envelope's `bankId`
    /// is [`crate::reference::REFERENCE_SUBJECT`]).
    ReferenceBoardPublished(ReferenceBoardPublished),
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
            Event::BoardRetracted(_) => "BoardRetracted",
            Event::ReferenceBoardPublished(_) => "ReferenceBoardPublished",
        }
    }

    /// The version this build writes, and the newest it can read, for the
    /// event's type.
    pub fn current_version(type_name: &str) -> Option<u32> {
        match type_name {
            "BankRegistered"
            | "BankUpdated"
            | "BankDeactivated"
            | "BankReactivated"
            | "BoardPublished"
            | "BoardRetracted"
            | "ReferenceBoardPublished" => Some(1),
            _ => None,
        }
    }
}
