//! The read model's rows as the fold's rules see them, in memory: what the
//! pure core reads and changes. A batch's fold loads the slice its events
//! need from Postgres; a whole log folded into one gives what the read
//! model must hold (the fold's tests compare the two).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, NaiveDate, Utc};
use ratewire_proto::{BankId, CurrencyCode, Schedule, SocialLink};
use rust_decimal::Decimal;
use uuid::Uuid;

/// Where a message is on the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub partition: i32,
    pub offset: i64,
}

/// A registered bank, active or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bank {
    pub code: String,
    pub name: String,
    pub image_url: String,
    pub social_links: Vec<SocialLink>,
    pub active: bool,
    pub registered_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When the bank is expected to publish.
    pub schedule: Option<Schedule>,
}

/// One currency's rates on a board, as stored (exact decimals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    pub currency: CurrencyCode,
    pub cash_buying: Decimal,
    pub cash_selling: Decimal,
    pub transactional_buying: Option<Decimal>,
    pub transactional_selling: Option<Decimal>,
}

/// A stored board: the event that published it and its rates, one per
/// currency in code order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Board {
    pub event_id: Uuid,
    pub quotes: Vec<Quote>,
}

impl Board {
    pub fn new(event_id: Uuid, mut quotes: Vec<Quote>) -> Self {
        quotes.sort_by_key(|q| q.currency);
        Board { event_id, quotes }
    }

    pub fn currencies(&self) -> impl Iterator<Item = CurrencyCode> + '_ {
        self.quotes.iter().map(|q| q.currency)
    }

    /// Its quote of `currency`, if it quotes it.
    pub fn quote(&self, currency: CurrencyCode) -> Option<&Quote> {
        let i = self
            .quotes
            .binary_search_by_key(&currency, |q| q.currency)
            .ok()?;
        Some(&self.quotes[i])
    }
}

/// How a board version's rates are stored (the rule is the fold's
/// `stored` module's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    Full,
    /// The currencies in `same` are read from the board published as
    /// `base`; the others are stored.
    Against {
        base: Uuid,
        same: BTreeSet<CurrencyCode>,
    },
}

impl Stored {
    /// Whether `currency` is read from the base.
    pub fn repeats(&self, currency: CurrencyCode) -> bool {
        matches!(self, Stored::Against { same, .. } if same.contains(&currency))
    }

    /// The base it is read against, if any.
    pub fn base(&self) -> Option<Uuid> {
        match self {
            Stored::Full => None,
            Stored::Against { base, .. } => Some(*base),
        }
    }
}

/// A board withdrawn by a retraction of `bank`'s, remembered so that it
/// stays withdrawn if its event is applied later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retraction {
    pub bank: BankId,
    pub by: Uuid,
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}

/// One currency of a reference day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReferenceQuote {
    pub currency: CurrencyCode,
    pub buying: Decimal,
    pub selling: Decimal,
    pub weighted_average: Decimal,
}

/// A reference source's board for a day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceDay {
    pub event_id: Uuid,
    pub published_at: DateTime<Utc>,
    /// In code order.
    pub quotes: Vec<ReferenceQuote>,
}

/// The rows, by their keys. A slice loaded for a batch holds, for each
/// bank its events name, the bank, its latest boards (as many as the
/// batch may withdraw, plus one) and the boards its events replace or
/// retract; the ids, retractions and currencies the events name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    /// Event ids applied, with where they were on the log.
    pub applied: BTreeMap<Uuid, Position>,
    pub banks: BTreeMap<BankId, Bank>,
    pub boards: BTreeMap<(BankId, DateTime<Utc>), Board>,
    /// Each currency's first quote: the earliest as-of of any board that
    /// named it, replaced or not (so a replay, whose partitions interleave
    /// otherwise, gives the same answer).
    pub first_quoted: BTreeMap<CurrencyCode, DateTime<Utc>>,
    /// Retracted boards, by the event id they were published with.
    pub retracted: BTreeMap<Uuid, Retraction>,
    pub reference: BTreeMap<(String, NaiveDate), ReferenceDay>,
    /// How the boards in force are stored, by their event ids: the next
    /// board of their bank is stored against the same base.
    pub stored: BTreeMap<Uuid, Stored>,
}

impl Model {
    /// `bank`'s latest board (the greatest as-of).
    pub fn latest(&self, bank: BankId) -> Option<(DateTime<Utc>, &Board)> {
        self.boards_of(bank).next_back()
    }

    /// `bank`'s boards, oldest first.
    pub fn boards_of(
        &self,
        bank: BankId,
    ) -> impl DoubleEndedIterator<Item = (DateTime<Utc>, &Board)> {
        self.boards
            .range((bank, DateTime::<Utc>::MIN_UTC)..=(bank, DateTime::<Utc>::MAX_UTC))
            .map(|((_, as_of), board)| (*as_of, board))
    }

    /// The as-of of `bank`'s stored board published as `event_id`.
    pub fn board_published_as(&self, bank: BankId, event_id: Uuid) -> Option<DateTime<Utc>> {
        self.boards_of(bank)
            .find(|(_, board)| board.event_id == event_id)
            .map(|(as_of, _)| as_of)
    }
}
