//! Applies a batch of log messages to the read model in one transaction.
//!
//! Three guards make a message change the model at most once:
//! - the partition's stored next offset: a redelivered message is skipped
//!   (`plan`);
//! - the event id in `applied_events`: a producer retry that reached the
//!   log twice is applied once ([`core`]);
//! - both are written in the same transaction as the rows, so a crash
//!   either keeps all of a batch or none of it.
//!
//! The rules are the pure [`core`]'s, on the slice of the model the batch
//! needs ([`load`]); their changes are written as sets ([`mod@write`]). A
//! batch is written all at once; when Postgres refuses the write for an
//! event's content, the batch starts again one event at a time, each in a
//! savepoint of its own, so that only that event is dead-lettered. Alerts
//! are judged on the way ([`ratewire_alerts::evaluation`]).

mod columns;
pub mod core;
mod dead_letter;
mod known_at;
mod lanes;
pub mod load;
mod message;
pub mod model;
mod outcome;
mod plan;
mod positions;
mod screen;
pub mod stored;
mod traced;
pub mod write;

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use ratewire_alerts::evaluation::{BankNow, Evaluation, Judge};
use ratewire_proto::{BankId, Decoded, Envelope, Event};
use sqlx::{Acquire, PgPool, Postgres, Transaction};
use tracing::{debug, warn};

use self::core::{Change, Stamp, Step, Verdict};
use self::known_at::Clock;
use self::model::{Board, Model};
use self::write::WriteError;
use crate::error::Result;
use crate::holes::Hole;
pub use dead_letter::{Refused, DATA, UNSUPPORTED_VERSION};
pub use lanes::apply_lanes;
pub use message::Incoming;
pub use outcome::{BatchOutcome, Gap};
pub use positions::{move_position, positions, settle};

/// Folds `batch` in one transaction with the partitions' positions. A
/// message past its partition's position is applied only across one of
/// `holes` (offsets the read proved empty, see [`crate::holes`]). With a
/// `judge`, the alerts are evaluated in the same transaction. `pool` is a
/// [`ratewire_readmodel::db::writer_pool`]: the fold's statements are index
/// probes by key, written to keep one plan for any input; planned again for
/// each batch's arrays, the load and the close cost more to plan than to run.
pub async fn apply_batch(
    pool: &PgPool,
    topic: &str,
    batch: &[Incoming],
    holes: &[Hole],
    judge: Option<&Judge>,
) -> Result<BatchOutcome> {
    match fold_batch(pool, topic, batch, holes, judge, Writes::Together).await? {
        Folded::Done(outcome) => Ok(*outcome),
        Folded::Refused => {
            match fold_batch(pool, topic, batch, holes, judge, Writes::OneByOne).await? {
                Folded::Done(outcome) => Ok(*outcome),
                Folded::Refused => unreachable!("one event at a time, every event is taken"),
            }
        }
    }
}

/// How a batch's changes are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// All at once: a write Postgres refuses for its content ends the
    /// attempt, and the batch starts again one event at a time. Live feeds
    /// never send such events, so the usual batch saves a savepoint's two
    /// round trips per event.
    Together,
    OneByOne,
}

/// Folds `batch` as [`apply_batch`] does, its changes written as `writes`
/// says (the fold's tests hold both ways to the core).
pub async fn apply_batch_written(
    pool: &PgPool,
    topic: &str,
    batch: &[Incoming],
    holes: &[Hole],
    writes: Writes,
) -> Result<BatchOutcome> {
    fold(pool, topic, batch, holes, None, writes).await
}

/// Folds `batch`, starting again one event at a time when a write at
/// once is refused.
async fn fold(
    pool: &PgPool,
    topic: &str,
    batch: &[Incoming],
    holes: &[Hole],
    judge: Option<&Judge>,
    writes: Writes,
) -> Result<BatchOutcome> {
    match fold_batch(pool, topic, batch, holes, judge, writes).await? {
        Folded::Done(outcome) => Ok(*outcome),
        Folded::Refused => {
            match fold_batch(pool, topic, batch, holes, judge, Writes::OneByOne).await? {
                Folded::Done(outcome) => Ok(*outcome),
                Folded::Refused => unreachable!("one event at a time, every event is taken"),
            }
        }
    }
}

enum Folded {
    Done(Box<BatchOutcome>),
    /// Postgres refused the batch's write; the transaction was rolled back.
    Refused,
}

async fn fold_batch(
    pool: &PgPool,
    topic: &str,
    batch: &[Incoming],
    holes: &[Hole],
    judge: Option<&Judge>,
    writes: Writes,
) -> Result<Folded> {
    let mut outcome = BatchOutcome::default();
    let partitions: Vec<i32> = batch
        .iter()
        .map(|m| m.partition)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut tx = pool.begin().await?;
    // Two projectors that were configured to overlap take turns instead
    // of both applying.
    let (stored, known) = positions::lock(&mut tx, topic, &partitions).await?;
    outcome.positions = stored.clone();
    let mut clock = Clock::new(known);
    let apply = plan::plan(batch, holes, &mut outcome);

    let mut events: Vec<(&Incoming, &Envelope)> = Vec::with_capacity(apply.len());
    let mut refused: Vec<(&Incoming, Refused)> = Vec::new();
    for message in apply {
        match decoded(message, &mut outcome) {
            Ok(Some(envelope)) => events.push((message, envelope)),
            Ok(None) => {}
            Err(refusal) => refused.push((message, refusal)),
        }
    }
    let mut evaluation = match judge {
        Some(judge) => {
            let banks = events
                .iter()
                .filter(|(_, e)| !matches!(e.event, Event::ReferenceBoardPublished(_)))
                .map(|(_, e)| e.bank_id.get())
                .collect();
            let messages = events.iter().map(|(m, _)| (m.partition, m.offset));
            judge
                .begin(&mut tx, topic, &stored, messages, &banks)
                .await?
        }
        None => None,
    };
    // Each traced record's own span, open until the batch commits.
    let _traced = traced::spans(&events, evaluation.as_mut());

    match writes {
        Writes::Together => {
            let mut model = load::load(&mut tx, events.iter().map(|(_, e)| *e)).await?;
            let mut changes = Vec::new();
            for (message, envelope) in &events {
                let stamp = Stamp {
                    known_at: clock.stamp(message, envelope.occurred_at),
                    event_id: envelope.event_id,
                };
                let step = core::apply(&mut model, envelope, message.position());
                if let Some(refusal) = counted(&mut outcome, envelope, &step) {
                    refused.push((message, refusal));
                }
                if step.verdict == Verdict::Applied {
                    observe(&mut evaluation, message, envelope, &model, &step);
                }
                changes.extend(step.changes.into_iter().map(|c| (c, stamp)));
            }
            let net = core::Net::of(changes.iter().map(|(c, s)| (c, *s)), &model);
            match write::write(&mut tx, &net).await {
                Ok(()) => {}
                Err(WriteError::Database(e)) if is_data_error(&e) => {
                    debug!(error = %e, events = events.len(),
                        "a batch's write refused; the batch starts again one event at a time");
                    tx.rollback().await?;
                    return Ok(Folded::Refused);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Writes::OneByOne => {
            for (message, envelope) in &events {
                let known_at = clock.stamp(message, envelope.occurred_at);
                match try_event(&mut tx, message, envelope, known_at).await? {
                    Tried::Done(step, model) => {
                        if let Some(refusal) = counted(&mut outcome, envelope, &step) {
                            refused.push((message, refusal));
                        }
                        if step.verdict == Verdict::Applied {
                            observe(&mut evaluation, message, envelope, &model, &step);
                        }
                    }
                    Tried::Refused(refusal) => refused.push((message, refusal)),
                }
            }
        }
    }
    dead_letter::record(&mut tx, topic, &refused, &mut outcome).await?;
    if let (Some(judge), Some(evaluation)) = (judge, evaluation) {
        outcome.alerts_fired = evaluation
            .finish(judge, &mut tx, topic, &outcome.positions)
            .await?;
    }
    positions::store(&mut tx, topic, &outcome.positions, clock.last()).await?;
    tx.commit().await?;
    Ok(Folded::Done(Box::new(outcome)))
}

/// The event `message` holds; `None` for a type this build does not know
/// (skipped by the compatibility rule), a refusal for one that breaks the
/// contract or is newer than this build reads.
fn decoded<'a>(
    message: &'a Incoming,
    outcome: &mut BatchOutcome,
) -> std::result::Result<Option<&'a Envelope>, Refused> {
    match message.decode() {
        Ok(Decoded::Event(envelope)) => Ok(Some(envelope)),
        Ok(Decoded::UnknownType {
            event_id,
            event_type,
            version,
        }) => {
            warn!(%event_id, event_type, version, partition = message.partition, offset = message.offset,
                "skipping an event type this build does not know");
            outcome.ignored += 1;
            Ok(None)
        }
        Ok(Decoded::UnsupportedVersion {
            event_id,
            event_type,
            version,
        }) => Err(Refused::new(
            UNSUPPORTED_VERSION,
            format!("{event_type} version {version} is newer than this build reads"),
            Some(*event_id),
        )),
        Err(e) => Err(Refused::from(e)),
    }
}

/// Counts `step` in `outcome`; the refusal to dead-letter, if it is one.
fn counted(outcome: &mut BatchOutcome, envelope: &Envelope, step: &Step) -> Option<Refused> {
    match &step.verdict {
        Verdict::Applied => {
            outcome.applied += 1;
            outcome.touch(envelope);
            outcome.occurred.push(envelope.occurred_at);
            outcome.currencies.extend(step.currencies.iter().copied());
            None
        }
        Verdict::Duplicate => {
            debug!(event_id = %envelope.event_id, "event already applied");
            outcome.skipped += 1;
            None
        }
        Verdict::Refused { rule, reason } => {
            Some(Refused::new(rule, reason.clone(), Some(envelope.event_id)))
        }
    }
}

/// Hands the evaluation how an applied event left its bank.
fn observe(
    evaluation: &mut Option<Evaluation>,
    message: &Incoming,
    envelope: &Envelope,
    model: &Model,
    step: &Step,
) {
    let Some(evaluation) = evaluation else {
        return;
    };
    if matches!(envelope.event, Event::ReferenceBoardPublished(_))
        || !evaluation.covers(message.partition, message.offset)
    {
        return;
    }
    let bank = envelope.bank_id;
    let Some(row) = model.banks.get(&bank) else {
        return;
    };
    let mut without_previous = BTreeSet::new();
    let latest = model.latest(bank);
    let predecessor = latest.and_then(|(as_of, _)| predecessor(model, step, bank, as_of));
    let quotes = match latest {
        Some((as_of, board)) => board
            .quotes
            .iter()
            .map(|q| {
                let previous = predecessor.and_then(|p| p.quote(q.currency));
                if previous.is_none() {
                    without_previous.insert(q.currency);
                }
                ratewire_alerts::judge::Quote {
                    bank: bank.get(),
                    currency: q.currency,
                    cash_buying: Some(q.cash_buying),
                    cash_selling: Some(q.cash_selling),
                    transactional_buying: q.transactional_buying,
                    transactional_selling: q.transactional_selling,
                    updated_at: as_of,
                    previous: previous.map_or([None; 4], |p| {
                        [
                            Some(p.cash_buying),
                            Some(p.cash_selling),
                            p.transactional_buying,
                            p.transactional_selling,
                        ]
                    }),
                }
            })
            .collect(),
        None => Vec::new(),
    };
    let now = BankNow {
        bank: bank.get(),
        code: row.code.clone(),
        name: row.name.clone(),
        active: row.active,
        quotes,
        without_previous,
    };
    evaluation.observe(envelope.event_id, envelope.occurred_at, now);
}

/// The board before `bank`'s newest (as of `as_of`) when `step` added that
/// newest board on top of the one before, which every batch loads. Any
/// other time the boards loaded may skip some below the newest, so there
/// is none: the previous values stored for the same board stand.
fn predecessor<'m>(
    model: &'m Model,
    step: &Step,
    bank: BankId,
    as_of: DateTime<Utc>,
) -> Option<&'m Board> {
    let added = step.changes.iter().any(
        |c| matches!(c, Change::BoardAdded { bank: b, as_of: a, .. } if *b == bank && *a == as_of),
    );
    let rewritten = step
        .changes
        .iter()
        .any(|c| matches!(c, Change::HistoryRewritten(b) if *b == bank));
    if !added || rewritten {
        return None;
    }
    model
        .boards_of(bank)
        .rev()
        .find(|(at, _)| *at < as_of)
        .map(|(_, board)| board)
}

/// What became of one event tried on its own.
enum Tried {
    /// The core's step, and the model slice after it.
    Done(Step, Model),
    /// Postgres refused its write for its content.
    Refused(Refused),
}

/// Applies one event in a savepoint of its own: its slice of the model is
/// read, the core decides, the changes are written; a write Postgres
/// refuses for its content is rolled back alone. Errors only when
/// Postgres fails.
async fn try_event(
    tx: &mut Transaction<'_, Postgres>,
    message: &Incoming,
    envelope: &Envelope,
    known_at: chrono::DateTime<chrono::Utc>,
) -> Result<Tried> {
    let mut savepoint = tx.begin().await?;
    let mut model = load::load(&mut savepoint, [envelope]).await?;
    let step = core::apply(&mut model, envelope, message.position());
    let stamp = Stamp {
        known_at,
        event_id: envelope.event_id,
    };
    let net = core::Net::of(step.changes.iter().map(|c| (c, stamp)), &model);
    match write::write(&mut savepoint, &net).await {
        Ok(()) => {
            savepoint.commit().await?;
            Ok(Tried::Done(step, model))
        }
        Err(WriteError::Database(e)) if is_data_error(&e) => {
            savepoint.rollback().await?;
            Ok(Tried::Refused(Refused::new(
                DATA,
                e.to_string(),
                Some(envelope.event_id),
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// What became of one message tried on its own (a dead letter re-driven).
#[derive(Debug)]
pub enum Attempt {
    Applied,
    /// Its event was applied before.
    Duplicate,
    /// A type this build does not know: skipped by the compatibility rule.
    Ignored,
    Refused(Refused),
}

/// Decodes and applies one message in a savepoint of its own; records what
/// it changed in `outcome`. Errors only when Postgres fails.
pub async fn try_message(
    tx: &mut Transaction<'_, Postgres>,
    message: &Incoming,
    outcome: &mut BatchOutcome,
) -> Result<Attempt> {
    let envelope = match decoded(message, outcome) {
        Ok(Some(envelope)) => envelope,
        Ok(None) => return Ok(Attempt::Ignored),
        Err(refused) => return Ok(Attempt::Refused(refused)),
    };
    // A message re-driven from the dead letters is known from its own
    // time on the log, as a replay would have it.
    let known_at = Clock::default().stamp(message, envelope.occurred_at);
    Ok(match try_event(tx, message, envelope, known_at).await? {
        Tried::Done(step, _) => match counted(outcome, envelope, &step) {
            Some(refused) => Attempt::Refused(refused),
            None if step.verdict == Verdict::Duplicate => Attempt::Duplicate,
            None => Attempt::Applied,
        },
        Tried::Refused(refused) => Attempt::Refused(refused),
    })
}

/// Errors caused by the event's content (SQLSTATE classes 22 and 23), as
/// opposed to Postgres being unreachable, which must stop and retry the batch.
fn is_data_error(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|c| c.starts_with("22") || c.starts_with("23")),
        _ => false,
    }
}
