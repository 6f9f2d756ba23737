//! Applies a batch of log messages to the read model in one transaction.
//!
//! Three guards make a message change the model at most once:
//! - the partition's stored next offset: a redelivered message is skipped;
//! - the event id in `applied_events`: a producer retry that reached the log
//!   twice is applied once;
//! - both are written in the same transaction as the rows, so a crash either
//!   keeps all of a batch or none of it.
//!
//! This module walks a batch in order; [`positions`] keeps the partitions'
//! stored offsets, `boards` applies runs of boards set-based and `event`
//! applies any event one at a time (the reference the fast path matches).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, NaiveDate, Utc};
use ratewire_proto::{
    decode, decode_message, BankId, CurrencyCode, DecodeError, Decoded, Envelope, Event, Message,
};
use sqlx::{Acquire, PgConnection, PgPool, Postgres, Transaction};
use tracing::{debug, warn};

use crate::error::Result;
use crate::holes::Hole;
pub use alerts::AlertsFold;
use alerts::Guard;
use event::{apply_event, Applied, Rejection};
use positions::lock_positions;

mod alerts;
mod boards;
mod event;
mod lanes;
mod positions;

pub use lanes::apply_lanes;
pub use positions::{move_position, positions};

/// One message as read from the topic.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub partition: i32,
    pub offset: i64,
    /// Shared by the message's clones (a lane takes a copy of each message).
    pub payload: Arc<[u8]>,
    /// The partitioning key (a bank's id, by the contract).
    pub key: Option<Vec<u8>>,
    /// When the broker says it was produced or appended.
    pub timestamp: Option<DateTime<Utc>>,
    /// What [`Incoming::decode`] found, kept for the message's clones:
    /// the consumer decodes a batch as it receives it, while the batch
    /// before is still being written, so the lanes only write. Empty until
    /// then (a message is never changed once made).
    pub(crate) decoded: Arc<OnceLock<Result<Decoded, DecodeError>>>,
}

impl Incoming {
    /// A message as producers write them: keyed by `bank`, no timestamp.
    pub fn keyed(partition: i32, offset: i64, bank: BankId, payload: Vec<u8>) -> Self {
        Self {
            partition,
            offset,
            payload: payload.into(),
            key: Some(ratewire_proto::partition_key(bank).into_bytes()),
            timestamp: None,
            decoded: Arc::default(),
        }
    }

    /// Decodes the message by every rule of the contract (once; its clones
    /// share the result).
    pub fn decode(&self) -> &Result<Decoded, DecodeError> {
        self.decoded.get_or_init(|| {
            decode_message(Message {
                key: self.key.as_deref(),
                payload: &self.payload,
                timestamp: self.timestamp,
            })
        })
    }
}

/// What a batch did.
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
    fn touch(&mut self, envelope: &Envelope) {
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

/// Folds `batch` in one transaction with the partitions' positions. A
/// message past its partition's position is applied only across one of
/// `holes` (offsets the read proved empty, see [`crate::holes`]). With
/// `alerts`, the alerts are evaluated in the same transaction (see
/// [`alerts`]).
pub async fn apply_batch(
    pool: &PgPool,
    topic: &str,
    batch: &[Incoming],
    holes: &[Hole],
    alerts: Option<&AlertsFold>,
) -> Result<BatchOutcome> {
    match fold_batch(pool, topic, batch, holes, alerts, Runs::SetBased).await? {
        Folded::Done(outcome) => Ok(*outcome),
        Folded::Refused => {
            match fold_batch(pool, topic, batch, holes, alerts, Runs::OneByOne).await? {
                Folded::Done(outcome) => Ok(*outcome),
                Folded::Refused => unreachable!("the one-by-one fold takes every run"),
            }
        }
    }
}

/// How runs of boards are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runs {
    /// Set-based, with no savepoint of their own: a run the fast path
    /// refuses ends the attempt, and the batch starts again one by one.
    /// Runs are refused only for what live feeds never send (an unknown
    /// bank, a retracted board, a database error), so the usual batch saves
    /// the savepoint's two round trips.
    SetBased,
    OneByOne,
}

enum Folded {
    Done(Box<BatchOutcome>),
    /// The fast path refused a run; the transaction was rolled back.
    Refused,
}

async fn fold_batch(
    pool: &PgPool,
    topic: &str,
    batch: &[Incoming],
    holes: &[Hole],
    alerts: Option<&AlertsFold>,
    runs: Runs,
) -> Result<Folded> {
    let mut outcome = BatchOutcome::default();
    let partitions: Vec<i32> = batch
        .iter()
        .map(|m| m.partition)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut tx = pool.begin().await?;

    // Lock the partitions' positions for the transaction: two projectors that
    // were configured to overlap take turns instead of both applying. The
    // rows exist after a partition's first batch, so one statement locks them.
    let mut rows = lock_positions(&mut tx, topic, &partitions).await?;
    if rows.len() < partitions.len() {
        sqlx::query(
            "INSERT INTO consumer_offsets (topic, partition, next_offset)
             SELECT $1, p, 0 FROM UNNEST($2::int[]) AS p
             ON CONFLICT DO NOTHING",
        )
        .bind(topic)
        .bind(&partitions)
        .execute(&mut *tx)
        .await?;
        rows = lock_positions(&mut tx, topic, &partitions).await?;
    }
    outcome.positions = rows.into_iter().collect();
    let mut guard = match alerts {
        Some(alerts) => {
            alerts
                .guard(&mut tx, topic, batch, &outcome.positions)
                .await?
        }
        None => None,
    };
    // Alerts judge every event on its own.
    let runs = match &guard {
        Some(guard) if guard.per_event => Runs::OneByOne,
        _ => runs,
    };
    let mut evaluation = alerts.zip(guard.as_mut());

    let mut run = Vec::new();
    for message in batch {
        if outcome
            .gaps
            .iter()
            .any(|g| g.partition == message.partition)
        {
            continue;
        }
        let next = outcome.positions.entry(message.partition).or_insert(0);
        if message.offset < *next {
            outcome.skipped += 1;
            // Applied already. When that was this projector's own batch
            // whose commit succeeded but answered an error, its views were
            // never refreshed: refresh them now (writing a view again is
            // harmless). Decoded on receipt; one that broke a rule of the
            // message (its key, its time) still names its bank, as before.
            let again;
            let decoded = match message.decode() {
                Ok(decoded) => Some(decoded),
                Err(_) => {
                    again = decode(&message.payload).ok();
                    again.as_ref()
                }
            };
            if let Some(Decoded::Event(envelope)) = decoded {
                outcome.touch(envelope);
                if let Event::BoardPublished(board) = &envelope.event {
                    outcome
                        .currencies
                        .extend(board.rates().iter().map(|r| r.currency()));
                }
            }
            continue;
        }
        if message.offset > *next {
            let hole = Hole {
                partition: message.partition,
                from: *next,
                to: message.offset,
            };
            let proven = holes
                .iter()
                .any(|h| h.partition == hole.partition && h.from <= hole.from && h.to == hole.to);
            if !proven {
                outcome.gaps.push(Gap {
                    partition: message.partition,
                    expected: *next,
                    found: message.offset,
                });
                continue;
            }
            outcome.crossed.push(hole);
        }
        *next = message.offset + 1;
        // Consecutive boards go together through the set-based path.
        if let Ok(Decoded::Event(Envelope {
            event_id,
            bank_id,
            occurred_at,
            event: Event::BoardPublished(board),
        })) = message.decode()
        {
            run.push(boards::RunEvent {
                event_id: *event_id,
                bank_id: *bank_id,
                occurred_at: *occurred_at,
                board,
                message,
            });
            continue;
        }
        if !flush_run(
            &mut tx,
            topic,
            &mut run,
            &mut outcome,
            &mut evaluation,
            runs,
        )
        .await?
        {
            tx.rollback().await?;
            return Ok(Folded::Refused);
        }
        apply_message(&mut tx, topic, message, &mut outcome, &mut evaluation).await?;
    }
    if !flush_run(
        &mut tx,
        topic,
        &mut run,
        &mut outcome,
        &mut evaluation,
        runs,
    )
    .await?
    {
        tx.rollback().await?;
        return Ok(Folded::Refused);
    }
    if let Some((alerts, guard)) = evaluation {
        alerts
            .finish(&mut tx, topic, guard, &outcome.positions)
            .await?;
        outcome.alerts_fired = guard.fired;
    }

    let (partitions, next_offsets): (Vec<i32>, Vec<i64>) =
        outcome.positions.iter().map(|(p, n)| (*p, *n)).unzip();
    sqlx::query(
        "UPDATE consumer_offsets c SET next_offset = p.next_offset, updated_at = now()
         FROM UNNEST($2::int[], $3::bigint[]) AS p (partition, next_offset)
         WHERE c.topic = $1 AND c.partition = p.partition",
    )
    .bind(topic)
    .bind(&partitions)
    .bind(&next_offsets)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Folded::Done(Box::new(outcome)))
}

/// Applies a run of board events set-based or one by one, as `runs` says.
/// False when the set-based path refused the run: the transaction is then
/// unusable (or holds a partial run) and must be rolled back.
async fn flush_run(
    tx: &mut Transaction<'_, Postgres>,
    topic: &str,
    run: &mut Vec<boards::RunEvent<'_>>,
    outcome: &mut BatchOutcome,
    evaluation: &mut Evaluation<'_>,
    runs: Runs,
) -> Result<bool> {
    if run.is_empty() {
        return Ok(true);
    }
    match runs {
        Runs::SetBased => {
            if let Err(fallback) = boards::apply_run(tx, run, outcome).await {
                match fallback {
                    boards::Fallback::Database(e) => {
                        debug!(error = %e, events = run.len(), "a run of boards refused; the batch starts again one by one")
                    }
                    boards::Fallback::Unusual => {
                        debug!(
                            events = run.len(),
                            "a run of boards refused; the batch starts again one by one"
                        )
                    }
                }
                return Ok(false);
            }
            if let Some((alerts, guard)) = evaluation {
                alerts.applied_run(guard, run.iter().map(|e| (e.message, e.bank_id.get())));
            }
        }
        Runs::OneByOne => {
            for event in run.iter() {
                apply_message(tx, topic, event.message, outcome, evaluation).await?;
            }
        }
    }
    run.clear();
    Ok(true)
}

/// The batch's alert evaluation, when it has one.
type Evaluation<'a> = Option<(&'a AlertsFold, &'a mut Guard)>;

async fn apply_message(
    tx: &mut Transaction<'_, Postgres>,
    topic: &str,
    message: &Incoming,
    outcome: &mut BatchOutcome,
    evaluation: &mut Evaluation<'_>,
) -> Result<()> {
    match try_message(tx, message, outcome).await? {
        Attempt::Refused(refused) => dead_letter(tx, topic, message, &refused, outcome).await?,
        Attempt::Applied => {
            if let (Some((alerts, guard)), Ok(Decoded::Event(envelope))) =
                (evaluation, message.decode())
            {
                alerts.applied(tx, guard, message, envelope).await?;
            }
        }
        Attempt::Duplicate | Attempt::Ignored => {}
    }
    Ok(())
}

/// What became of one message tried on its own.
#[derive(Debug)]
pub enum Attempt {
    Applied,
    /// Its event was applied before.
    Duplicate,
    /// A type this build does not know: skipped by the compatibility rule.
    Ignored,
    Refused(Refused),
}

/// Decodes and applies one message in a savepoint of its own (an event
/// the model cannot take is rolled back alone); records what it changed
/// in `outcome`. Errors only when Postgres fails.
pub async fn try_message(
    tx: &mut Transaction<'_, Postgres>,
    message: &Incoming,
    outcome: &mut BatchOutcome,
) -> Result<Attempt> {
    let envelope = match message.decode() {
        Ok(Decoded::Event(envelope)) => envelope,
        Ok(Decoded::UnknownType {
            event_id,
            event_type,
            version,
        }) => {
            warn!(%event_id, event_type, version, partition = message.partition, offset = message.offset,
                "skipping an event type this build does not know");
            outcome.ignored += 1;
            return Ok(Attempt::Ignored);
        }
        Ok(Decoded::UnsupportedVersion {
            event_id,
            event_type,
            version,
        }) => {
            let error = format!("{event_type} version {version} is newer than this build reads");
            return Ok(Attempt::Refused(Refused::new(
                UNSUPPORTED_VERSION,
                error,
                Some(*event_id),
            )));
        }
        Err(e) => return Ok(Attempt::Refused(Refused::from(e))),
    };

    let mut savepoint = tx.begin().await?;
    let refused = |rule: &str, reason: String| {
        Attempt::Refused(Refused::new(rule, reason, Some(envelope.event_id)))
    };
    let attempt =
        match apply_event(&mut savepoint, envelope, message, &mut outcome.currencies).await {
            Ok(Applied::Yes) => {
                savepoint.commit().await?;
                outcome.applied += 1;
                outcome.touch(envelope);
                outcome.occurred.push(envelope.occurred_at);
                Attempt::Applied
            }
            Ok(Applied::Duplicate) => {
                savepoint.commit().await?;
                debug!(event_id = %envelope.event_id, "event already applied");
                outcome.skipped += 1;
                Attempt::Duplicate
            }
            Err(Rejection::Invalid { rule, reason }) => {
                savepoint.rollback().await?;
                refused(rule, reason)
            }
            Err(Rejection::Database(e)) if is_data_error(&e) => {
                savepoint.rollback().await?;
                refused(DATA, e.to_string())
            }
            Err(Rejection::Database(e)) => return Err(e.into()),
        };
    Ok(attempt)
}

/// The dead-letter rule of a known event type in a newer version than this
/// build reads: not broken, waiting for an upgrade (then re-driven).
pub const UNSUPPORTED_VERSION: &str = "unsupported-version";
/// The dead-letter rule of an event the database refused for its content.
pub const DATA: &str = "data";

/// Why a message was not applied: the rule (a contract rule's code, or
/// one of the read model's: `unknown-bank`, `bank-registered`, [`DATA`],
/// [`UNSUPPORTED_VERSION`]) and the whole story.
#[derive(Debug, Clone)]
pub struct Refused {
    pub rule: String,
    pub error: String,
    pub event_id: Option<uuid::Uuid>,
}

impl Refused {
    fn new(rule: &str, error: String, event_id: Option<uuid::Uuid>) -> Self {
        Self {
            rule: rule.to_owned(),
            error,
            event_id,
        }
    }
}

impl From<&DecodeError> for Refused {
    fn from(e: &DecodeError) -> Self {
        Refused::new(e.rule().code(), e.to_string(), e.event_id())
    }
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

/// Records `message` as refused (and counts it in `outcome`, for the
/// metrics once the batch commits).
async fn dead_letter(
    db: &mut PgConnection,
    topic: &str,
    message: &Incoming,
    refused: &Refused,
    outcome: &mut BatchOutcome,
) -> Result<()> {
    outcome.dead_lettered += 1;
    outcome.refused.push(refused.rule.clone());
    warn!(
        partition = message.partition,
        offset = message.offset,
        event_id = ?refused.event_id,
        rule = refused.rule,
        error = refused.error,
        "dead-lettering a message"
    );
    sqlx::query(
        r#"INSERT INTO dead_letters (topic, partition, "offset", event_id, error, payload,
                                     rule, message_key, message_time)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"#,
    )
    .bind(topic)
    .bind(message.partition)
    .bind(message.offset)
    .bind(refused.event_id)
    .bind(&refused.error)
    .bind(&message.payload[..])
    .bind(&refused.rule)
    .bind(&message.key)
    .bind(message.timestamp)
    .execute(db)
    .await?;
    Ok(())
}
