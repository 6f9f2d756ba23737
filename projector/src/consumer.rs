//! Reading the topic: explicit partition assignment from Postgres offsets,
//! and bounded batches.
//!
//! The fold's consumer is assigned its partitions at the offsets stored with
//! the read model, which are the authority. Which partitions those are comes
//! from the consumer group (`group`, a member beside this consumer)
//! or from `RATEWIRE_PROJECTOR_PARTITIONS` set by hand; the row lock on each
//! partition's offset (see `fold`) keeps an overlap from applying anything
//! twice.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::MaybeDone;
use ratewire_service::kafka::ClientReports;
use ratewire_service::traces::{self, TraceContext};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tokio::time::{timeout_at, Instant};

use crate::config::{Config, Partitions};
use crate::error::{Error, Result};
use crate::fold::Incoming;

/// The fold's consumer.
pub type LogConsumer = StreamConsumer<KafkaContext>;

/// The settings every Kafka client of the projector starts from: where the
/// brokers are and how to connect to them (checked at start).
pub fn client_config(config: &Config) -> ClientConfig {
    ClientConfig::from_iter(config.kafka.client_properties("ratewire-projector"))
}

/// What every Kafka client of the projector does with librdkafka's error
/// reports: brokers that refuse its credentials before it ever reached
/// them stop the process (exit 2, naming the settings). Its clones share
/// one record of having reached the brokers.
#[derive(Clone)]
pub struct KafkaContext(Arc<ClientReports>);

impl KafkaContext {
    /// A context with a record of its own, for the first of a process's
    /// clients (the others share its clones).
    pub fn new(config: &Config) -> Self {
        Self(Arc::new(ClientReports::new(&config.kafka)))
    }

    /// Records that the brokers answered this process.
    pub fn reached(&self) {
        self.0.reached();
    }
}

impl ClientContext for KafkaContext {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0
            .error(error.rdkafka_error_code().map(|c| c as i32), reason);
    }
}

impl ConsumerContext for KafkaContext {}

pub fn create(config: &Config, context: KafkaContext) -> Result<Arc<LogConsumer>> {
    let consumer: LogConsumer = client_config(config)
        // Not a member of the group (that is `group`'s consumer); librdkafka
        // wants an id for a consumer all the same.
        .set("group.id", format!("{}.fold", config.group_id))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", config.fetch_wait_ms.to_string())
        // Messages fetched ahead of the fold: about a second of folding
        // keeps the fold fed; librdkafka's larger default only holds more
        // memory on a backlog (docs/benchmarks.md, "Figures behind design
        // choices in the code").
        .set("queued.max.messages.kbytes", "16384")
        .create_with_context(context)?;
    Ok(Arc::new(consumer))
}

/// The projector's clients of the log: the fold's consumer, and the one
/// its questions about the log go on.
pub struct Log {
    pub consumer: Arc<LogConsumer>,
    pub queries: LogQueries,
}

impl Log {
    pub fn connect(config: &Config) -> Result<Self> {
        let context = KafkaContext::new(config);
        let consumer = create(config, context.clone())?;
        let queries = LogQueries::create(config, context)?;
        Ok(Self { consumer, queries })
    }
}

/// The broker's answers about the log (its partitions, their watermarks),
/// asked on a client of their own. A broker answers one request of a
/// connection at a time, so on the fold's consumer these queries would
/// wait behind its fetch, which the broker may hold for the whole fetch
/// wait while the log is quiet.
#[derive(Clone)]
pub struct LogQueries(Arc<Queries>);

struct Queries {
    settings: ClientConfig,
    context: KafkaContext,
    client: Mutex<Arc<BaseConsumer<KafkaContext>>>,
    renewed: Mutex<Option<std::time::Instant>>,
}

/// A failed question is followed by a new client at most this often.
const RENEW_AFTER: Duration = Duration::from_secs(5);

impl LogQueries {
    /// A client with `context` (the fold's, beside it). It never joins a
    /// group nor reads a partition.
    pub fn create(config: &Config, context: KafkaContext) -> Result<Self> {
        let mut settings = client_config(config);
        settings
            .set("group.id", format!("{}.queries", config.group_id))
            .set("enable.auto.commit", "false");
        let client = settings.create_with_context(context.clone())?;
        Ok(Self(Arc::new(Queries {
            settings,
            context,
            client: Mutex::new(Arc::new(client)),
            renewed: Mutex::new(None),
        })))
    }

    /// Runs `query` on a blocking thread. Polls first, so the client's error
    /// reports reach the context instead of piling up in its queue.
    async fn ask<T: Send + 'static>(
        &self,
        what: &str,
        query: impl FnOnce(&BaseConsumer<KafkaContext>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let queries = Arc::clone(&self.0);
        let answer = tokio::task::spawn_blocking(move || {
            let client = Arc::clone(&queries.client.lock().expect("queries lock"));
            while let Some(Err(e)) = client.poll(Duration::ZERO) {
                tracing::debug!(error = %e, "kafka client report");
            }
            let answer = query(&client);
            if answer.is_err() {
                // Dropped here, off the runtime: destroying a client waits
                // for its threads.
                drop(client);
                queries.renew();
            }
            answer
        })
        .await
        .map_err(|e| Error::Config(format!("{what} task failed: {e}")))??;
        self.0.context.reached();
        Ok(answer)
    }
    /// The topic's partitions that this instance owns; an error while the
    /// topic does not exist yet (the caller retries).
    pub async fn owned_partitions(&self, topic: &str, owned: &Partitions) -> Result<Vec<i32>> {
        let partitions: Vec<i32> = self
            .partitions(topic)
            .await?
            .into_iter()
            .filter(|p| owned.includes(*p))
            .collect();
        if partitions.is_empty() {
            return Err(Error::Config(format!(
                "topic {topic} has none of the configured partitions yet"
            )));
        }
        Ok(partitions)
    }

    /// Every partition of the topic, as the broker lists them now; an error
    /// while the topic does not exist.
    pub async fn partitions(&self, topic: &str) -> Result<Vec<i32>> {
        let name = topic.to_owned();
        let metadata = self
            .ask("metadata", move |c| {
                Ok(c.fetch_metadata(Some(&name), Duration::from_secs(5))?)
            })
            .await?;
        let topic_md = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .ok_or_else(|| Error::Config(format!("topic {topic} not found")))?;
        if let Some(err) = topic_md.error() {
            return Err(Error::Config(format!("topic {topic}: {err:?}")));
        }
        let mut partitions: Vec<i32> = topic_md.partitions().iter().map(|p| p.id()).collect();
        partitions.sort_unstable();
        if partitions.is_empty() {
            return Err(Error::Config(format!(
                "topic {topic} has no partitions yet"
            )));
        }
        Ok(partitions)
    }

    /// `(low, high)` watermarks of each partition: the first offset the
    /// broker still holds and the next offset it will write.
    pub async fn watermarks(
        &self,
        topic: &str,
        partitions: &[i32],
        wait: Duration,
    ) -> Result<BTreeMap<i32, (i64, i64)>> {
        let lows = self
            .ends(topic, partitions, Offset::Beginning, wait)
            .await?;
        let highs = self.highs(topic, partitions, wait).await?;
        Ok(lows
            .into_iter()
            .filter_map(|(p, low)| highs.get(&p).map(|high| (p, (low, *high))))
            .collect())
    }

    /// Each partition's high watermark, the next offset the broker will
    /// write.
    pub async fn highs(
        &self,
        topic: &str,
        partitions: &[i32],
        wait: Duration,
    ) -> Result<BTreeMap<i32, i64>> {
        self.ends(topic, partitions, Offset::End, wait).await
    }

    /// One end of each partition, all asked in one request per broker
    /// (librdkafka's watermark query asks each end of each partition
    /// apart, and the lag report asks every second).
    async fn ends(
        &self,
        topic: &str,
        partitions: &[i32],
        end: Offset,
        wait: Duration,
    ) -> Result<BTreeMap<i32, i64>> {
        if partitions.is_empty() {
            // librdkafka refuses an empty question.
            return Ok(BTreeMap::new());
        }
        let mut list = TopicPartitionList::new();
        for p in partitions {
            list.add_partition_offset(topic, *p, end)?;
        }
        self.ask("offsets", move |c| {
            // Asked as timestamps: the end markers are the protocol's
            // "earliest" and "latest".
            let answer = c.offsets_for_times(list, wait)?;
            answer
                .elements()
                .iter()
                .map(|e| {
                    e.error()?;
                    match e.offset() {
                        Offset::Offset(offset) => Ok((e.partition(), offset)),
                        other => Err(Error::Config(format!(
                            "partition {} of {}: no offset in the answer ({other:?})",
                            e.partition(),
                            e.topic()
                        ))),
                    }
                })
                .collect()
        })
        .await
    }
}

impl Queries {
    /// After a broker dies and comes back, librdkafka can keep answering a
    /// client's questions from what it knew before (a partition without a
    /// leader, requests queued for the dead node) long after the cluster
    /// has moved on, where a new client asks the live brokers. So a failed
    /// question is followed by a new client, at most every [`RENEW_AFTER`].
    fn renew(&self) {
        {
            let mut renewed = self.renewed.lock().expect("queries lock");
            if renewed.is_some_and(|at| at.elapsed() < RENEW_AFTER) {
                return;
            }
            *renewed = Some(std::time::Instant::now());
        }
        match self
            .settings
            .create_with_context::<_, BaseConsumer<KafkaContext>>(self.context.clone())
        {
            Ok(fresh) => {
                let old = std::mem::replace(
                    &mut *self.client.lock().expect("queries lock"),
                    Arc::new(fresh),
                );
                tracing::info!("asking the log's questions on a new Kafka client after a failure");
                drop(old);
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not make a new Kafka client for the log's questions")
            }
        }
    }
}

/// Starts reading each partition at its stored position.
pub fn assign(consumer: &LogConsumer, topic: &str, positions: &BTreeMap<i32, i64>) -> Result<()> {
    let mut list = TopicPartitionList::new();
    for (partition, next_offset) in positions {
        list.add_partition_offset(topic, *partition, Offset::Offset(*next_offset))?;
    }
    consumer.assign(&list)?;
    Ok(())
}

/// How large a batch may grow, and whether its records' trace contexts
/// are read.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    pub messages: usize,
    /// Payload bytes, the last message included.
    pub bytes: u64,
    /// How long to wait for more after the first.
    pub wait: Duration,
    /// Whether folds continue their records' traces: the live fold's,
    /// while traces are exported. A replay's refold of history is no
    /// board's journey, and would make a span for every traced record.
    pub traced: bool,
}

impl BatchLimits {
    pub fn of(config: &Config) -> Self {
        Self {
            messages: config.batch_max as usize,
            bytes: config.batch_bytes,
            wait: config.batch_wait(),
            traced: traces::enabled(),
        }
    }
}

/// Waits for one message, then gathers more until the batch reaches its
/// limits or their wait elapses.
pub async fn next_batch(consumer: &LogConsumer, limits: BatchLimits) -> Result<Vec<Incoming>> {
    let first = consumer.recv().await?;
    let mut batch = vec![incoming(&first, limits.traced)];
    drop(first);
    let mut bytes = batch[0].payload.len() as u64;
    let deadline = Instant::now() + limits.wait;
    while batch.len() < limits.messages && bytes < limits.bytes {
        match timeout_at(deadline, consumer.recv()).await {
            Ok(Ok(message)) => {
                let message = incoming(&message, limits.traced);
                bytes += message.payload.len() as u64;
                batch.push(message);
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "kafka error while filling a batch");
                break;
            }
            Err(_) => break,
        }
    }
    Ok(batch)
}

/// Runs `work` to its end while the receive `next` goes on beside it (and
/// keeps what it received once done): the next batch is read and decoded
/// while Postgres writes this one, instead of after it.
pub async fn alongside<T, F: Future>(
    work: impl Future<Output = T>,
    next: &mut Pin<Box<MaybeDone<F>>>,
) -> T {
    tokio::pin!(work);
    loop {
        tokio::select! {
            biased;
            done = &mut work => return done,
            () = &mut *next, if !matches!(**next, MaybeDone::Done(_)) => {}
        }
    }
}

/// The trace context a producer put in a record's headers.
fn trace_context(headers: &impl Headers) -> Option<TraceContext> {
    TraceContext::from_headers(|name| {
        let found = headers.iter().find(|h| h.key == name)?;
        std::str::from_utf8(found.value?).ok()
    })
}

/// The message, decoded now: the next batch is received while the one
/// before is written ([`alongside`]), so decoding here keeps that work out
/// of the lanes, which then only write.
fn incoming(message: &impl Message, traced: bool) -> Incoming {
    let incoming = Incoming {
        partition: message.partition(),
        offset: message.offset(),
        payload: message.payload().unwrap_or_default().into(),
        key: message.key().map(<[u8]>::to_vec),
        timestamp: message
            .timestamp()
            .to_millis()
            .and_then(chrono::DateTime::from_timestamp_millis),
        trace: traced
            .then(|| message.headers().and_then(trace_context))
            .flatten()
            .map(Arc::new),
        decoded: Default::default(),
    };
    let _ = incoming.decode();
    incoming
}
