//! The revision log and a board's provenance, read from the bitemporal
//! board tables (migration 0008): a board version closed by a correction
//! or a retraction is a revision; the version and the one that replaced it
//! (none for a retraction) give its changes.
//!
//! - [`store`]: the queries (rows only, in one statement or one snapshot);
//! - here: what a revision and a board are, and the decisions taken on
//!   them in Rust (the changes between two versions, a board's status);
//! - [`view`]: their JSON and CSV bodies (no I/O).
//!
//! A revising event closes one version (a correction replaces one board of
//! the same bank and as-of; a retraction names one board), so the revising
//! event's id and its known-at time order the log and page it.

pub mod store;
pub mod view;

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode, Source};
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::views::{Field, HistoryRecord};

/// What a revising event did to the board it revised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The board was withdrawn (`BoardRetracted`).
    Retraction,
    /// A board of the same bank and as-of replaced it.
    Correction,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Retraction => "retraction",
            Kind::Correction => "correction",
        }
    }
}

/// One value of one currency that a revision changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub currency: CurrencyCode,
    pub field: Field,
    /// `None`: the currency (or this transactional value) was not quoted.
    pub before: Option<Decimal>,
    /// `None`: the value left (a retraction, or a correction without it).
    pub after: Option<Decimal>,
}

/// One entry of the revision log.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// The revising event (the correcting board's, or the retraction's).
    pub event_id: Uuid,
    pub kind: Kind,
    /// The board it revised.
    pub revised_event_id: Uuid,
    pub bank_id: BankId,
    /// The revised board's as-of.
    pub as_of: DateTime<Utc>,
    /// When the revision became known (the revising event's known-at).
    pub known_at: DateTime<Utc>,
    pub reason: Option<String>,
    pub changes: Vec<Change>,
}

/// A revision as read: the closed version's rates and, for a correction,
/// the replacing version's.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionRow {
    pub event_id: Uuid,
    pub kind: Kind,
    pub revised_event_id: Uuid,
    pub bank_id: BankId,
    pub as_of: DateTime<Utc>,
    pub known_at: DateTime<Utc>,
    pub reason: Option<String>,
    pub before: Vec<HistoryRecord>,
    pub after: Vec<HistoryRecord>,
}

impl RevisionRow {
    /// The log entry: the rates compared value by value.
    pub fn into_revision(self) -> Revision {
        let changes = changes(&self.before, &self.after);
        Revision {
            event_id: self.event_id,
            kind: self.kind,
            revised_event_id: self.revised_event_id,
            bank_id: self.bank_id,
            as_of: self.as_of,
            known_at: self.known_at,
            reason: self.reason,
            changes,
        }
    }
}

/// Every value that differs between two boards' rates, by currency code
/// then field (cash before transactional, buying before selling). A value
/// quoted on neither side is no change; a retraction (`after` empty) has
/// every quoted value leave. Values compare as numbers (155.1 = 155.10),
/// shown with their published digits.
pub fn changes(before: &[HistoryRecord], after: &[HistoryRecord]) -> Vec<Change> {
    let mut currencies: Vec<CurrencyCode> =
        before.iter().chain(after).map(|r| r.currency).collect();
    currencies.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
    currencies.dedup();
    let find = |rates: &[HistoryRecord], code: CurrencyCode| {
        rates.iter().find(|r| r.currency == code).cloned()
    };
    let mut changes = Vec::new();
    for code in currencies {
        let (was, is) = (find(before, code), find(after, code));
        for field in Field::ALL {
            let before = was.as_ref().and_then(|r| field.of_record(r));
            let after = is.as_ref().and_then(|r| field.of_record(r));
            if before != after {
                changes.push(Change {
                    currency: code,
                    field,
                    before,
                    after,
                });
            }
        }
    }
    changes
}

/// Where a board's event is on the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPosition {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// Where a board stands now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Its values are the bank's latest.
    InForce,
    /// A later board of the bank is in force.
    Superseded,
    Retracted,
    Corrected,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::InForce => "inForce",
            Status::Superseded => "superseded",
            Status::Retracted => "retracted",
            Status::Corrected => "corrected",
        }
    }

    /// A board's status: what closed its version, if anything did (the
    /// revision naming `closed_by` among its `revisions`), else whether a
    /// later board of its bank is in force.
    pub fn of(closed_by: Option<Uuid>, revisions: &[Revision], later_in_force: bool) -> Status {
        match closed_by {
            Some(closer) => match revisions.iter().find(|r| r.event_id == closer) {
                Some(r) if r.kind == Kind::Retraction => Status::Retracted,
                // Closed by a board, or by an event that is neither a
                // board nor a retraction this read found: not in force,
                // and replaced.
                _ => Status::Corrected,
            },
            None if later_in_force => Status::Superseded,
            None => Status::InForce,
        }
    }
}

/// A board as published, where it came from, and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Board {
    pub event_id: Uuid,
    pub bank_id: BankId,
    pub as_of: DateTime<Utc>,
    /// As published, by currency code.
    pub rates: Vec<HistoryRecord>,
    /// `None` for boards folded before provenance was kept (migration 0008).
    pub received_at: Option<DateTime<Utc>>,
    pub known_at: Option<DateTime<Utc>>,
    pub log: Option<LogPosition>,
    pub source: Option<Source>,
    pub reason: Option<String>,
    pub status: Status,
    /// The events that revised it, oldest first.
    pub revisions: Vec<Revision>,
    /// Its values that were outliers when it was published.
    pub outliers: Vec<Outlier>,
}

pub use crate::store::Outlier;

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn rate(code: &str, buying: &str, selling: &str, transactional: Option<&str>) -> HistoryRecord {
        HistoryRecord {
            currency: CurrencyCode::parse(code).unwrap(),
            as_of: "2026-11-20T08:00:00Z".parse().unwrap(),
            cash_buying: Decimal::from_str(buying).unwrap(),
            cash_selling: Decimal::from_str(selling).unwrap(),
            transactional_buying: transactional.map(|t| Decimal::from_str(t).unwrap()),
            transactional_selling: None,
        }
    }

    fn d(s: &str) -> Option<Decimal> {
        Some(Decimal::from_str(s).unwrap())
    }

    #[test]
    fn a_correction_lists_each_changed_value_and_a_currency_that_left_or_came() {
        let before = [
            rate("USD", "155.10", "158", None),
            rate("EUR", "170", "175", Some("171")),
        ];
        let after = [
            rate("USD", "155.1", "158.50", None),
            rate("GBP", "200", "205", None),
        ];
        let changes = changes(&before, &after);
        let shown: Vec<(&str, &str, Option<Decimal>, Option<Decimal>)> = changes
            .iter()
            .map(|c| (c.currency.as_str(), c.field.key(), c.before, c.after))
            .collect();
        assert_eq!(
            shown,
            [
                ("EUR", "cashBuying", d("170"), None),
                ("EUR", "cashSelling", d("175"), None),
                ("EUR", "transactionalBuying", d("171"), None),
                ("GBP", "cashBuying", None, d("200")),
                ("GBP", "cashSelling", None, d("205")),
                ("USD", "cashSelling", d("158"), d("158.50")),
            ],
            "155.10 and 155.1 are the same value"
        );
    }

    #[test]
    fn a_retraction_has_every_quoted_value_leave() {
        let before = [rate("USD", "155", "158", Some("156"))];
        let changes = changes(&before, &[]);
        assert_eq!(changes.len(), 3, "transactionalSelling was never quoted");
        assert!(changes
            .iter()
            .all(|c| c.after.is_none() && c.before.is_some()));
    }

    #[test]
    fn a_board_closed_by_a_retraction_is_retracted_and_an_open_one_in_force_or_superseded() {
        let closer = Uuid::new_v4();
        let retraction = Revision {
            event_id: closer,
            kind: Kind::Retraction,
            revised_event_id: Uuid::new_v4(),
            bank_id: BankId::new(1).unwrap(),
            as_of: "2026-11-20T08:00:00Z".parse().unwrap(),
            known_at: "2026-11-20T09:00:00Z".parse().unwrap(),
            reason: None,
            changes: Vec::new(),
        };
        assert_eq!(
            Status::of(Some(closer), std::slice::from_ref(&retraction), false),
            Status::Retracted
        );
        let correction = Revision {
            kind: Kind::Correction,
            ..retraction
        };
        assert_eq!(
            Status::of(Some(closer), &[correction], true),
            Status::Corrected
        );
        assert_eq!(Status::of(None, &[], true), Status::Superseded);
        assert_eq!(Status::of(None, &[], false), Status::InForce);
    }
}
