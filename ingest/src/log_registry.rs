//! The banks the log knows, restored into ingest's own tables at start.
//!
//! Ingest allocates bank ids from its own sequence, but the log, not its
//! tables, is the system of record: after a fresh, replaced or restored
//! database those tables may lack banks the log has, and the sequence would
//! hand their ids out again (a new bank's boards would land on an old
//! one). So before ingest takes any change, it reads the bank events on the
//! topic from where it last read (everything, when it never has), folds
//! them as the projector does (a second registration of an id or a code
//! is ignored), and then, in one transaction:
//! - restores each bank its tables lack (metadata and active flag; not its
//!   publisher tokens, which only ever existed as hashes in the lost
//!   tables: each such bank needs a new one);
//! - brings metadata up to the log's where the tables are behind;
//! - marks a bank whose id the log gives another code as conflicting: its
//!   boards and changes are refused until the two agree again;
//! - moves the id sequence past the log's highest id;
//! - records how far it read.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use ratewire_proto::{decode_message, Decoded, Event, Message, SocialLink};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message as _;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use sqlx::PgPool;
use tracing::{error, info, warn};

use crate::error::{Error, Result};

/// A bank as the log's events have made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBank {
    pub code: String,
    pub name: String,
    pub image_url: String,
    pub social_links: Vec<SocialLink>,
    pub active: bool,
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
                }
            }
            Event::BankDeactivated(_) | Event::BankReactivated(_) => {
                if let Some(b) = self.banks.get_mut(&bank) {
                    b.active = matches!(event, Event::BankReactivated(_));
                }
            }
            Event::BoardPublished(_) | Event::BoardRetracted(_) => {}
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

/// Reads the bank events of `topic` that ingest has not read yet and
/// brings its tables in line with them (see the module docs).
pub async fn reconcile(
    pool: &PgPool,
    settings: &ClientConfig,
    topic: &str,
    wait: Duration,
) -> Result<Reconciled> {
    let started = Instant::now();
    let positions: HashMap<i32, i64> =
        sqlx::query_as("SELECT partition, next_offset FROM log_positions WHERE topic = $1")
            .bind(topic)
            .fetch_all(pool)
            .await?
            .into_iter()
            .collect();
    // Read with no transaction open: after a loss, the whole log.
    let (settings, name) = (settings.clone(), topic.to_owned());
    let LogRead {
        registry,
        ends,
        read,
    } = tokio::task::spawn_blocking(move || read_bank_events(&settings, &name, &positions, wait))
        .await
        .map_err(|e| Error::Startup(format!("reading the log's banks: {e}")))??;
    // One ingest at a time: two starting together would both restore. What
    // another did meanwhile only adds to the tables, which the steps below
    // take as they find them.
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('ratewire-ingest-log-registry'))")
        .execute(&mut *tx)
        .await?;
    let mut done = Reconciled {
        read,
        ..Reconciled::default()
    };
    for (id, bank) in &registry.banks {
        let row: Option<Stored> = sqlx::query_as(
            "SELECT code, name, image_url, social_links, active FROM banks WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        match row {
            None => {
                // The code may be held by a bank the log gave another id:
                // that one conflicts, and this one cannot be restored.
                let holder: Option<i64> =
                    sqlx::query_scalar("SELECT id FROM banks WHERE code = $1")
                        .bind(&bank.code)
                        .fetch_optional(&mut *tx)
                        .await?;
                if let Some(holder) = holder {
                    let reason = format!(
                        "the log registered code {} as bank {id}, this database as bank {holder}",
                        bank.code
                    );
                    mark_conflict(&mut tx, holder, &reason).await?;
                    done.conflicts.push(holder);
                    continue;
                }
                sqlx::query(
                    "INSERT INTO banks (id, code, name, image_url, social_links, active)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(id)
                .bind(&bank.code)
                .bind(&bank.name)
                .bind(&bank.image_url)
                .bind(sqlx::types::Json(&bank.social_links))
                .bind(bank.active)
                .execute(&mut *tx)
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
                mark_conflict(&mut tx, *id, &reason).await?;
                done.conflicts.push(*id);
            }
            Some(stored) => {
                let same = stored.name == bank.name
                    && stored.image_url == bank.image_url
                    && stored.social_links.0 == bank.social_links
                    && stored.active == bank.active;
                let cleared = sqlx::query(
                    "UPDATE banks SET log_conflict = NULL WHERE id = $1 AND log_conflict IS NOT NULL",
                )
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if cleared > 0 {
                    info!(bank_id = id, "bank agrees with the log again");
                }
                if !same {
                    sqlx::query(
                        "UPDATE banks SET name = $2, image_url = $3, social_links = $4, active = $5,
                             updated_at = now()
                         WHERE id = $1",
                    )
                    .bind(id)
                    .bind(&bank.name)
                    .bind(&bank.image_url)
                    .bind(sqlx::types::Json(&bank.social_links))
                    .bind(bank.active)
                    .execute(&mut *tx)
                    .await?;
                    info!(bank_id = id, "bank brought up to the log's metadata");
                    done.updated.push(*id);
                }
            }
        }
    }
    // Past every id the log or the tables have: an id is never handed out
    // twice, even one whose registration the log refused.
    sqlx::query(
        "SELECT setval(pg_get_serial_sequence('banks', 'id'),
                GREATEST((SELECT COALESCE(max(id), 0) FROM banks), $1, 1),
                (SELECT COALESCE(max(id), 0) FROM banks) > 0 OR $1 > 0)",
    )
    .bind(registry.banks.keys().next_back().copied().unwrap_or(0))
    .execute(&mut *tx)
    .await?;
    for (partition, next) in &ends {
        sqlx::query(
            "INSERT INTO log_positions (topic, partition, next_offset) VALUES ($1, $2, $3)
             ON CONFLICT (topic, partition) DO UPDATE SET next_offset = GREATEST(log_positions.next_offset, $3)",
        )
        .bind(topic)
        .bind(partition)
        .bind(next)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    info!(
        read = done.read,
        banks_in_log = registry.banks.len(),
        restored = done.restored.len(),
        updated = done.updated.len(),
        conflicts = done.conflicts.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "bank registry reconciled with the log"
    );
    Ok(done)
}

async fn mark_conflict(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    bank: i64,
    reason: &str,
) -> Result<()> {
    sqlx::query("UPDATE banks SET log_conflict = $2 WHERE id = $1")
        .bind(bank)
        .bind(reason)
        .execute(&mut **tx)
        .await?;
    error!(bank_id = bank, reason,
        "bank conflicts with the log: its boards and changes are refused until they agree (docs/operations.md)");
    Ok(())
}

/// A bank as ingest's table has it.
#[derive(sqlx::FromRow)]
struct Stored {
    code: String,
    name: String,
    image_url: String,
    social_links: sqlx::types::Json<Vec<SocialLink>>,
    active: bool,
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
/// the ends the partitions had when it began.
fn read_bank_events(
    settings: &ClientConfig,
    topic: &str,
    positions: &HashMap<i32, i64>,
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
    let mut registry = Registry::default();
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
