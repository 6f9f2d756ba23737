//! Applies a batch of log messages to the read model in one transaction.
//!
//! Three guards make a message change the model at most once:
//! - the partition's stored next offset: a redelivered message is skipped;
//! - the event id in `applied_events`: a producer retry that reached the log
//!   twice is applied once;
//! - both are written in the same transaction as the rows, so a crash either
//!   keeps all of a batch or none of it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use ratewire_proto::{decode, BankId, CurrencyCode, Decoded, Envelope, Event};
use sqlx::{Acquire, PgConnection, PgPool, Postgres, Transaction};
use tracing::{debug, warn};

use crate::error::Result;

mod boards;

/// One message as read from the topic.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub partition: i32,
    pub offset: i64,
    pub payload: Vec<u8>,
}

/// What a batch did.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    pub applied: usize,
    /// Already applied (redelivered offset or repeated event id).
    pub skipped: usize,
    pub dead_lettered: usize,
    /// Unknown event types, skipped by the compatibility rule.
    pub ignored: usize,
    /// Banks whose views must be refreshed.
    pub banks: BTreeSet<BankId>,
    /// Currencies whose best rates may have changed.
    pub currencies: BTreeSet<CurrencyCode>,
    /// The partitions' next offsets after the batch.
    pub positions: BTreeMap<i32, i64>,
    /// `occurred_at` of every event applied, in the order applied.
    pub occurred: Vec<DateTime<Utc>>,
    /// Partitions whose messages skipped past the stored position.
    pub gaps: Vec<Gap>,
}

impl BatchOutcome {
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

/// The stored next offset of each of `partitions` (0 when never consumed).
pub async fn positions(
    pool: &PgPool,
    topic: &str,
    partitions: &[i32],
) -> Result<BTreeMap<i32, i64>> {
    let rows: Vec<(i32, i64)> =
        sqlx::query_as("SELECT partition, next_offset FROM consumer_offsets WHERE topic = $1 AND partition = ANY($2)")
            .bind(topic)
            .bind(partitions)
            .fetch_all(pool)
            .await?;
    let mut map: BTreeMap<i32, i64> = partitions.iter().map(|p| (*p, 0)).collect();
    map.extend(rows);
    Ok(map)
}

/// Sets a partition's stored next offset (used only when the broker no
/// longer holds the events before `next_offset`).
pub async fn move_position(
    pool: &PgPool,
    topic: &str,
    partition: i32,
    next_offset: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO consumer_offsets (topic, partition, next_offset) VALUES ($1, $2, $3)
         ON CONFLICT (topic, partition) DO UPDATE SET next_offset = $3, updated_at = now()",
    )
    .bind(topic)
    .bind(partition)
    .bind(next_offset)
    .execute(pool)
    .await?;
    Ok(())
}

pub async fn apply_batch(pool: &PgPool, topic: &str, batch: &[Incoming]) -> Result<BatchOutcome> {
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
            continue;
        }
        if message.offset > *next {
            outcome.gaps.push(Gap {
                partition: message.partition,
                expected: *next,
                found: message.offset,
            });
            continue;
        }
        *next = message.offset + 1;
        // Consecutive boards go together through the set-based path.
        if let Ok(Decoded::Event(Envelope {
            event_id,
            bank_id,
            occurred_at,
            event: Event::BoardPublished(board),
        })) = decode(&message.payload)
        {
            run.push(boards::RunEvent {
                event_id,
                bank_id,
                occurred_at,
                board,
                message,
            });
            continue;
        }
        flush_run(&mut tx, topic, &mut run, &mut outcome).await?;
        apply_message(&mut tx, topic, message, &mut outcome).await?;
    }
    flush_run(&mut tx, topic, &mut run, &mut outcome).await?;

    for (partition, next_offset) in &outcome.positions {
        sqlx::query(
            "UPDATE consumer_offsets SET next_offset = $3, updated_at = now()
             WHERE topic = $1 AND partition = $2",
        )
        .bind(topic)
        .bind(partition)
        .bind(next_offset)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(outcome)
}

/// The stored positions of `partitions`, locked until the transaction ends.
async fn lock_positions(
    tx: &mut Transaction<'_, Postgres>,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<(i32, i64)>> {
    Ok(sqlx::query_as(
        "SELECT partition, next_offset FROM consumer_offsets
         WHERE topic = $1 AND partition = ANY($2) FOR UPDATE",
    )
    .bind(topic)
    .bind(partitions)
    .fetch_all(&mut **tx)
    .await?)
}

/// Applies a run of board events set-based, or, when that path gives up,
/// one by one (rolling back whatever the attempt did).
async fn flush_run(
    tx: &mut Transaction<'_, Postgres>,
    topic: &str,
    run: &mut Vec<boards::RunEvent<'_>>,
    outcome: &mut BatchOutcome,
) -> Result<()> {
    if run.is_empty() {
        return Ok(());
    }
    let mut fast = BatchOutcome::default();
    let mut savepoint = tx.begin().await?;
    match boards::apply_run(&mut savepoint, run, &mut fast).await {
        Ok(()) => {
            savepoint.commit().await?;
            outcome.applied += fast.applied;
            outcome.skipped += fast.skipped;
            outcome.banks.extend(fast.banks);
            outcome.currencies.extend(fast.currencies);
            outcome.occurred.extend(fast.occurred);
        }
        Err(fallback) => {
            savepoint.rollback().await?;
            match fallback {
                boards::Fallback::Database(e) => {
                    debug!(error = %e, events = run.len(), "applying a run of boards one by one")
                }
                boards::Fallback::Unusual => {
                    debug!(events = run.len(), "applying a run of boards one by one")
                }
            }
            for event in run.iter() {
                apply_message(tx, topic, event.message, outcome).await?;
            }
        }
    }
    run.clear();
    Ok(())
}

async fn apply_message(
    tx: &mut Transaction<'_, Postgres>,
    topic: &str,
    message: &Incoming,
    outcome: &mut BatchOutcome,
) -> Result<()> {
    let envelope = match decode(&message.payload) {
        Ok(Decoded::Event(envelope)) => envelope,
        Ok(Decoded::UnknownType {
            event_id,
            event_type,
            version,
        }) => {
            warn!(%event_id, event_type, version, partition = message.partition, offset = message.offset,
                "skipping an event type this build does not know");
            outcome.ignored += 1;
            return Ok(());
        }
        Ok(Decoded::UnsupportedVersion {
            event_id,
            event_type,
            version,
        }) => {
            let error = format!("{event_type} version {version} is newer than this build reads");
            dead_letter(tx, topic, message, Some(event_id), &error).await?;
            outcome.dead_lettered += 1;
            return Ok(());
        }
        Err(e) => {
            dead_letter(tx, topic, message, None, &e.to_string()).await?;
            outcome.dead_lettered += 1;
            return Ok(());
        }
    };

    // A savepoint per event: an event the model cannot take is rolled back
    // alone and dead-lettered; the rest of the batch goes on.
    let mut savepoint = tx.begin().await?;
    match apply_event(&mut savepoint, &envelope, message, &mut outcome.currencies).await {
        Ok(Applied::Yes) => {
            savepoint.commit().await?;
            outcome.applied += 1;
            outcome.banks.insert(envelope.bank_id);
            outcome.occurred.push(envelope.occurred_at);
        }
        Ok(Applied::Duplicate) => {
            savepoint.commit().await?;
            debug!(event_id = %envelope.event_id, "event already applied");
            outcome.skipped += 1;
        }
        Err(Rejection::Invalid(reason)) => {
            savepoint.rollback().await?;
            dead_letter(tx, topic, message, Some(envelope.event_id), &reason).await?;
            outcome.dead_lettered += 1;
        }
        Err(Rejection::Database(e)) if is_data_error(&e) => {
            savepoint.rollback().await?;
            dead_letter(tx, topic, message, Some(envelope.event_id), &e.to_string()).await?;
            outcome.dead_lettered += 1;
        }
        Err(Rejection::Database(e)) => return Err(e.into()),
    }
    Ok(())
}

enum Applied {
    Yes,
    Duplicate,
}

enum Rejection {
    /// The event is well-formed but contradicts the model (unknown bank...).
    Invalid(String),
    Database(sqlx::Error),
}

impl From<sqlx::Error> for Rejection {
    fn from(e: sqlx::Error) -> Self {
        Rejection::Database(e)
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

/// Makes room for boards about to be written (`$1` bank ids and `$2`
/// as-ofs, paired), as the head of one statement:
/// - a board re-published for the same as-of replaces the earlier one, so
///   any stored board with that as-of goes, with its rates (nothing
///   cascades: see migration 0002);
/// - each bank given a board at or before its latest as-of (a backfill or a
///   replacement) gets its `history_rev` bumped: such a write changes
///   history behind the newest row, which readers of "the rows after the
///   newest I saw" (the best-rates series cache) would otherwise never see.
///
/// Every part reads the table as it was before the statement. The deletes
/// name both key columns with `= ANY` so that they stay index scans in the
/// generic plan of the prepared statement (a join against the unnested
/// pairs became a scan of every board once Postgres stopped planning each
/// execution, and grew with the history).
pub(crate) const CLEAR_FOR_BOARDS: &str = "WITH incoming AS (
        SELECT * FROM UNNEST($1::bigint[], $2::timestamptz[]) AS i (bank_id, as_of)
    ), rewrites AS (
        UPDATE banks b SET history_rev = history_rev + 1
        FROM (SELECT bank_id, min(as_of) AS earliest FROM incoming GROUP BY bank_id) i
        WHERE b.id = i.bank_id
          AND i.earliest <= (SELECT max(as_of) FROM boards WHERE bank_id = i.bank_id)
    ), old_rates AS (
        DELETE FROM rates t
        WHERE t.bank_id = ANY($1) AND t.as_of = ANY($2)
          AND (t.bank_id, t.as_of) IN (SELECT bank_id, as_of FROM incoming)
    ), old_boards AS (
        DELETE FROM boards t
        WHERE t.bank_id = ANY($1) AND t.as_of = ANY($2)
          AND (t.bank_id, t.as_of) IN (SELECT bank_id, as_of FROM incoming)
    )";

/// The currencies on the bank's latest board.
async fn latest_currencies(db: &mut PgConnection, bank: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT currency FROM rates
         WHERE bank_id = $1 AND as_of = (SELECT max(as_of) FROM boards WHERE bank_id = $1)",
    )
    .bind(bank)
    .fetch_all(db)
    .await
}

/// Applies one event; adds to `touched` every currency whose best rates it
/// may change (the bank's board before and after).
async fn apply_event(
    db: &mut PgConnection,
    envelope: &Envelope,
    message: &Incoming,
    touched: &mut BTreeSet<CurrencyCode>,
) -> Result<Applied, Rejection> {
    let first_time = sqlx::query(
        r#"INSERT INTO applied_events (event_id, partition, "offset") VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"#,
    )
    .bind(envelope.event_id)
    .bind(message.partition)
    .bind(message.offset)
    .execute(&mut *db)
    .await?
    .rows_affected()
        == 1;
    if !first_time {
        return Ok(Applied::Duplicate);
    }

    let bank = envelope.bank_id.get();
    let at = envelope.occurred_at;
    let unknown = || Rejection::Invalid(format!("bank {bank} is not registered"));
    if !matches!(envelope.event, Event::BankRegistered(_)) {
        // Whatever the bank quoted so far may change its place in best rates.
        let before = latest_currencies(db, bank).await?;
        touched.extend(
            before
                .iter()
                .filter_map(|c| CurrencyCode::parse(c.trim()).ok()),
        );
    }
    match &envelope.event {
        Event::BankRegistered(e) => {
            let inserted = sqlx::query(
                "INSERT INTO banks (id, code, name, image_url, social_links, active, registered_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, TRUE, $6, $6) ON CONFLICT (id) DO NOTHING",
            )
            .bind(bank)
            .bind(&e.code)
            .bind(&e.name)
            .bind(&e.image_url)
            .bind(sqlx::types::Json(&e.social_links))
            .bind(at)
            .execute(&mut *db)
            .await?
            .rows_affected();
            if inserted == 0 {
                return Err(Rejection::Invalid(format!(
                    "bank {bank} is already registered"
                )));
            }
        }
        Event::BankUpdated(e) => {
            let updated = sqlx::query(
                "UPDATE banks SET code = COALESCE($2, code), name = COALESCE($3, name),
                     image_url = COALESCE($4, image_url), social_links = COALESCE($5, social_links),
                     updated_at = $6
                 WHERE id = $1",
            )
            .bind(bank)
            .bind(&e.code)
            .bind(&e.name)
            .bind(&e.image_url)
            .bind(e.social_links.as_ref().map(sqlx::types::Json))
            .bind(at)
            .execute(&mut *db)
            .await?
            .rows_affected();
            if updated == 0 {
                return Err(unknown());
            }
        }
        Event::BankDeactivated(_) | Event::BankReactivated(_) => {
            let active = matches!(envelope.event, Event::BankReactivated(_));
            let updated =
                sqlx::query("UPDATE banks SET active = $2, updated_at = $3 WHERE id = $1")
                    .bind(bank)
                    .bind(active)
                    .bind(at)
                    .execute(&mut *db)
                    .await?
                    .rows_affected();
            if updated == 0 {
                return Err(unknown());
            }
        }
        Event::BoardPublished(board) => {
            let known: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM banks WHERE id = $1)")
                    .bind(bank)
                    .fetch_one(&mut *db)
                    .await?;
            if !known {
                return Err(unknown());
            }
            if board.rates.is_empty() {
                return Err(Rejection::Invalid("empty board".into()));
            }
            touched.extend(board.rates.iter().map(|r| r.currency));
            sqlx::query(&format!("{CLEAR_FOR_BOARDS} SELECT 1"))
                .bind([bank])
                .bind([board.as_of])
                .execute(&mut *db)
                .await?;
            sqlx::query("INSERT INTO boards (bank_id, as_of, event_id) VALUES ($1, $2, $3)")
                .bind(bank)
                .bind(board.as_of)
                .bind(envelope.event_id)
                .execute(&mut *db)
                .await?;
            let currencies: Vec<String> =
                board.rates.iter().map(|r| r.currency.to_string()).collect();
            let names: Vec<String> = board.rates.iter().map(|r| r.currency.name()).collect();
            sqlx::query(
                "INSERT INTO currencies (code, name, first_quoted_at)
                 SELECT code, name, $3 FROM UNNEST($1::text[], $2::text[]) AS c (code, name)
                 ON CONFLICT (code) DO NOTHING",
            )
            .bind(&currencies)
            .bind(&names)
            .bind(board.as_of)
            .execute(&mut *db)
            .await?;
            let cash_buying: Vec<_> = board.rates.iter().map(|r| r.cash_buying).collect();
            let cash_selling: Vec<_> = board.rates.iter().map(|r| r.cash_selling).collect();
            let tx_buying: Vec<_> = board.rates.iter().map(|r| r.transactional_buying).collect();
            let tx_selling: Vec<_> = board
                .rates
                .iter()
                .map(|r| r.transactional_selling)
                .collect();
            sqlx::query(
                "INSERT INTO rates (bank_id, as_of, currency, cash_buying, cash_selling,
                                    transactional_buying, transactional_selling)
                 SELECT $1, $2, * FROM UNNEST($3::text[], $4::numeric[], $5::numeric[], $6::numeric[], $7::numeric[])",
            )
            .bind(bank)
            .bind(board.as_of)
            .bind(&currencies)
            .bind(&cash_buying)
            .bind(&cash_selling)
            .bind(&tx_buying)
            .bind(&tx_selling)
            .execute(&mut *db)
            .await?;
        }
    }
    Ok(Applied::Yes)
}

async fn dead_letter(
    db: &mut PgConnection,
    topic: &str,
    message: &Incoming,
    event_id: Option<uuid::Uuid>,
    error: &str,
) -> Result<()> {
    warn!(
        partition = message.partition,
        offset = message.offset,
        ?event_id,
        error,
        "dead-lettering a message"
    );
    sqlx::query(
        r#"INSERT INTO dead_letters (topic, partition, "offset", event_id, error, payload)
           VALUES ($1, $2, $3, $4, $5, $6)"#,
    )
    .bind(topic)
    .bind(message.partition)
    .bind(message.offset)
    .bind(event_id)
    .bind(error)
    .bind(&message.payload)
    .execute(db)
    .await?;
    Ok(())
}
