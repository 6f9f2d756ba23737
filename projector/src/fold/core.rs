//! The fold's rules, with no I/O: [`apply`] takes the model and one event
//! and returns what changes (and changes the model with it). Both ways of
//! writing a batch (all of a batch's changes at once, or one event's in a
//! savepoint of its own) turn these changes into SQL, and the tests fold
//! logs with this alone to say what Postgres must hold.
//!
//! The rules:
//! - an event applies once: an id applied before is a duplicate (a
//!   producer's retry that reached the log twice);
//! - a bank is registered once; every other bank event, board or
//!   retraction needs a registered bank;
//! - a board replaces any board of its bank with the same as-of (a
//!   correction); one at or before the bank's latest rewrites history
//!   behind the newest row, which readers of "rows after the newest I saw"
//!   must be told;
//! - a currency is first quoted by the earliest board that names it,
//!   replaced or not;
//! - a retraction withdraws its bank's board published with that event id
//!   and is remembered, so the board stays withdrawn if its event is
//!   applied later; a retraction naming no stored board of its bank
//!   withdraws nothing;
//! - a reference day replaces what its source published for that day.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, NaiveDate, Utc};
use ratewire_proto::{BankId, BoardPublished, CurrencyCode, Envelope, Event, Source};
use ratewire_readmodel::quality::Screen;
use uuid::Uuid;

use super::model::{
    Bank, Board, Model, Position, Quote, ReferenceDay, ReferenceQuote, Retraction, Stored,
};
use super::screen::screen;
use super::stored;

/// The rule of a bank event for a bank never registered.
pub const UNKNOWN_BANK: &str = "unknown-bank";
/// The rule of a second registration of a bank.
pub const BANK_REGISTERED: &str = "bank-registered";

/// One change to the model's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Applied {
        event_id: Uuid,
        at: Position,
    },
    /// The bank's row as it is now (registered or changed).
    Bank {
        id: BankId,
        bank: Bank,
    },
    /// A board was written at or before the bank's latest, or one was
    /// withdrawn: history changed behind the newest row.
    HistoryRewritten(BankId),
    BoardRemoved {
        bank: BankId,
        as_of: DateTime<Utc>,
    },
    BoardAdded {
        bank: BankId,
        as_of: DateTime<Utc>,
        board: Board,
        published: Published,
        screen: Screen,
        stored: Stored,
    },
    FirstQuoted {
        currency: CurrencyCode,
        at: DateTime<Utc>,
    },
    Retracted {
        board: Uuid,
        retraction: Retraction,
    },
    ReferenceDay {
        source: String,
        date: NaiveDate,
        day: ReferenceDay,
    },
    /// The as-of of the bank's latest board moved (`None`: it has none):
    /// kept as a history of its own, so that readers find a bank's latest
    /// board as known at any instant with one probe.
    Latest {
        bank: BankId,
        as_of: Option<DateTime<Utc>>,
    },
}

/// Where a board came from, kept with its version (a board's provenance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// When ingest received it (the envelope's time).
    pub received_at: DateTime<Utc>,
    /// Where its event is on the log.
    pub at: Position,
    pub source: Option<Source>,
    pub reason: Option<String>,
}

/// What became of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Applied,
    /// Its id was applied before.
    Duplicate,
    /// It keeps the contract but contradicts the model: the rule's name
    /// and what happened (the event is dead-lettered).
    Refused {
        rule: &'static str,
        reason: String,
    },
}

/// An event's verdict, its changes, and the currencies whose best rates
/// it may move (its bank's quotes before and after, and any board it
/// wrote or withdrew).
#[derive(Debug, Clone)]
pub struct Step {
    pub verdict: Verdict,
    pub changes: Vec<Change>,
    pub currencies: BTreeSet<CurrencyCode>,
}

/// Applies `envelope`, found at `at` on the log, to `model`.
pub fn apply(model: &mut Model, envelope: &Envelope, at: Position) -> Step {
    let bank = envelope.bank_id;
    let quoted = |model: &Model| -> Vec<CurrencyCode> {
        model
            .latest(bank)
            .map(|(_, board)| board.currencies().collect())
            .unwrap_or_default()
    };
    let before = quoted(model);
    let latest_before = model.latest(bank).map(|(as_of, _)| as_of);
    let (verdict, mut changes) = match decide(model, envelope, at) {
        Ok(changes) => (Verdict::Applied, changes),
        Err(verdict) => (verdict, Vec::new()),
    };
    let mut currencies: BTreeSet<CurrencyCode> = BTreeSet::new();
    if verdict == Verdict::Applied {
        for change in &changes {
            match change {
                Change::BoardAdded { board, .. } => currencies.extend(board.currencies()),
                Change::BoardRemoved { bank, as_of } => {
                    if let Some(board) = model.boards.get(&(*bank, *as_of)) {
                        currencies.extend(board.currencies());
                    }
                }
                _ => {}
            }
            absorb(model, change);
        }
        if !matches!(envelope.event, Event::ReferenceBoardPublished(_)) {
            currencies.extend(before);
            currencies.extend(quoted(model));
            let latest = model.latest(bank).map(|(as_of, _)| as_of);
            if latest != latest_before {
                changes.push(Change::Latest {
                    bank,
                    as_of: latest,
                });
            }
        }
    }
    Step {
        verdict,
        changes,
        currencies,
    }
}

/// The changes `envelope` makes, or why it makes none.
fn decide(model: &Model, envelope: &Envelope, at: Position) -> Result<Vec<Change>, Verdict> {
    let id = envelope.bank_id;
    if model.applied.contains_key(&envelope.event_id) {
        return Err(Verdict::Duplicate);
    }
    let mut changes = vec![Change::Applied {
        event_id: envelope.event_id,
        at,
    }];
    let time = envelope.occurred_at;
    let registered = model.banks.get(&id);
    let known = || {
        registered.ok_or_else(|| Verdict::Refused {
            rule: UNKNOWN_BANK,
            reason: format!("bank {id} is not registered"),
        })
    };
    match &envelope.event {
        Event::BankRegistered(e) => {
            if registered.is_some() {
                return Err(Verdict::Refused {
                    rule: BANK_REGISTERED,
                    reason: format!("bank {id} is already registered"),
                });
            }
            let bank = Bank {
                code: e.code.clone(),
                name: e.name.clone(),
                image_url: e.image_url.clone(),
                social_links: e.social_links.clone(),
                active: true,
                registered_at: time,
                updated_at: time,
                schedule: e.schedule.clone(),
            };
            changes.push(Change::Bank { id, bank });
        }
        Event::BankUpdated(e) => {
            let mut bank = known()?.clone();
            if let Some(code) = &e.code {
                bank.code = code.clone();
            }
            if let Some(name) = &e.name {
                bank.name = name.clone();
            }
            if let Some(image_url) = &e.image_url {
                bank.image_url = image_url.clone();
            }
            if let Some(links) = &e.social_links {
                bank.social_links = links.clone();
            }
            if let Some(schedule) = &e.schedule {
                bank.schedule = schedule.clone();
            }
            bank.updated_at = time;
            changes.push(Change::Bank { id, bank });
        }
        Event::BankDeactivated(_) | Event::BankReactivated(_) => {
            let mut bank = known()?.clone();
            bank.active = matches!(envelope.event, Event::BankReactivated(_));
            bank.updated_at = time;
            changes.push(Change::Bank { id, bank });
        }
        Event::BoardPublished(board) => {
            known()?;
            let withdrawn = model
                .retracted
                .get(&envelope.event_id)
                .is_some_and(|r| r.bank == id);
            // Withdrawn before it was applied (a re-drive after its
            // retraction): it stays withdrawn.
            if !withdrawn {
                publish(model, envelope, board, at, &mut changes);
            }
        }
        Event::BoardRetracted(retraction) => {
            known()?;
            if !model.retracted.contains_key(&retraction.board_event_id) {
                changes.push(Change::Retracted {
                    board: retraction.board_event_id,
                    retraction: Retraction {
                        bank: id,
                        by: envelope.event_id,
                        reason: retraction.reason.clone(),
                        at: time,
                    },
                });
            }
            if let Some(as_of) = model.board_published_as(id, retraction.board_event_id) {
                changes.push(Change::BoardRemoved { bank: id, as_of });
                changes.push(Change::HistoryRewritten(id));
            }
        }
        Event::ReferenceBoardPublished(board) => {
            let quotes = board
                .rates()
                .iter()
                .map(|r| {
                    let quote = ReferenceQuote {
                        currency: r.currency(),
                        buying: r.buying(),
                        selling: r.selling(),
                        weighted_average: r.weighted_average(),
                    };
                    (quote.currency, quote)
                })
                .collect::<BTreeMap<_, _>>()
                .into_values()
                .collect();
            changes.push(Change::ReferenceDay {
                source: board.source().to_owned(),
                date: board.date(),
                day: ReferenceDay {
                    event_id: envelope.event_id,
                    published_at: time,
                    quotes,
                },
            });
        }
    }
    Ok(changes)
}

/// A board's changes: whatever it replaces goes, history is rewritten when
/// it is not the newest, and currencies it quotes first are recorded.
fn publish(
    model: &Model,
    envelope: &Envelope,
    board: &BoardPublished,
    at: Position,
    changes: &mut Vec<Change>,
) {
    let bank = envelope.bank_id;
    let as_of = board.as_of();
    if model.boards.contains_key(&(bank, as_of)) {
        changes.push(Change::BoardRemoved { bank, as_of });
    }
    if model
        .latest(bank)
        .is_some_and(|(latest, _)| as_of <= latest)
    {
        changes.push(Change::HistoryRewritten(bank));
    }
    for rate in board.rates() {
        let currency = rate.currency();
        if model
            .first_quoted
            .get(&currency)
            .is_none_or(|first| *first > as_of)
        {
            changes.push(Change::FirstQuoted {
                currency,
                at: as_of,
            });
        }
    }
    let quotes = board
        .rates()
        .iter()
        .map(|r| Quote {
            currency: r.currency(),
            cash_buying: r.cash_buying(),
            cash_selling: r.cash_selling(),
            transactional_buying: r.transactional_buying(),
            transactional_selling: r.transactional_selling(),
        })
        .collect();
    let board_added = Board::new(envelope.event_id, quotes);
    let screen = screen(model, bank, as_of, &board_added);
    let stored = stored::after_latest(model, bank, as_of, &board_added);
    changes.push(Change::BoardAdded {
        bank,
        as_of,
        screen,
        stored,
        board: board_added,
        published: Published {
            received_at: envelope.occurred_at,
            at,
            source: board.source().cloned(),
            reason: board.reason().map(str::to_owned),
        },
    });
}

/// Makes `change` in `model`.
pub fn absorb(model: &mut Model, change: &Change) {
    match change {
        Change::Applied { event_id, at } => {
            model.applied.insert(*event_id, *at);
        }
        Change::Bank { id, bank } => {
            model.banks.insert(*id, bank.clone());
        }
        Change::HistoryRewritten(_) => {}
        Change::BoardRemoved { bank, as_of } => {
            if let Some(board) = model.boards.remove(&(*bank, *as_of)) {
                model.stored.remove(&board.event_id);
            }
        }
        Change::BoardAdded {
            bank,
            as_of,
            board,
            stored,
            ..
        } => {
            if *stored != Stored::Full {
                model.stored.insert(board.event_id, stored.clone());
            }
            model.boards.insert((*bank, *as_of), board.clone());
        }
        Change::FirstQuoted { currency, at } => {
            let first = model.first_quoted.entry(*currency).or_insert(*at);
            *first = (*first).min(*at);
        }
        Change::Retracted { board, retraction } => {
            model
                .retracted
                .entry(*board)
                .or_insert_with(|| retraction.clone());
        }
        Change::ReferenceDay { source, date, day } => {
            model.reference.insert((source.clone(), *date), day.clone());
        }
        Change::Latest { .. } => {}
    }
}

/// When a change became known (its event's known-at time), and by which
/// event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub known_at: DateTime<Utc>,
    pub event_id: Uuid,
}

/// A row as one version: known from its event's known-at time until the
/// change that revised it, if the run revised it too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version<T> {
    pub row: T,
    pub known_from: DateTime<Utc>,
    pub closed: Option<Stamp>,
}

/// A board's version: the board, where it is, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardRow {
    pub bank: BankId,
    pub as_of: DateTime<Utc>,
    pub board: Board,
    pub published: Published,
    pub screen: Screen,
    pub stored: Stored,
}

/// What a run of changes comes to, as versions: the rows that stood
/// before the run and that it closes (a writer sets their end), and every
/// version the run made, in order, each closed when a later change of the
/// run revised it. Nothing is deleted: the bitemporal tables keep every
/// version (readmodel migration 0008).
#[derive(Debug, Default)]
pub struct Net {
    pub applied: Vec<(Uuid, Position)>,
    /// Banks whose stored row the run replaces, and when.
    pub closed_banks: BTreeMap<BankId, DateTime<Utc>>,
    /// Stored boards the run replaces or withdraws, and by what.
    pub closed_boards: BTreeMap<(BankId, DateTime<Utc>), Stamp>,
    /// Stored reference days the run replaces, and when.
    pub closed_days: BTreeMap<(String, NaiveDate), DateTime<Utc>>,
    /// Banks whose stored latest as-of the run moves, and when.
    pub closed_latest: BTreeMap<BankId, DateTime<Utc>>,
    pub banks: Vec<Version<(BankId, Bank)>>,
    /// Banks whose history was rewritten behind their newest row.
    pub rewritten: BTreeSet<BankId>,
    pub boards: Vec<Version<BoardRow>>,
    /// Each currency a board of the run quotes: its first as-of (the
    /// earliest board naming it, replaced or not), and the earliest
    /// known-at time of the run's boards quoting it.
    pub first_quoted: BTreeMap<CurrencyCode, (DateTime<Utc>, DateTime<Utc>)>,
    /// Retractions, with when each became known.
    pub retracted: BTreeMap<Uuid, (Retraction, DateTime<Utc>)>,
    pub reference: Vec<Version<((String, NaiveDate), ReferenceDay)>>,
    /// Each bank's latest as-of, as it moved.
    pub latest: Vec<Version<(BankId, Option<DateTime<Utc>>)>>,
}

/// Versions of rows one key holds at a time: a new row closes the one the
/// run made before it, or else the stored one (whose end `closed` keeps).
struct Keyed<K> {
    open: BTreeMap<K, usize>,
}

impl<K: Ord + Clone> Keyed<K> {
    fn new() -> Self {
        Self {
            open: BTreeMap::new(),
        }
    }

    fn revise<T>(
        &mut self,
        key: &K,
        row: T,
        stamp: Stamp,
        versions: &mut Vec<Version<T>>,
        closed: &mut BTreeMap<K, DateTime<Utc>>,
    ) {
        match self.open.get(key) {
            Some(i) => versions[*i].closed = Some(stamp),
            None => {
                closed.entry(key.clone()).or_insert(stamp.known_at);
            }
        }
        self.open.insert(key.clone(), versions.len());
        versions.push(Version {
            row,
            known_from: stamp.known_at,
            closed: None,
        });
    }
}

impl Net {
    /// The versions `changes` make, each stamped with its event's known-at
    /// time. `model` is the model after the changes.
    pub fn of<'a>(changes: impl IntoIterator<Item = (&'a Change, Stamp)>, model: &Model) -> Net {
        let mut net = Net::default();
        // Versions made by the run and not yet closed, by key.
        let mut banks = Keyed::new();
        let mut latest = Keyed::new();
        let mut days = Keyed::new();
        let mut open_boards: BTreeMap<(BankId, DateTime<Utc>), usize> = BTreeMap::new();
        for (change, stamp) in changes {
            let known_at = stamp.known_at;
            match change {
                Change::Applied { event_id, at } => net.applied.push((*event_id, *at)),
                Change::Bank { id, bank } => banks.revise(
                    id,
                    (*id, bank.clone()),
                    stamp,
                    &mut net.banks,
                    &mut net.closed_banks,
                ),
                Change::Latest { bank, as_of } => latest.revise(
                    bank,
                    (*bank, *as_of),
                    stamp,
                    &mut net.latest,
                    &mut net.closed_latest,
                ),
                Change::HistoryRewritten(id) => {
                    net.rewritten.insert(*id);
                }
                Change::BoardRemoved { bank, as_of } => {
                    match open_boards.remove(&(*bank, *as_of)) {
                        Some(i) => net.boards[i].closed = Some(stamp),
                        None => {
                            net.closed_boards.entry((*bank, *as_of)).or_insert(stamp);
                        }
                    }
                }
                Change::BoardAdded {
                    bank,
                    as_of,
                    board,
                    published,
                    screen,
                    stored,
                } => {
                    // Every currency a board quotes is known from the
                    // earliest known-at time of any board quoting it,
                    // whichever lowered its first quote: the same
                    // whatever order partitions are folded in.
                    for currency in board.currencies() {
                        let first = model.first_quoted.get(&currency).copied().unwrap_or(*as_of);
                        let entry = net
                            .first_quoted
                            .entry(currency)
                            .or_insert((first, known_at));
                        entry.1 = entry.1.min(known_at);
                    }
                    open_boards.insert((*bank, *as_of), net.boards.len());
                    net.boards.push(Version {
                        row: BoardRow {
                            bank: *bank,
                            as_of: *as_of,
                            board: board.clone(),
                            published: published.clone(),
                            screen: *screen,
                            stored: stored.clone(),
                        },
                        known_from: known_at,
                        closed: None,
                    });
                }
                // Taken from the boards above.
                Change::FirstQuoted { .. } => {}
                Change::Retracted { board, retraction } => {
                    net.retracted
                        .entry(*board)
                        .or_insert_with(|| (retraction.clone(), known_at));
                }
                Change::ReferenceDay { source, date, day } => {
                    let key = (source.clone(), *date);
                    days.revise(
                        &key,
                        (key.clone(), day.clone()),
                        stamp,
                        &mut net.reference,
                        &mut net.closed_days,
                    );
                }
            }
        }
        net
    }

    pub fn is_empty(&self) -> bool {
        self.applied.is_empty()
    }
}
