//! The banks the log knows, restored into ingest's own tables at start.
//!
//! Ingest allocates bank ids from its own sequence, but the log, not its
//! tables, is the system of record: after a fresh, replaced or restored
//! database those tables may lack banks the log has, and the sequence would
//! hand their ids out again (a new bank's boards would land on an old
//! one). So before ingest takes any change, it reads the bank events on the
//! topic from where it last read (everything, when it never has), folds
//! them as the projector does (a second registration of an id or a code
//! is ignored) onto what the log said up to there (`log_banks`), and then,
//! in one transaction, for every bank the log has:
//! - restores each bank its tables lack (metadata and active flag; not its
//!   publisher tokens, which only ever existed as hashes in the lost
//!   tables: each such bank needs a new one);
//! - brings metadata up to the log's where the tables are behind;
//! - marks a bank whose id the log gives another code as conflicting: its
//!   boards and changes are refused until the two agree again (marks are
//!   made afresh each time, so one an operator mended clears at the next
//!   start);
//! - moves the id sequence past the log's highest id;
//! - records what the log said and how far it read.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use ratewire_proto::{decode_message, Decoded, Event, Message, Schedule, SocialLink};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message as _;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use sqlx::types::Json;
use sqlx::{PgExecutor, PgPool, Postgres, Transaction};
use tracing::{error, info, warn};

use crate::error::{Error, Result};

/// A bank as the log's events have made it (and as ingest's table has it,
/// read as JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct LogBank {
    pub code: String,
    pub name: String,
    pub image_url: String,
    pub social_links: Vec<SocialLink>,
    pub active: bool,
    pub schedule: Option<Schedule>,
}

/// What the log's bank events make of the banks, in log order per bank.
#[derive(Debug, Default)]
pub struct Registry {
    pub banks: BTreeMap<i64, LogBank>,
}

impl Registry {
    /// Applies one event as the projector's fold does: an event the fold
    /// would refuse (a second registration of an id or of a code, a change
    /// to an unknown bank, a code another bank has) changes nothing.
    pub fn apply(&mut self, bank: i64, event: &Event) {
        let code_taken = |banks: &BTreeMap<i64, LogBank>, code: &str| {
            banks.iter().any(|(id, b)| *id != bank && b.code == code)
        };
        match event {
            Event::BankRegistered(e) => {
                if self.banks.contains_key(&bank) || code_taken(&self.banks, &e.code) {
                    return;
                }
                self.banks.insert(
                    bank,
                    LogBank {
                        code: e.code.clone(),
                        name: e.name.clone(),
                        image_url: e.image_url.clone(),
                        social_links: e.social_links.clone(),
                        active: true,
                        schedule: e.schedule.clone(),
                    },
                );
            }
            Event::BankUpdated(e) => {
                if e.code
                    .as_deref()
                    .is_some_and(|c| code_taken(&self.banks, c))
                {
                    return;
                }
                if let Some(b) = self.banks.get_mut(&bank) {
                    if let Some(code) = &e.code {
                        b.code.clone_from(code);
                    }
                    if let Some(name) = &e.name {
                        b.name.clone_from(name);
                    }
                    if let Some(image_url) = &e.image_url {
                        b.image_url.clone_from(image_url);
                    }
                    if let Some(links) = &e.social_links {
                        b.social_links.clone_from(links);
                    }
                    if let Some(schedule) = &e.schedule {
                        b.schedule.clone_from(schedule);
                    }
                }
            }
            Event::BankDeactivated(_) | Event::BankReactivated(_) => {
                if let Some(b) = self.banks.get_mut(&bank) {
                    b.active = matches!(event, Event::BankReactivated(_));
                }
            }
            Event::BoardPublished(_)
            | Event::BoardRetracted(_)
            | Event::ReferenceBoardPublished(_) => {}
        }
    }
}

/// What a reconciliation did.
#[derive(Debug, Default)]
pub struct Reconciled {
    /// Messages read from the log.
    pub read: u64,
    pub restored: Vec<i64>,
    pub updated: Vec<i64>,
    pub conflicts: Vec<i64>,
}

/// Reads the bank events of `topic` that ingest has not read yet, folds
/// them onto what it read before, and brings its tables in line with the
/// result (see the module docs).
pub async fn reconcile(
    pool: &PgPool,
    settings: &ClientConfig,
    topic: &str,
    wait: Duration,
) -> Result<Reconciled> {
    let started = Instant::now();
    loop {
        let positions = read_positions(pool, topic).await?;
        let mut registry = Registry::default();
        for (id, bank) in sqlx::query_as::<_, (i64, Json<LogBank>)>(
            "SELECT id, to_jsonb(log_banks) FROM log_banks",
        )
        .fetch_all(pool)
        .await?
        {
            registry.banks.insert(id, bank.0);
        }
        // Read with no transaction open: after a loss, the whole log.
        let (settings, name, from) = (settings.clone(), topic.to_owned(), positions.clone());
        let read = tokio::task::spawn_blocking(move || {
            read_bank_events(&settings, &name, &from, registry, wait)
        })
        .await
        .map_err(|e| Error::Startup(format!("reading the log's banks: {e}")))??;
        // One ingest at a time: two starting together would both restore.
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ratewire-ingest-log-registry'))")
            .execute(&mut *tx)
            .await?;
        if read_positions(&mut *tx, topic).await? != positions {
            // Another ingest recorded a later read meanwhile: start from it.
            continue;
        }
        let done = bring_in_line(&mut tx, &read).await?;
        record(&mut tx, topic, &read).await?;
        tx.commit().await?;
        info!(
            read = done.read,
            banks_in_log = read.registry.banks.len(),
            restored = done.restored.len(),
            updated = done.updated.len(),
            conflicts = done.conflicts.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "bank registry reconciled with the log"
        );
        return Ok(done);
    }
}

async fn read_positions<'e>(db: impl PgExecutor<'e>, topic: &str) -> Result<HashMap<i32, i64>> {
    Ok(
        sqlx::query_as("SELECT partition, next_offset FROM log_positions WHERE topic = $1")
            .bind(topic)
            .fetch_all(db)
            .await?
            .into_iter()
            .collect(),
    )
}

/// Brings `banks` in line with every bank the log has.
async fn bring_in_line(tx: &mut Transaction<'_, Postgres>, read: &LogRead) -> Result<Reconciled> {
    let mut done = Reconciled {
        read: read.read,
        ..Reconciled::default()
    };
    // Marks are made afresh: one an operator mended clears.
    let marked: Vec<i64> = sqlx::query_scalar(
        "UPDATE banks SET log_conflict = NULL WHERE log_conflict IS NOT NULL RETURNING id",
    )
    .fetch_all(&mut **tx)
    .await?;
    for (id, bank) in &read.registry.banks {
        let row: Option<Json<LogBank>> = sqlx::query_scalar(
            "SELECT to_jsonb(b) FROM (SELECT code, name, image_url, social_links, active,
                                             schedule
                                      FROM banks WHERE id = $1) b",
        )
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
        match row.map(|row| row.0) {
            None => {
                // The code may be held by a bank the log gave another id:
                // that one conflicts, and this one cannot be restored.
                let holder: Option<i64> =
                    sqlx::query_scalar("SELECT id FROM banks WHERE code = $1")
                        .bind(&bank.code)
                        .fetch_optional(&mut **tx)
                        .await?;
                if let Some(holder) = holder {
                    let reason = format!(
                        "the log registered code {} as bank {id}, this database as bank {holder}",
                        bank.code
                    );
                    mark_conflict(tx, holder, &reason).await?;
                    done.conflicts.push(holder);
                    continue;
                }
                sqlx::query(
                    "INSERT INTO banks (id, code, name, image_url, social_links, active, schedule)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(id)
                .bind(&bank.code)
                .bind(&bank.name)
                .bind(&bank.image_url)
                .bind(Json(&bank.social_links))
                .bind(bank.active)
                .bind(bank.schedule.as_ref().map(Json))
                .execute(&mut **tx)
                .await?;
                warn!(bank_id = id, code = bank.code,
                    "bank restored from the log; it has no publisher token: create one (ratewire-ingest tokens create)");
                done.restored.push(*id);
            }
            Some(stored) if stored.code != bank.code => {
                let reason = format!(
                    "the log has bank {id} as {}, this database as {}",
                    bank.code, stored.code
                );
                mark_conflict(tx, *id, &reason).await?;
                done.conflicts.push(*id);
            }
            Some(stored) if stored != *bank => {
                sqlx::query(
                    "UPDATE banks SET name = $2, image_url = $3, social_links = $4, active = $5,
                         schedule = $6, updated_at = now()
                     WHERE id = $1",
                )
                .bind(id)
                .bind(&bank.name)
                .bind(&bank.image_url)
                .bind(Json(&bank.social_links))
                .bind(bank.active)
                .bind(bank.schedule.as_ref().map(Json))
                .execute(&mut **tx)
                .await?;
                info!(bank_id = id, "bank brought up to the log's metadata");
                done.updated.push(*id);
            }
            Some(_) => {}
        }
    }
    for id in marked.iter().filter(|id| !done.conflicts.contains(id)) {
        info!(bank_id = id, "bank agrees with the log again");
    }
    // Past every id the log or the tables have: an id is never handed out
    // twice, even one whose registration the log refused.
    sqlx::query(
        "SELECT setval(pg_get_serial_sequence('banks', 'id'),
                GREATEST((SELECT COALESCE(max(id), 0) FROM banks), $1, 1),
                (SELECT COALESCE(max(id), 0) FROM banks) > 0 OR $1 > 0)",
    )
    .bind(read.registry.banks.keys().next_back().copied().unwrap_or(0))
    .execute(&mut **tx)
    .await?;
    Ok(done)
}

/// Keeps what the log says of each bank and how far it was read, so the
/// next start reads on from there.
async fn record(tx: &mut Transaction<'_, Postgres>, topic: &str, read: &LogRead) -> Result<()> {
    for (id, bank) in &read.registry.banks {
        sqlx::query(
            "INSERT INTO log_banks (id, code, name, image_url, social_links, active, schedule)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (id) DO UPDATE SET code = $2, name = $3, image_url = $4,
                 social_links = $5, active = $6, schedule = $7",
        )
        .bind(id)
        .bind(&bank.code)
        .bind(&bank.name)
        .bind(&bank.image_url)
        .bind(Json(&bank.social_links))
        .bind(bank.active)
        .bind(bank.schedule.as_ref().map(Json))
        .execute(&mut **tx)
        .await?;
    }
    for (partition, next) in &read.ends {
        sqlx::query(
            "INSERT INTO log_positions (topic, partition, next_offset) VALUES ($1, $2, $3)
             ON CONFLICT (topic, partition) DO UPDATE SET next_offset = GREATEST(log_positions.next_offset, $3)",
        )
        .bind(topic)
        .bind(partition)
        .bind(next)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn mark_conflict(tx: &mut Transaction<'_, Postgres>, bank: i64, reason: &str) -> Result<()> {
    sqlx::query("UPDATE banks SET log_conflict = $2 WHERE id = $1")
        .bind(bank)
        .bind(reason)
        .execute(&mut **tx)
        .await?;
    error!(bank_id = bank, reason,
        "bank conflicts with the log: its boards and changes are refused until they agree (docs/operations.md)");
    Ok(())
}

/// What a read of the log found.
struct LogRead {
    registry: Registry,
    /// Each partition's next offset after the read.
    ends: Vec<(i32, i64)>,
    /// Messages read.
    read: u64,
}

/// Reads every message of `topic` from `positions` (or the start) up to
/// the ends the partitions had when it began, folding its bank events onto
/// `registry` (what the log said up to `positions`).
fn read_bank_events(
    settings: &ClientConfig,
    topic: &str,
    positions: &HashMap<i32, i64>,
    mut registry: Registry,
    wait: Duration,
) -> Result<LogRead> {
    let unavailable = |e: rdkafka::error::KafkaError| Error::Unavailable {
        what: "broker",
        cause: e.to_string(),
    };
    let consumer: BaseConsumer = settings
        .clone()
        // Assigned partitions only: no group is joined and nothing committed.
        .set("group.id", "ratewire-ingest-registry")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .map_err(|e| Error::Startup(format!("kafka consumer: {e}")))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), wait)
        .map_err(unavailable)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    let mut assignment = TopicPartitionList::new();
    let mut ends = Vec::new();
    let mut remaining: HashMap<i32, i64> = HashMap::new();
    for partition in partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, partition, wait)
            .map_err(unavailable)?;
        let from = positions.get(&partition).copied().unwrap_or(0).max(low);
        ends.push((partition, high));
        if from < high {
            assignment
                .add_partition_offset(topic, partition, Offset::Offset(from))
                .map_err(unavailable)?;
            remaining.insert(partition, high);
        }
    }
    let mut read = 0u64;
    if remaining.is_empty() {
        return Ok(LogRead {
            registry,
            ends,
            read,
        });
    }
    consumer.assign(&assignment).map_err(unavailable)?;
    let mut quiet_since = Instant::now();
    while !remaining.is_empty() {
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            if quiet_since.elapsed() > wait {
                return Err(Error::Unavailable {
                    what: "broker",
                    cause: format!("no message from {topic} for {wait:?} while reading its banks"),
                });
            }
            continue;
        };
        quiet_since = Instant::now();
        let message = message.map_err(unavailable)?;
        let partition = message.partition();
        let Some(&end) = remaining.get(&partition) else {
            continue;
        };
        if message.offset() >= end {
            remaining.remove(&partition);
            continue;
        }
        read += 1;
        if message.offset() + 1 >= end {
            remaining.remove(&partition);
        }
        let Some(payload) = message.payload() else {
            continue;
        };
        // Boards are nearly all of the log: only their type is read.
        if !ratewire_proto::envelope::event_type(payload).is_some_and(|t| t.starts_with("Bank")) {
            continue;
        }
        let decoded = decode_message(Message {
            key: message.key(),
            payload,
            timestamp: message
                .timestamp()
                .to_millis()
                .and_then(chrono::DateTime::from_timestamp_millis),
        });
        if let Ok(Decoded::Event(envelope)) = decoded {
            registry.apply(envelope.bank_id.get(), &envelope.event);
        }
    }
    Ok(LogRead {
        registry,
        ends,
        read,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewire_proto::{BankDeactivated, BankRegistered, BankUpdated};

    fn registered(code: &str) -> Event {
        Event::BankRegistered(BankRegistered {
            code: code.into(),
            name: format!("{code} Bank"),
            image_url: "https://img.example/b.png".into(),
            social_links: Vec::new(),
            schedule: None,
        })
    }

    #[test]
    fn the_log_is_folded_as_the_projector_folds_it() {
        let mut registry = Registry::default();
        registry.apply(1, &registered("CBE"));
        registry.apply(2, &registered("AWASH"));
        // A second registration of an id, or of a code, changes nothing.
        registry.apply(1, &registered("OTHER"));
        registry.apply(3, &registered("CBE"));
        registry.apply(
            2,
            &Event::BankUpdated(BankUpdated {
                name: Some("Awash".into()),
                ..BankUpdated::default()
            }),
        );
        // A code another bank has is refused, as is a change to no bank.
        registry.apply(
            2,
            &Event::BankUpdated(BankUpdated {
                code: Some("CBE".into()),
                ..BankUpdated::default()
            }),
        );
        registry.apply(9, &Event::BankDeactivated(BankDeactivated::default()));
        registry.apply(1, &Event::BankDeactivated(BankDeactivated::default()));

        let codes: Vec<(i64, &str, &str, bool)> = registry
            .banks
            .iter()
            .map(|(id, b)| (*id, b.code.as_str(), b.name.as_str(), b.active))
            .collect();
        assert_eq!(
            codes,
            [(1, "CBE", "CBE Bank", false), (2, "AWASH", "Awash", true)]
        );
    }
}
