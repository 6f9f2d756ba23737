//! Puts events on the log. A publish returns only when the broker has
//! acknowledged the event with acks=all, so a 202 always means "durable".
//!
//! The topic stamps each message with the broker's log-append time
//! (`message.timestamp.type=LogAppendTime`): that is an event's known-at
//! time, kept on the log itself, so a replay or a rebuild finds the same
//! one. Ingest creates the topic so, and sets an existing topic so when it
//! may manage topics; otherwise it warns.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use ratewire_proto::{encode, partition_key, Envelope};
use ratewire_service::kafka::ClientReports;
use ratewire_service::traces::{TraceContext, TRACEPARENT, TRACESTATE};
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigSource, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, Timestamp};
use tracing::{info, instrument, warn};

use crate::appended::Appended;
use crate::config::Config;
use crate::error::{Error, Result};

/// Ingest's producer.
type EventProducer = FutureProducer<KafkaContext>;

/// What every Kafka client of ingest does with librdkafka's error reports:
/// brokers that refuse its credentials before it ever reached them stop
/// the process (exit 2, naming the settings).
#[derive(Clone)]
pub struct KafkaContext(Arc<ClientReports>);

impl ClientContext for KafkaContext {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0
            .error(error.rdkafka_error_code().map(|c| c as i32), reason);
    }
}

/// A record's W3C trace context headers, named as in HTTP.
fn trace_headers(trace: &TraceContext) -> OwnedHeaders {
    let headers = OwnedHeaders::new_with_capacity(2).insert(Header {
        key: TRACEPARENT,
        value: Some(&trace.traceparent),
    });
    match &trace.tracestate {
        Some(state) => headers.insert(Header {
            key: TRACESTATE,
            value: Some(state),
        }),
        None => headers,
    }
}

/// Where the brokers are and how to connect to them (checked at start).
fn client_config(config: &Config) -> ClientConfig {
    ClientConfig::from_iter(config.kafka.client_properties("ratewire-ingest"))
}

/// The producer settings a 202 rests on (the bench's bare baseline produces
/// with them too, so that it measures the same durability).
pub fn durable(settings: &mut ClientConfig, timeout: Duration) -> &mut ClientConfig {
    settings
        .set("acks", "all")
        // Broker-side de-duplication of librdkafka's own retries, and
        // per-partition order kept across them.
        .set("enable.idempotence", "true")
        // A message not acknowledged within the timeout fails instead of
        // waiting in the queue; the publisher gets 503 and may retry.
        .set("message.timeout.ms", timeout.as_millis().to_string())
        .set("linger.ms", "1")
}

#[derive(Clone)]
pub struct Publisher {
    settings: Arc<ClientConfig>,
    context: KafkaContext,
    /// Replaced after a fatal producer error (see [`Publisher::renew_if_fatal`]).
    producer: Arc<RwLock<EventProducer>>,
    topic: Arc<str>,
    timeout: Duration,
    /// Told of every acknowledged event (see [`Publisher::announcing`]).
    appended: Option<Appended>,
}

/// The topic setting that makes a message's timestamp the broker's, and
/// the value that does.
const TIMESTAMP_TYPE: &str = "message.timestamp.type";
const LOG_APPEND_TIME: &str = "LogAppendTime";

/// Where an acknowledged event landed.
#[derive(Debug, Clone, Copy)]
pub struct Acknowledged {
    pub partition: i32,
    pub offset: i64,
    /// The broker's log-append time of the event, when the topic stamps
    /// messages so (its known-at time, to the millisecond).
    pub known_at: Option<DateTime<Utc>>,
}

impl Publisher {
    /// The client settings (brokers, security) for ingest's other clients.
    pub fn settings(&self) -> &ClientConfig {
        &self.settings
    }

    pub fn new(config: &Config) -> Result<Self> {
        let timeout = config.publish_timeout();
        let mut settings = client_config(config);
        durable(&mut settings, timeout);
        let context = KafkaContext(Arc::new(ClientReports::new(&config.kafka)));
        let producer = create_producer(&settings, &context)?;
        Ok(Self {
            settings: Arc::new(settings),
            context,
            producer: Arc::new(RwLock::new(producer)),
            topic: config.topic.as_str().into(),
            timeout,
            appended: None,
        })
    }

    /// Says on `pool`'s database after each acknowledged event that the log
    /// has new events (see [`crate::appended`]).
    pub fn announcing(mut self, pool: sqlx::PgPool) -> Self {
        self.appended = Some(Appended::spawn(pool, &self.topic));
        self
    }

    fn current(&self) -> EventProducer {
        self.producer.read().expect("producer lock").clone()
    }

    /// An idempotent producer that hit a fatal error (fenced after a broker
    /// hang, lost sequence state) refuses every later message; librdkafka's
    /// answer is a new producer instance, which gets a new producer id.
    fn renew_if_fatal(&self, failed: &EventProducer, error: Option<&KafkaError>) {
        // Fencing and lost sequence state come back as per-message errors on
        // some brokers rather than as librdkafka's fatal error; both mean
        // this producer id is finished.
        let fenced = error
            .and_then(KafkaError::rdkafka_error_code)
            .filter(|code| {
                matches!(
                    code,
                    RDKafkaErrorCode::ProducerFenced
                        | RDKafkaErrorCode::InvalidProducerEpoch
                        | RDKafkaErrorCode::OutOfOrderSequenceNumber
                        | RDKafkaErrorCode::UnknownProducerId
                        | RDKafkaErrorCode::InvalidProducerIdMapping
                )
            });
        let fatal = failed
            .client()
            .fatal_error()
            .or(fenced.map(|code| (code, code.to_string())));
        let Some((code, reason)) = fatal else {
            return;
        };
        let mut current = self.producer.write().expect("producer lock");
        // Another request may have renewed it already.
        if current.client().native_ptr() != failed.client().native_ptr() {
            return;
        }
        match create_producer(&self.settings, &self.context) {
            Ok(fresh) => {
                tracing::error!(
                    ?code,
                    reason,
                    "kafka producer hit a fatal error; replaced it"
                );
                *current = fresh;
            }
            Err(e) => {
                tracing::error!(error = %e, "kafka producer hit a fatal error and could not be replaced")
            }
        }
    }

    #[instrument(skip_all, fields(event_id = %envelope.event_id, bank_id = %envelope.bank_id, event = envelope.event.type_name()))]
    pub async fn publish(&self, envelope: &Envelope) -> Result<Acknowledged> {
        let payload = encode(envelope);
        let key = partition_key(envelope.bank_id);
        let mut record = FutureRecord::to(&self.topic).key(&key).payload(&payload);
        // The trace goes on in the projector's fold of this record.
        if let Some(trace) = TraceContext::of(&tracing::Span::current()) {
            record = record.headers(trace_headers(&trace));
        }
        // librdkafka checks its own message timeout only between reconnect
        // attempts, so with the broker gone it fires seconds late; this
        // deadline is what bounds the publisher's wait. A message still
        // queued when it passes may yet be delivered: the publisher got 503
        // and, retrying with its Idempotency-Key, re-sends the same event id,
        // which the projector applies once.
        let producer = self.current();
        let started = std::time::Instant::now();
        let delivery = producer.send(record, Timeout::After(self.timeout));
        let outcome = tokio::time::timeout(self.timeout, delivery).await;
        let result = match &outcome {
            Ok(Ok(_)) => "acknowledged",
            Ok(Err(_)) => "failed",
            Err(_) => "timed_out",
        };
        metrics::counter!("ratewire_ingest_publish_total", "result" => result).increment(1);
        metrics::histogram!("ratewire_ingest_publish_seconds", "result" => result)
            .record(started.elapsed().as_secs_f64());
        match &outcome {
            Ok(Ok(_)) => {}
            Ok(Err((e, _))) => self.renew_if_fatal(&producer, Some(e)),
            Err(_) => self.renew_if_fatal(&producer, None),
        }
        match outcome {
            Ok(Ok(delivery)) => {
                if let Some(appended) = &self.appended {
                    appended.ring();
                }
                tracing::debug!(
                    partition = delivery.partition,
                    offset = delivery.offset,
                    "acknowledged"
                );
                let known_at = match delivery.timestamp {
                    Timestamp::LogAppendTime(ms) => DateTime::from_timestamp_millis(ms),
                    _ => None,
                };
                Ok(Acknowledged {
                    partition: delivery.partition,
                    offset: delivery.offset,
                    known_at,
                })
            }
            Ok(Err((e, _))) => Err(Error::Unavailable {
                what: "broker",
                cause: e.to_string(),
            }),
            Err(_) => Err(Error::Unavailable {
                what: "broker",
                cause: format!("no acknowledgement within {} ms", self.timeout.as_millis()),
            }),
        }
    }

    /// True when the broker answers a metadata request.
    pub async fn reachable(&self) -> bool {
        let producer = self.current();
        let topic = self.topic.clone();
        let reached = tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_metadata(Some(&topic), Duration::from_secs(1))
                .is_ok()
        })
        .await
        .unwrap_or(false);
        if reached {
            self.context.0.reached();
        }
        reached
    }

    /// Waits up to `timeout` for queued messages to be delivered (shutdown).
    pub fn flush(&self, timeout: Duration) {
        if let Err(e) = self.current().flush(Timeout::After(timeout)) {
            tracing::warn!(error = %e, "producer flush did not complete");
        }
    }
}

impl Publisher {
    /// An admin client. It serves no error reports of its own: this
    /// publisher's producer does, so brokers that refuse the credentials
    /// stop the process here too.
    fn admin(&self, config: &Config) -> Result<AdminClient<KafkaContext>> {
        client_config(config)
            .create_with_context(self.context.clone())
            .map_err(|e| Error::Startup(format!("kafka admin client: {e}")))
    }

    /// Creates the topic unless it exists, stamping messages with the
    /// broker's log-append time; a topic that exists and stamps them with
    /// the producer's time is changed to.
    pub async fn ensure_topic(&self, config: &Config) -> Result<()> {
        let admin = self.admin(config)?;
        // Asking to create a topic that exists makes the broker log an
        // error; look first. Every topic is listed, as a request naming a
        // missing one may create it with the broker's defaults.
        let admin = std::sync::Arc::new(admin);
        let listing = std::sync::Arc::clone(&admin);
        let exists = tokio::task::spawn_blocking(move || {
            listing
                .inner()
                .fetch_metadata(None, Duration::from_secs(10))
        })
        .await
        .map_err(|e| Error::Startup(format!("topic listing task: {e}")))?
        .map_err(|e| unavailable_broker(&e))?
        .topics()
        .iter()
        .any(|t| t.name() == config.topic && t.error().is_none() && !t.partitions().is_empty());
        if exists {
            return keep_log_append_time(&admin, &config.topic).await;
        }
        // The log is the system of record (replays start at offset zero), so a
        // topic made here keeps its events forever whatever the broker's default.
        let min_insync = config.min_insync_replicas().to_string();
        let topic = NewTopic::new(
            &config.topic,
            config.topic_partitions,
            TopicReplication::Fixed(config.topic_replication),
        )
        .set("retention.ms", "-1")
        .set("retention.bytes", "-1")
        // acks=all waits for the in-sync replicas; without a floor, a topic
        // whose followers fell behind would acknowledge on its leader alone.
        .set("min.insync.replicas", &min_insync)
        // Each event's known-at time is the broker's, on the log.
        .set(TIMESTAMP_TYPE, LOG_APPEND_TIME);
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let results = admin
            .create_topics([&topic], &options)
            .await
            .map_err(|e| unavailable_broker(&e))?;
        for result in results {
            match result {
                Ok(name) => info!(
                    topic = name,
                    partitions = config.topic_partitions,
                    "topic created"
                ),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => {
                    return Err(Error::Unavailable {
                        what: "broker",
                        cause: format!("creating topic {name}: {code}"),
                    })
                }
            }
        }
        Ok(())
    }

    /// For a topic ingest does not manage: warns when it stamps messages
    /// with the producer's time (known-at times then come from the
    /// producers' clocks). Not being allowed to look is no reason to stop.
    pub async fn check_timestamp_type(&self, config: &Config) -> Result<()> {
        let admin = self.admin(config)?;
        match topic_config(&admin, &config.topic).await {
            Ok(Some(entries)) => {
                let kind = timestamp_type(&entries);
                if kind != Some(LOG_APPEND_TIME) {
                    warn!(
                        topic = config.topic,
                        timestamp_type = kind.unwrap_or("unknown"),
                        "the topic does not stamp messages with the broker's log-append time: events' known-at times are their producers' clocks; set message.timestamp.type=LogAppendTime (docs/operations.md)"
                    );
                }
            }
            Ok(None) => {}
            Err(e) => {
                warn!(topic = config.topic, error = %e, "could not read the topic's timestamp type")
            }
        }
        Ok(())
    }
}

/// A topic's configuration entries, `None` when the broker does not
/// describe it.
async fn topic_config(
    admin: &AdminClient<KafkaContext>,
    topic: &str,
) -> Result<Option<Vec<rdkafka::admin::ConfigEntry>>> {
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let results = admin
        .describe_configs([&ResourceSpecifier::Topic(topic)], &options)
        .await
        .map_err(|e| unavailable_broker(&e))?;
    match results.into_iter().next() {
        Some(Ok(resource)) => Ok(Some(resource.entries)),
        Some(Err(code)) => Err(Error::Unavailable {
            what: "broker",
            cause: format!("describing topic {topic}: {code}"),
        }),
        None => Ok(None),
    }
}

fn timestamp_type(entries: &[rdkafka::admin::ConfigEntry]) -> Option<&str> {
    entries
        .iter()
        .find(|e| e.name == TIMESTAMP_TYPE)
        .and_then(|e| e.value.as_deref())
}

/// Sets an existing topic to stamp messages with the broker's log-append
/// time, unless it does. librdkafka's client here offers only the
/// AlterConfigs request, which replaces every setting of the topic: the
/// topic's own settings are read first and sent back with the change, so
/// none is lost (a concurrent change by another client in between would
/// be; this runs once, at start).
async fn keep_log_append_time(admin: &AdminClient<KafkaContext>, topic: &str) -> Result<()> {
    let Some(entries) = topic_config(admin, topic).await? else {
        return Ok(());
    };
    let was = timestamp_type(&entries).unwrap_or("unknown").to_owned();
    if was == LOG_APPEND_TIME {
        return Ok(());
    }
    let own: Vec<&rdkafka::admin::ConfigEntry> = entries
        .iter()
        .filter(|e| e.source == ConfigSource::DynamicTopic && e.name != TIMESTAMP_TYPE)
        .collect();
    if own.iter().any(|e| e.is_sensitive || e.value.is_none()) {
        warn!(
            topic,
            timestamp_type = was,
            "the topic does not stamp messages with the broker's log-append time, and has settings that cannot be read back to keep them; set message.timestamp.type=LogAppendTime (docs/operations.md)"
        );
        return Ok(());
    }
    let mut change = AlterConfig::new(ResourceSpecifier::Topic(topic));
    for entry in &own {
        if let Some(value) = &entry.value {
            change = change.set(&entry.name, value);
        }
    }
    change = change.set(TIMESTAMP_TYPE, LOG_APPEND_TIME);
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let results = admin
        .alter_configs([&change], &options)
        .await
        .map_err(|e| unavailable_broker(&e))?;
    for result in results {
        if let Err((_, code)) = result {
            return Err(Error::Unavailable {
                what: "broker",
                cause: format!("setting {TIMESTAMP_TYPE} of topic {topic}: {code}"),
            });
        }
    }
    info!(
        topic,
        was,
        "the topic now stamps messages with the broker's log-append time (each event's known-at time)"
    );
    Ok(())
}

fn unavailable_broker(e: &KafkaError) -> Error {
    Error::Unavailable {
        what: "broker",
        cause: e.to_string(),
    }
}

fn create_producer(settings: &ClientConfig, context: &KafkaContext) -> Result<EventProducer> {
    settings
        .create_with_context(context.clone())
        .map_err(|e| Error::Startup(format!("kafka producer: {e}")))
}
