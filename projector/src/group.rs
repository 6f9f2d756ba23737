//! Elastic scale-out (`RATEWIRE_PROJECTOR_PARTITIONS=auto`, the default):
//! live projectors divide the topic's partitions through Kafka's consumer
//! group, run by the broker's group coordinator (the KIP-848 `consumer`
//! protocol; `classic` with cooperative-sticky assignment for brokers
//! without it), so operators see one group with its members and lag in
//! their usual tools.
//!
//! A member joins only once its fold can read (its database prepared):
//! joining takes partitions from the others at once, and a member still
//! starting would leave them unread meanwhile.
//!
//! The group decides who owns what; Postgres stays the authority on where
//! each partition is. A member of the group is a consumer of its own,
//! polled on a thread of its own, that fetches nothing (its partitions are
//! paused as they arrive): it tells the fold which partitions it may read
//! ([`Ownership::desired`]), and the fold assigns its data consumer those
//! partitions at the offsets stored with the read model. A revocation
//! blocks the member's rebalance until the fold has stopped reading the
//! partitions (it finishes the batch in flight first), so the next owner
//! starts after the last commit. Even if a member stalls past its session
//! and two fold one partition for a moment, nothing is applied twice: each
//! batch locks its partitions' stored offsets and skips what is applied.
//!
//! The fold's positions are also committed to the group, for information
//! only (lag exporters, `kafka-consumer-groups --describe`); nothing reads
//! them back. At most one commit a second (`COMMIT_EVERY`), always of the
//! latest positions, and a last one on leaving: each commit is a write to
//! the broker's offsets log, and the demo feed alone made four a second.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::config::Config;
use crate::consumer::KafkaContext;
use crate::error::Result;

/// What the fold is told to read, and what it tells back.
pub struct Ownership {
    /// The partitions this member may fold now.
    pub desired: watch::Receiver<BTreeSet<i32>>,
    /// The partitions the data consumer is assigned (set by the fold).
    pub assigned: watch::Sender<BTreeSet<i32>>,
    /// The next offset of each partition, as last committed to Postgres.
    pub positions: watch::Sender<BTreeMap<i32, i64>>,
    /// Sent once the fold can read: only then does the member join.
    pub ready: std::sync::mpsc::Sender<()>,
}

/// This process's membership of the group; dropping it does not leave:
/// [`Member::leave`] does, once the fold has stopped.
pub struct Member {
    /// The member's client id, as the group lists it.
    pub client_id: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The group's rebalance timeout (librdkafka's `max.poll.interval.ms`,
/// 300 s by default), unless `RATEWIRE_KAFKA_PROPERTIES` sets it. It is the
/// only bound on a member that never heard it must revoke: a heartbeat's
/// answer lost to a timeout (a broker paused while the group's log wrote)
/// is not sent again, and the partitions it would free stay unread until
/// the coordinator fences the member after this long.
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(20);

/// The longest a revocation waits for the fold to let go of a partition,
/// as a share of the rebalance timeout, so the member answers in time (a
/// batch retried while Postgres is away can take longer: the new owner
/// then waits on the partition's offset lock instead).
const RELEASE_SHARE: u32 = 2;

/// How often, at most, the positions are committed to the group.
const COMMIT_EVERY: Duration = Duration::from_secs(1);

struct Context {
    kafka: KafkaContext,
    /// Whether the group has assigned this member anything yet (even none).
    assigned_once: AtomicBool,
    topic: String,
    desired: watch::Sender<BTreeSet<i32>>,
    assigned: watch::Receiver<BTreeSet<i32>>,
    /// How long a revocation waits for the fold (see [`RELEASE_SHARE`]).
    release_within: Duration,
}

impl ClientContext for Context {
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.kafka.error(error, reason);
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(list) = rebalance else {
            return;
        };
        let revoked = self.partitions(list);
        if revoked.is_empty() {
            return;
        }
        let change = if consumer.assignment_lost() {
            // The session ended (a stall past the broker's session timeout):
            // another member may read them already.
            warn!(?revoked, "partitions lost with the group session");
            "lost"
        } else {
            "revoked"
        };
        metrics::counter!("ratewire_projector_partition_changes_total", "change" => change)
            .increment(revoked.len() as u64);
        self.desired
            .send_modify(|d| d.retain(|p| !revoked.contains(p)));
        metrics::gauge!("ratewire_projector_partitions_owned")
            .set(self.desired.borrow().len() as f64);
        info!(
            ?revoked,
            "the group revoked partitions; finishing the batch in flight"
        );
        let started = Instant::now();
        let mut assigned = self.assigned.clone();
        loop {
            // The fold is gone (shutting down): nothing is read any more.
            if assigned.has_changed().is_err() {
                break;
            }
            if assigned.borrow_and_update().is_disjoint(&revoked) {
                info!(?revoked, waited = ?started.elapsed(), "partitions handed back to the group");
                break;
            }
            if started.elapsed() > self.release_within {
                warn!(
                    ?revoked,
                    "the fold still reads revoked partitions; handing them back anyway"
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                let given = self.partitions(list);
                let first = !self.assigned_once.swap(true, Ordering::Relaxed);
                if given.is_empty() {
                    // Still news to a fold waiting for its first assignment.
                    if first {
                        self.desired.send_modify(|_| {});
                    }
                    return;
                }
                // The member only holds the partitions: the fold's own
                // consumer reads them from the stored offsets.
                if let Err(e) = consumer.pause(list) {
                    warn!(error = %e, "could not pause the member's partitions");
                }
                info!(partitions = ?given, "the group assigned partitions");
                metrics::counter!("ratewire_projector_partition_changes_total", "change" => "assigned")
                    .increment(given.len() as u64);
                self.desired.send_modify(|d| d.extend(given));
                metrics::gauge!("ratewire_projector_partitions_owned")
                    .set(self.desired.borrow().len() as f64);
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => warn!(error = %e, "consumer group rebalance failed"),
        }
    }
}

impl Context {
    fn partitions(&self, list: &TopicPartitionList) -> BTreeSet<i32> {
        list.elements_for_topic(&self.topic)
            .iter()
            .map(|e| e.partition())
            .collect()
    }
}

/// Joins the group: returns what the fold needs, and the membership.
pub fn join(config: &Config, kafka: KafkaContext) -> Result<(Ownership, Member)> {
    let (desired_tx, desired_rx) = watch::channel(BTreeSet::new());
    let (assigned_tx, assigned_rx) = watch::channel(BTreeSet::new());
    let (positions_tx, positions_rx) = watch::channel(BTreeMap::new());
    // The pod or machine, for operators reading the group's members.
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let client_id = format!(
        "ratewire-projector-{host}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let mut settings = crate::consumer::client_config(config);
    let classic = config.group_protocol == "classic";
    let rebalance_timeout = match settings.get("max.poll.interval.ms") {
        // An operator's value that does not parse fails `create` below.
        Some(ms) => ms.parse().map_or(REBALANCE_TIMEOUT, Duration::from_millis),
        None => {
            // librdkafka refuses a classic session longer than this.
            let timeout = match classic {
                true => REBALANCE_TIMEOUT.max(Duration::from_millis(config.session_timeout_ms)),
                false => REBALANCE_TIMEOUT,
            };
            settings.set("max.poll.interval.ms", timeout.as_millis().to_string());
            timeout
        }
    };
    let context = Context {
        kafka,
        assigned_once: AtomicBool::new(false),
        topic: config.topic.clone(),
        desired: desired_tx,
        assigned: assigned_rx,
        release_within: rebalance_timeout / RELEASE_SHARE,
    };
    settings
        .set("group.id", &config.group_id)
        .set("client.id", &client_id)
        .set("group.protocol", &config.group_protocol)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        // Paused at once; this is only where a fetch would start.
        .set("auto.offset.reset", "latest");
    if classic {
        // Incremental hand-overs, as the KIP-848 protocol makes them: a
        // rebalance moves only the partitions that change owner.
        settings
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", config.session_timeout_ms.to_string())
            .set(
                "heartbeat.interval.ms",
                (config.session_timeout_ms / 5).max(500).to_string(),
            );
    }
    let consumer: BaseConsumer<Context> = settings.create_with_context(context)?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let topic = config.topic.clone();
    let (group, protocol, id) = (
        config.group_id.clone(),
        config.group_protocol.clone(),
        client_id.clone(),
    );
    let thread = {
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("group-member".into())
            .spawn(move || {
                // Joins once the fold can read (see the module's notes).
                if !ready(&ready_rx, &stop) {
                    return;
                }
                if let Err(e) = consumer.subscribe(&[&topic]) {
                    error!(error = %e, "could not subscribe to the topic");
                    return;
                }
                info!(
                    group,
                    protocol,
                    client_id = id,
                    "joining the consumer group to share the topic's partitions"
                );
                poll(consumer, &topic, &stop, positions_rx)
            })
            .map_err(|e| crate::Error::Config(format!("starting the group member: {e}")))?
    };
    Ok((
        Ownership {
            desired: desired_rx,
            assigned: assigned_tx,
            positions: positions_tx,
            ready: ready_tx,
        },
        Member {
            client_id,
            stop,
            thread: Some(thread),
        },
    ))
}

/// Waits for the fold to be ready; false if the process stops first.
fn ready(ready: &std::sync::mpsc::Receiver<()>, stop: &AtomicBool) -> bool {
    while !stop.load(Ordering::Relaxed) {
        match ready.recv_timeout(Duration::from_millis(100)) {
            Ok(()) => return true,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return false,
        }
    }
    false
}

/// The member's thread: serves the group protocol (heartbeats and
/// rebalances run inside `poll`) and commits the fold's positions.
fn poll(
    consumer: BaseConsumer<Context>,
    topic: &str,
    stop: &AtomicBool,
    mut positions: watch::Receiver<BTreeMap<i32, i64>>,
) {
    let mut last_error: Option<Instant> = None;
    let mut last_commit: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        match consumer.poll(Duration::from_millis(100)) {
            // Fetched before its partition was paused: the fold reads it.
            Some(Ok(_)) | None => {}
            Some(Err(e)) => {
                if last_error.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                    warn!(error = %e, "consumer group member: kafka error");
                    last_error = Some(Instant::now());
                }
            }
        }
        let due = last_commit.is_none_or(|at| at.elapsed() >= COMMIT_EVERY);
        if due && positions.has_changed().unwrap_or(false) {
            let latest = positions.borrow_and_update().clone();
            commit(&consumer, topic, &latest);
            last_commit = Some(Instant::now());
        }
    }
    // Closing the consumer waits for this commit.
    if positions.has_changed().unwrap_or(false) {
        let latest = positions.borrow_and_update().clone();
        commit(&consumer, topic, &latest);
    }
    // Dropping the consumer leaves the group (its partitions are revoked
    // here first, at once: the fold has stopped).
    drop(consumer);
    info!("left the consumer group");
}

/// Commits the positions of the partitions this member holds now.
fn commit(consumer: &BaseConsumer<Context>, topic: &str, positions: &BTreeMap<i32, i64>) {
    let Ok(held) = consumer.assignment() else {
        return;
    };
    let mut list = TopicPartitionList::new();
    for element in held.elements_for_topic(topic) {
        if let Some(next) = positions.get(&element.partition()) {
            let _ = list.add_partition_offset(topic, element.partition(), Offset::Offset(*next));
        }
    }
    if list.count() == 0 {
        return;
    }
    if let Err(e) = consumer.commit(&list, CommitMode::Async) {
        debug!(error = %e, "committing positions to the group failed; they are informational");
    }
}

impl Member {
    /// Leaves the group, handing every partition over at once; call it after
    /// the fold has stopped.
    pub async fn leave(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let left = tokio::task::spawn_blocking(move || thread.join());
            if tokio::time::timeout(Duration::from_secs(10), left)
                .await
                .is_err()
            {
                warn!("leaving the consumer group timed out; the broker ends the session");
            }
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
