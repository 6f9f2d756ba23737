//! Ingest's bare baseline: the broker alone, given the very events ingest
//! published, as ingest's producer gives them (acks=all, idempotent,
//! linger 1 ms) and by 32 senders that each wait for their record's
//! acknowledgement before sending the next, as 32 publishers each wait
//! for their 202. What ingest adds on top (HTTP, checks, Postgres) is the
//! difference between the two figures; what the broker and librdkafka cost
//! on these cores is this one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ratewire_ingest::publisher::durable;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message};

use super::procs::{BROKER, TOPIC};
use crate::feed::load::Percentiles;

/// The topic the baseline writes to, beside the bench's own.
const BARE_TOPIC: &str = "ratewire.bench.bare";

/// A record as read from the bench's topic: its key and its payload.
type Record = (Vec<u8>, Vec<u8>);

/// What the bare producer measured.
pub struct Produced {
    pub per_second: f64,
    pub ack: Percentiles,
}

/// Reads up to `records` events from the start of the bench's topic, then
/// produces them again, timed, to a topic of as many partitions.
pub async fn bare_producer(records: usize, senders: usize) -> anyhow::Result<Produced> {
    let brokers = format!("127.0.0.1:{BROKER}");
    let (events, partitions) = tokio::task::spawn_blocking({
        let brokers = brokers.clone();
        move || read_events(&brokers, records)
    })
    .await??;
    if events.is_empty() {
        bail!("the bench's topic holds no events to produce again");
    }
    create_topic(&brokers, partitions).await?;

    let producer: FutureProducer = durable(
        ClientConfig::new().set("bootstrap.servers", &brokers),
        Duration::from_secs(30),
    )
    .create()
    .context("the bare producer")?;
    let events = Arc::new(events);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(senders);
    for _ in 0..senders {
        let (producer, events, next) = (producer.clone(), events.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut acks = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((key, payload)) = events.get(i) else {
                    return Ok::<_, anyhow::Error>(acks);
                };
                let sent = Instant::now();
                producer
                    .send(
                        FutureRecord::to(BARE_TOPIC).key(key).payload(payload),
                        Duration::from_secs(30),
                    )
                    .await
                    .map_err(|(e, _)| anyhow::anyhow!("a record was refused: {e}"))?;
                acks.push(sent.elapsed().as_secs_f64() * 1000.0);
            }
        }));
    }
    let mut acks = Vec::with_capacity(events.len());
    for task in tasks {
        acks.extend(task.await??);
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(Produced {
        per_second: acks.len() as f64 / seconds,
        ack: Percentiles::of(acks),
    })
}

/// The first `records` events of the bench's topic (key and payload), and
/// its partition count.
fn read_events(brokers: &str, records: usize) -> anyhow::Result<(Vec<Record>, usize)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "ratewire-bench-bare")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()?;
    let metadata = consumer.fetch_metadata(Some(TOPIC), Duration::from_secs(10))?;
    let partitions = metadata
        .topics()
        .first()
        .map(|t| t.partitions().len())
        .filter(|n| *n > 0)
        .context("the bench's topic has no partitions")?;
    let mut assignment = rdkafka::TopicPartitionList::new();
    for p in 0..partitions as i32 {
        assignment.add_partition_offset(TOPIC, p, rdkafka::Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut events = Vec::with_capacity(records);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut idle = 0;
    while events.len() < records && Instant::now() < deadline && idle < 20 {
        match consumer.poll(Duration::from_millis(250)) {
            Some(message) => {
                let message = message?;
                idle = 0;
                events.push((
                    message.key().unwrap_or_default().to_vec(),
                    message.payload().unwrap_or_default().to_vec(),
                ));
            }
            None => idle += 1,
        }
    }
    Ok((events, partitions))
}

/// The baseline's topic, made anew so that each run starts empty.
async fn create_topic(brokers: &str, partitions: usize) -> anyhow::Result<()> {
    let admin: AdminClient<_> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    // A topic left by an earlier run is deleted first; its absence is fine.
    let _ = admin.delete_topics(&[BARE_TOPIC], &options).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let topic = NewTopic::new(BARE_TOPIC, partitions as i32, TopicReplication::Fixed(1));
        let created = admin.create_topics(&[topic], &options).await?;
        match created.first() {
            Some(Ok(_)) => return Ok(()),
            // Deleting is asynchronous on the broker: creating is refused
            // for a while as "marked for deletion".
            Some(Err(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Some(Err((_, e))) => bail!("creating {BARE_TOPIC}: {e}"),
            None => bail!("creating {BARE_TOPIC}: no answer"),
        }
    }
}
