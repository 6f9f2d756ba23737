//! What a batch's fold did: counts for the metrics, what the views must
//! refresh, and where the partitions stand.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, NaiveDate, Utc};
use ratewire_proto::{BankId, CurrencyCode, Envelope, Event};

use crate::holes::Hole;

#[derive(Debug, Default)]
pub struct BatchOutcome {
    pub applied: usize,
    /// Already applied (redelivered offset or repeated event id).
    pub skipped: usize,
    pub dead_lettered: usize,
    /// The rule each dead-lettered message broke.
    pub refused: Vec<String>,
    /// Unknown event types, skipped by the compatibility rule.
    pub ignored: usize,
    /// Banks whose views must be refreshed.
    pub banks: BTreeSet<BankId>,
    /// Currencies whose best rates may have changed.
    pub currencies: BTreeSet<CurrencyCode>,
    /// Reference days (source, date) whose views must be refreshed.
    pub reference: BTreeSet<(String, NaiveDate)>,
    /// The partitions' next offsets after the batch.
    pub positions: BTreeMap<i32, i64>,
    /// `occurred_at` of every event applied, in the order applied.
    pub occurred: Vec<DateTime<Utc>>,
    /// Partitions whose messages skipped past the stored position.
    pub gaps: Vec<Gap>,
    /// Proven holes the stored positions stepped over.
    pub crossed: Vec<Hole>,
    /// Alert crossings recorded in the outbox.
    pub alerts_fired: u64,
}

impl BatchOutcome {
    /// Notes the views `envelope` may change: its bank's, or its
    /// reference day's.
    pub fn touch(&mut self, envelope: &Envelope) {
        match &envelope.event {
            Event::ReferenceBoardPublished(board) => {
                self.reference
                    .insert((board.source().to_owned(), board.date()));
            }
            _ => {
                self.banks.insert(envelope.bank_id);
            }
        }
    }

    /// `occurred_at` of the newest event applied.
    pub fn newest_event(&self) -> Option<DateTime<Utc>> {
        self.occurred.iter().max().copied()
    }

    /// Adds what another lane's fold did.
    pub fn merge(&mut self, from: BatchOutcome) {
        self.applied += from.applied;
        self.skipped += from.skipped;
        self.dead_lettered += from.dead_lettered;
        self.refused.extend(from.refused);
        self.ignored += from.ignored;
        self.banks.extend(from.banks);
        self.currencies.extend(from.currencies);
        self.reference.extend(from.reference);
        self.positions.extend(from.positions);
        self.occurred.extend(from.occurred);
        self.gaps.extend(from.gaps);
        self.crossed.extend(from.crossed);
        self.alerts_fired += from.alerts_fired;
    }
}

/// A partition's message arrived beyond its stored next offset: messages in
/// between were not received (e.g. read before a re-assignment). Applying it
/// would lose them, so the partition's rest of the batch is left unapplied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub partition: i32,
    pub expected: i64,
    pub found: i64,
}
