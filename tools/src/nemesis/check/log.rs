//! The check that reads the topic itself.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use ratewire_proto::envelope::{decode, Decoded};
use ratewire_proto::event::Event;

use super::{Violations, DURABLE};
use crate::nemesis::publish::Board;

/// The topic holds each accepted board's event, in the order accepted,
/// and no board event of these banks that was never accepted. A push sent
/// again (by its publisher or the balancer) after its first send went
/// unanswered may write its one event id twice, even after later boards:
/// the first send's message can still reach the broker. The fold applies
/// each id once, so order is judged by each id's first place. Returns how
/// many such second copies the log holds.
pub async fn check_log(
    bootstrap: &str,
    topic: &str,
    boards: &BTreeMap<i64, Vec<(Board, String)>>,
    violations: &mut Violations,
) -> anyhow::Result<usize> {
    let (bootstrap, topic_name) = (bootstrap.to_owned(), topic.to_owned());
    let logged: BTreeMap<i64, Vec<String>> =
        tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", "ratewire-nemesis-checker")
                .set("enable.auto.commit", "false")
                .set("log_level", "3")
                .create()?;
            let metadata = consumer.fetch_metadata(Some(&topic_name), Duration::from_secs(20))?;
            let partitions: Vec<i32> = metadata.topics()[0]
                .partitions()
                .iter()
                .map(|p| p.id())
                .collect();
            let mut assignment = TopicPartitionList::new();
            let mut ends = HashMap::new();
            for p in &partitions {
                let (_, high) =
                    consumer.fetch_watermarks(&topic_name, *p, Duration::from_secs(20))?;
                ends.insert(*p, high);
                assignment.add_partition_offset(&topic_name, *p, Offset::Beginning)?;
            }
            consumer.assign(&assignment)?;
            let mut logged: BTreeMap<i64, Vec<String>> = BTreeMap::new();
            let mut done: BTreeSet<i32> = ends
                .iter()
                .filter(|(_, end)| **end == 0)
                .map(|(p, _)| *p)
                .collect();
            let deadline = Instant::now() + Duration::from_secs(120);
            while done.len() < partitions.len() {
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "reading the topic took over 2 minutes"
                );
                let Some(message) = consumer.poll(Duration::from_secs(1)) else {
                    continue;
                };
                let message = message?;
                if message.offset() + 1 >= ends[&message.partition()] {
                    done.insert(message.partition());
                }
                if let Some(Ok(Decoded::Event(envelope))) = message.payload().map(decode) {
                    if let Event::BoardPublished(_) = envelope.event {
                        logged
                            .entry(envelope.bank_id.get())
                            .or_default()
                            .push(envelope.event_id.to_string());
                    }
                }
            }
            Ok(logged)
        })
        .await??;
    let mut copies = 0;
    for (bank, list) in boards {
        let mut seen = BTreeSet::new();
        let mut on_log = logged.get(bank).cloned().unwrap_or_default();
        let all = on_log.len();
        on_log.retain(|id| seen.insert(id.clone()));
        copies += all - on_log.len();
        let sent: Vec<String> = list.iter().map(|(_, id)| id.clone()).collect();
        if on_log != sent {
            let missing = sent.iter().filter(|id| !on_log.contains(id)).count();
            let unknown = on_log.iter().filter(|id| !sent.contains(id)).count();
            violations.add(
                DURABLE,
                format!("bank {bank}: {} accepted, {} on the log ({missing} accepted and missing, {unknown} never accepted, or out of order)", sent.len(), on_log.len()),
            );
        }
    }
    Ok(copies)
}
