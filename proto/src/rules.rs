//! The rules every event on the log obeys, and the names of the ways a
//! message can break them.
//!
//! The types of this crate cannot hold a value that breaks a rule (a
//! [`crate::Rate`] is positive, a [`crate::RateEntry`] never sells below
//! it buys, a [`crate::BoardPublished`] has an as-of time after
//! [`earliest_as_of`]); what relates an event to its envelope or to its
//! message (an as-of time not after `occurredAt` plus
//! [`MAX_FUTURE_SKEW`], a message key equal to the envelope's bank) is
//! checked by [`crate::decode_message`]. Ingest builds its events with these
//! same types and the projector reads through them, so nothing reaches the
//! read model that ingest would refuse, whoever wrote it onto the topic.

use chrono::{DateTime, TimeDelta, Utc};
use rust_decimal::Decimal;

/// How far after the moment it was received (the envelope's `occurredAt`)
/// a board's as-of time may lie: publishers' clocks drift a little.
pub const MAX_FUTURE_SKEW: TimeDelta = TimeDelta::minutes(5);

/// The most currencies one board may carry.
pub const MAX_ENTRIES: usize = 500;

/// The most significant digits a rate may have: what a decimal holds
/// exactly, so a published number is kept digit for digit or refused,
/// never rounded.
pub const MAX_DIGITS: u32 = 28;

/// The largest rate: far above any bank's quote, far below what would
/// overflow a sum or a difference of rates.
pub const MAX_RATE: Decimal = Decimal::from_parts(1_000_000_000, 0, 0, false, 0);

/// The longest reason a retraction or a board may give, in characters.
pub const MAX_REASON_CHARS: usize = 500;

/// The longest URL a board's source may name, in characters.
pub const MAX_SOURCE_URL_CHARS: usize = 2048;

/// The earliest as-of time (and `occurredAt`) of any event: older ones are
/// mistakes (a year 0001 would rewrite history at that instant).
pub fn earliest_as_of() -> DateTime<Utc> {
    DateTime::from_timestamp(631_152_000, 0).expect("1990-01-01T00:00:00Z")
}

/// Which rule a message broke: a short, stable name operators filter dead
/// letters by (see [`Rule::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// Not JSON, or JSON that is not an envelope.
    Envelope,
    /// A payload that does not have its event's shape.
    Payload,
    /// A version that does not exist (0).
    Version,
    /// The message key is not the envelope's bank id.
    Key,
    /// A rate that is not a positive decimal within range and digits.
    Rate,
    /// Selling below buying in a pair.
    SellingBelowBuying,
    /// One half of the transactional pair without the other.
    TransactionalPair,
    /// A currency code ISO 4217 does not know, or not a code at all.
    Currency,
    /// A currency twice on one board.
    DuplicateCurrency,
    /// A board with no currencies, or too many.
    BoardSize,
    /// An as-of time before the horizon or too far after `occurredAt`.
    AsOf,
    /// An `occurredAt` before the horizon or after the message's own
    /// timestamp (plus the skew).
    OccurredAt,
    /// A retraction that cannot be one (a reason too long).
    Retraction,
    /// A board's source that cannot be one: a URL that is not http(s) or
    /// too long, a method not known, a capture time after the board was
    /// received, a digest that is not 64 hex digits.
    Source,
    /// A board's reason too long, or holding NUL.
    Reason,
    /// A bank's publishing schedule that is none of its two forms.
    Schedule,
}

impl Rule {
    pub const ALL: [Rule; 16] = [
        Rule::Envelope,
        Rule::Payload,
        Rule::Version,
        Rule::Key,
        Rule::Rate,
        Rule::SellingBelowBuying,
        Rule::TransactionalPair,
        Rule::Currency,
        Rule::DuplicateCurrency,
        Rule::BoardSize,
        Rule::AsOf,
        Rule::OccurredAt,
        Rule::Retraction,
        Rule::Source,
        Rule::Reason,
        Rule::Schedule,
    ];

    /// The rule's stable name, as stored with a dead letter.
    pub fn code(self) -> &'static str {
        match self {
            Rule::Envelope => "envelope",
            Rule::Payload => "payload",
            Rule::Version => "version",
            Rule::Key => "key",
            Rule::Rate => "rate",
            Rule::SellingBelowBuying => "selling-below-buying",
            Rule::TransactionalPair => "transactional-pair",
            Rule::Currency => "currency",
            Rule::DuplicateCurrency => "duplicate-currency",
            Rule::BoardSize => "board-size",
            Rule::AsOf => "as-of",
            Rule::OccurredAt => "occurred-at",
            Rule::Retraction => "retraction",
            Rule::Source => "source",
            Rule::Reason => "reason",
            Rule::Schedule => "schedule",
        }
    }

    pub fn from_code(code: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|rule| rule.code() == code)
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// One broken rule: which, where (a field path such as
/// `rates[2].cashSelling`) and what is wrong, in words a publisher reads
/// in a 400 and an operator in a dead letter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {message}")]
pub struct Violation {
    pub rule: Rule,
    pub field: String,
    pub message: String,
}

impl Violation {
    pub fn new(rule: Rule, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            rule,
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same violation, its field inside `parent` (`rates[2]`).
    pub fn within(mut self, parent: &str) -> Self {
        self.field = if self.field.is_empty() {
            parent.to_owned()
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }
}

/// A reason's own rule (a retraction's or a board's): at most
/// [`MAX_REASON_CHARS`] characters and no NUL (Postgres cannot store it);
/// the message of the problem, if any.
pub fn check_reason(reason: &str) -> Result<(), String> {
    if reason.chars().count() > MAX_REASON_CHARS {
        Err(format!("must be at most {MAX_REASON_CHARS} characters"))
    } else if reason.contains('\0') {
        Err("must not contain NUL characters".into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_a_distinct_code_that_reads_back() {
        let codes: std::collections::BTreeSet<_> = Rule::ALL.iter().map(|r| r.code()).collect();
        assert_eq!(codes.len(), Rule::ALL.len());
        for rule in Rule::ALL {
            assert_eq!(Rule::from_code(rule.code()), Some(rule));
        }
    }

    #[test]
    fn the_horizon_is_1990() {
        assert_eq!(earliest_as_of().to_rfc3339(), "1990-01-01T00:00:00+00:00");
    }
}
