//! Dead letters for operators: what could not be applied and why, one
//! letter with its payload, and applying letters after all once a fix or
//! an upgrade makes them acceptable (a re-drive), or setting them aside.
//!
//! A re-drive applies each letter exactly once and never races the fold:
//! it takes its partition's position lock, as a batch does, and the event
//! id guard (`applied_events`) makes a letter already applied a no-op. The
//! letters of a partition (so of a bank) are taken in log order. Boards
//! and retractions are order-free in the read model (the latest board is
//! the one with the latest as-of; a retraction is remembered), so applying
//! them late gives what applying them in time would have; a bank's
//! metadata change is applied only if no later change of that bank was,
//! else it is set aside as superseded. A letter refused again stays, with
//! the new reason and one more attempt counted. Views of what changed are
//! written afterwards, version-guarded like every other writer's.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use ratewire_proto::{decode, BankId, CurrencyCode, Decoded, Event};
use serde::Serialize;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use crate::error::Result;
use crate::fold::{try_message, Attempt, BatchOutcome, Incoming};

/// Which dead letters a command is about.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Resolved and re-driven ones too.
    pub all: bool,
    /// Only those that broke this rule (`ratewire_proto::Rule` codes, or
    /// the read model's: `unknown-bank`, `bank-registered`, `data`,
    /// `unsupported-version`).
    pub rule: Option<String>,
    /// Only those whose error mentions this text.
    pub error: Option<String>,
    pub partition: Option<i32>,
    /// Recorded at or after.
    pub since: Option<DateTime<Utc>>,
    /// Recorded before.
    pub until: Option<DateTime<Utc>>,
}

/// A dead letter without its payload.
#[derive(Debug, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetter {
    pub id: i64,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub event_id: Option<Uuid>,
    pub rule: Option<String>,
    pub error: String,
    pub recorded_at: DateTime<Utc>,
    pub attempts: i32,
    pub resolved_at: Option<DateTime<Utc>>,
    /// `resolved` (set aside), `redriven` (applied after all) or
    /// `superseded` (a later change of its bank was applied first).
    pub resolution: Option<String>,
}

/// A dead letter with the message it was: key, timestamp and payload (as
/// JSON when it is JSON, else as text, else as hex).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Shown {
    #[serde(flatten)]
    pub letter: DeadLetter,
    pub key: Option<String>,
    pub message_time: Option<DateTime<Utc>>,
    pub payload: serde_json::Value,
}

const COLUMNS: &str = r#"id, topic, partition, "offset", event_id, rule, error, recorded_at,
    attempts, resolved_at, resolution"#;

/// Dead letters matching `filter`, in the order they were recorded.
pub async fn list(pool: &PgPool, filter: &Filter) -> Result<Vec<DeadLetter>> {
    Ok(sqlx::query_as(&format!(
        r#"SELECT {COLUMNS} FROM dead_letters
           WHERE ($1 OR resolved_at IS NULL)
             AND ($2::text IS NULL OR rule = $2)
             AND ($3::text IS NULL OR strpos(error, $3) > 0)
             AND ($4::int IS NULL OR partition = $4)
             AND ($5::timestamptz IS NULL OR recorded_at >= $5)
             AND ($6::timestamptz IS NULL OR recorded_at < $6)
           ORDER BY id"#
    ))
    .bind(filter.all)
    .bind(&filter.rule)
    .bind(&filter.error)
    .bind(filter.partition)
    .bind(filter.since)
    .bind(filter.until)
    .fetch_all(pool)
    .await?)
}

/// One dead letter with its message.
pub async fn show(pool: &PgPool, id: i64) -> Result<Option<Shown>> {
    let Some(row) = sqlx::query(&format!(
        "SELECT {COLUMNS}, message_key, message_time, payload FROM dead_letters WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let letter = <DeadLetter as sqlx::FromRow<_>>::from_row(&row)?;
    let key: Option<Vec<u8>> = row.try_get("message_key")?;
    let payload: Option<Vec<u8>> = row.try_get("payload")?;
    Ok(Some(Shown {
        letter,
        key: key.map(|k| String::from_utf8_lossy(&k).into_owned()),
        message_time: row.try_get("message_time")?,
        payload: readable(payload.as_deref().unwrap_or_default()),
    }))
}

fn readable(payload: &[u8]) -> serde_json::Value {
    if let Ok(json) = serde_json::from_slice(payload) {
        return json;
    }
    match std::str::from_utf8(payload) {
        Ok(text) => serde_json::json!({ "text": text }),
        Err(_) => serde_json::json!({ "hex": hex_of(payload) }),
    }
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Sets dead letters aside, by id; returns how many were unresolved.
pub async fn resolve(pool: &PgPool, ids: &[i64]) -> Result<u64> {
    Ok(sqlx::query(
        "UPDATE dead_letters SET resolved_at = now(), resolution = 'resolved'
         WHERE id = ANY($1) AND resolved_at IS NULL",
    )
    .bind(ids)
    .execute(pool)
    .await?
    .rows_affected())
}

/// Unresolved dead letters, for the gauge.
pub async fn unresolved(pool: &PgPool) -> Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM dead_letters WHERE resolved_at IS NULL")
            .fetch_one(pool)
            .await?,
    )
}

/// What a re-drive did to one letter.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Redriven {
    pub id: i64,
    pub partition: i32,
    pub offset: i64,
    /// `applied`, `duplicate` (applied before), `superseded`, `ignored`
    /// (an event type this build does not know) or `refused`.
    pub outcome: &'static str,
    /// Why it was refused again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a re-drive changed, for the views to follow.
#[derive(Debug, Default)]
pub struct Changed {
    pub banks: BTreeSet<BankId>,
    pub currencies: BTreeSet<CurrencyCode>,
    /// Reference days (source, date).
    pub reference: BTreeSet<(String, chrono::NaiveDate)>,
}

/// Re-drives the unresolved letters of `topic` among `ids` (all that match
/// `filter` when `ids` is empty), in log order.
pub async fn redrive(
    pool: &PgPool,
    topic: &str,
    ids: &[i64],
    filter: &Filter,
) -> Result<(Vec<Redriven>, Changed)> {
    let chosen: Vec<(i64, i32, i64)> = if ids.is_empty() {
        let filter = Filter {
            all: false,
            ..filter.clone()
        };
        list(pool, &filter)
            .await?
            .into_iter()
            .filter(|l| l.topic == topic)
            .map(|l| (l.id, l.partition, l.offset))
            .collect()
    } else {
        sqlx::query_as(
            r#"SELECT id, partition, "offset" FROM dead_letters
               WHERE id = ANY($1) AND topic = $2 AND resolved_at IS NULL"#,
        )
        .bind(ids)
        .bind(topic)
        .fetch_all(pool)
        .await?
    };
    let mut chosen = chosen;
    chosen.sort_by_key(|(id, partition, offset)| (*partition, *offset, *id));
    let mut results = Vec::with_capacity(chosen.len());
    let mut changed = Changed::default();
    for (id, _, _) in chosen {
        if let Some(result) = redrive_one(pool, topic, id, &mut changed).await? {
            results.push(result);
        }
    }
    Ok((results, changed))
}

async fn redrive_one(
    pool: &PgPool,
    topic: &str,
    id: i64,
    changed: &mut Changed,
) -> Result<Option<Redriven>> {
    let mut tx = pool.begin().await?;
    let row = sqlx::query(
        r#"SELECT partition, "offset", payload, message_key, message_time, rule FROM dead_letters
           WHERE id = $1 AND resolved_at IS NULL FOR UPDATE"#,
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        // Resolved meanwhile.
        return Ok(None);
    };
    let partition: i32 = row.try_get("partition")?;
    // As a batch of this partition does: the fold waits, or we do.
    sqlx::query("SELECT 1 FROM consumer_offsets WHERE topic = $1 AND partition = $2 FOR UPDATE")
        .bind(topic)
        .bind(partition)
        .execute(&mut *tx)
        .await?;
    let key: Option<Vec<u8>> = row.try_get("message_key")?;
    // Letters recorded before rules and keys were kept (no rule) are
    // checked without the key rule; a letter without a key since then had
    // none on the log.
    let legacy = row.try_get::<Option<String>, _>("rule")?.is_none();
    let message = Incoming {
        partition,
        offset: row.try_get("offset")?,
        payload: row
            .try_get::<Option<Vec<u8>>, _>("payload")?
            .unwrap_or_default()
            .into(),
        key: match key {
            None if legacy => keyed_as_its_bank(&row.try_get::<Option<Vec<u8>>, _>("payload")?),
            key => key,
        },
        timestamp: row.try_get("message_time")?,
        // A dead letter's retry is an operator's act, not the publisher's trace.
        trace: None,
        decoded: Default::default(),
    };
    let mut outcome = BatchOutcome::default();
    let (resolution, name) = if superseded(&mut tx, &message).await? {
        (Some("superseded"), "superseded")
    } else {
        match try_message(&mut tx, &message, &mut outcome).await? {
            Attempt::Applied => (Some("redriven"), "applied"),
            Attempt::Duplicate => (Some("redriven"), "duplicate"),
            Attempt::Ignored => (None, "ignored"),
            Attempt::Refused(refused) => {
                sqlx::query(
                    "UPDATE dead_letters SET rule = $2, error = $3, attempts = attempts + 1
                     WHERE id = $1",
                )
                .bind(id)
                .bind(&refused.rule)
                .bind(&refused.error)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                return Ok(Some(Redriven {
                    id,
                    partition,
                    offset: message.offset,
                    outcome: "refused",
                    error: Some(refused.error),
                }));
            }
        }
    };
    if let Some(resolution) = resolution {
        sqlx::query(
            "UPDATE dead_letters SET resolved_at = now(), resolution = $2, attempts = attempts + 1
             WHERE id = $1",
        )
        .bind(id)
        .bind(resolution)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    changed.banks.extend(outcome.banks);
    changed.currencies.extend(outcome.currencies);
    changed.reference.extend(outcome.reference);
    Ok(Some(Redriven {
        id,
        partition,
        offset: message.offset,
        outcome: name,
        error: None,
    }))
}

/// The key a letter recorded before keys were kept would have had, when
/// its payload names a bank (it was on the bank's partition).
fn keyed_as_its_bank(payload: &Option<Vec<u8>>) -> Option<Vec<u8>> {
    let payload = payload.as_deref()?;
    let value: serde_json::Value = serde_json::from_slice(payload).ok()?;
    Some(value.get("bankId")?.as_i64()?.to_string().into_bytes())
}

/// A bank's metadata change older than one already applied: applying it
/// now would undo the later one.
async fn superseded(tx: &mut sqlx::PgConnection, message: &Incoming) -> Result<bool> {
    let Ok(Decoded::Event(envelope)) = decode(&message.payload) else {
        return Ok(false);
    };
    if !matches!(
        envelope.event,
        Event::BankUpdated(_) | Event::BankDeactivated(_) | Event::BankReactivated(_)
    ) {
        return Ok(false);
    }
    let updated: Option<DateTime<Utc>> =
        sqlx::query_scalar("SELECT updated_at FROM banks WHERE id = $1")
            .bind(envelope.bank_id.get())
            .fetch_optional(&mut *tx)
            .await?;
    Ok(updated.is_some_and(|at| at > envelope.occurred_at))
}
