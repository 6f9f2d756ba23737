//! The topic against a real broker (`RATEWIRE_TEST_KAFKA_BROKERS`, which
//! `deploy/stack test` sets): every event's known-at time is the broker's
//! log-append time, so a topic ingest creates stamps messages so, an
//! existing one stamped by producers is changed (keeping its own
//! settings) when ingest manages topics, and left alone when it does not.

use std::time::Duration;

use chrono::Utc;
use clap::Parser;
use ratewire_ingest::publisher::Publisher;
use ratewire_ingest::Config;
use ratewire_proto::{BankId, BankRegistered, Envelope, Event};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

fn brokers() -> String {
    std::env::var("RATEWIRE_TEST_KAFKA_BROKERS")
        .expect("RATEWIRE_TEST_KAFKA_BROKERS names the test broker (deploy/stack test sets it)")
}

/// Ingest's settings for a topic of the test's own.
fn config(topic: &str, create_topic: bool) -> Config {
    Args::parse_from([
        "ratewire-ingest",
        "--kafka-brokers",
        &brokers(),
        "--topic",
        topic,
        "--create-topic",
        &create_topic.to_string(),
        "--topic-partitions",
        "1",
    ])
    .config
}

fn admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .expect("an admin client")
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))
}

/// The topic's settings that matter here.
async fn setting(topic: &str, name: &str) -> Option<String> {
    let described = admin()
        .describe_configs([&ResourceSpecifier::Topic(topic)], &options())
        .await
        .expect("the broker describes topics");
    let resource = described.into_iter().next()?.expect("the topic exists");
    resource.get(name).and_then(|entry| entry.value.clone())
}

/// A topic of the test's own, deleted when the test ends.
struct Topic(String);

impl Topic {
    fn new(what: &str) -> Self {
        Topic(format!(
            "rw-ingest-{what}-{}",
            uuid::Uuid::now_v7().simple()
        ))
    }
}

impl Drop for Topic {
    fn drop(&mut self) {
        let name = self.0.clone();
        // A blocking runtime of its own: the test's is shutting down.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let _ = runtime.block_on(admin().delete_topics(&[&name], &options()));
        })
        .join();
    }
}

/// Creates `topic` as another tool would: producers' timestamps, and a
/// setting of its own that must survive.
async fn created_elsewhere(topic: &str) {
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(1))
        .set("message.timestamp.type", "CreateTime")
        .set("retention.ms", "-1")
        .set("max.message.bytes", "2000000");
    let results = admin().create_topics([&new], &options()).await.unwrap();
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}

#[tokio::test]
async fn a_topic_ingest_creates_stamps_each_event_with_the_brokers_append_time() {
    let topic = Topic::new("created");
    let config = config(&topic.0, true);
    let publisher = Publisher::new(&config).unwrap();
    publisher.ensure_topic(&config).await.unwrap();
    assert_eq!(
        setting(&topic.0, "message.timestamp.type").await.as_deref(),
        Some("LogAppendTime")
    );
    assert_eq!(
        setting(&topic.0, "retention.ms").await.as_deref(),
        Some("-1")
    );

    // The acknowledgement carries the broker's time: the event's known-at.
    let before = Utc::now() - chrono::Duration::seconds(5);
    let registered = Event::BankRegistered(BankRegistered {
        code: "CBE".into(),
        name: "Commercial Bank of Ethiopia".into(),
        image_url: "https://img.example/cbe.png".into(),
        social_links: vec![],
        schedule: None,
    });
    let envelope = Envelope::new(BankId::new(1).unwrap(), Utc::now(), registered);
    let acknowledged = publisher.publish(&envelope).await.unwrap();
    let known_at = acknowledged.known_at.expect("a log-append time");
    let after = Utc::now() + chrono::Duration::seconds(5);
    assert!(before <= known_at && known_at <= after, "{known_at}");
}

#[tokio::test]
async fn an_existing_topic_stamped_by_producers_is_changed_keeping_its_own_settings() {
    let topic = Topic::new("existing");
    created_elsewhere(&topic.0).await;
    let config = config(&topic.0, true);
    let publisher = Publisher::new(&config).unwrap();
    publisher.ensure_topic(&config).await.unwrap();
    assert_eq!(
        setting(&topic.0, "message.timestamp.type").await.as_deref(),
        Some("LogAppendTime")
    );
    assert_eq!(
        setting(&topic.0, "retention.ms").await.as_deref(),
        Some("-1")
    );
    assert_eq!(
        setting(&topic.0, "max.message.bytes").await.as_deref(),
        Some("2000000")
    );
    // Once set, starting again changes nothing.
    publisher.ensure_topic(&config).await.unwrap();
}

#[tokio::test]
async fn a_topic_ingest_may_not_manage_is_left_as_it_is() {
    let topic = Topic::new("unmanaged");
    created_elsewhere(&topic.0).await;
    let config = config(&topic.0, false);
    let publisher = Publisher::new(&config).unwrap();
    // It warns, and goes on.
    publisher.check_timestamp_type(&config).await.unwrap();
    assert_eq!(
        setting(&topic.0, "message.timestamp.type").await.as_deref(),
        Some("CreateTime")
    );
    let envelope = Envelope::new(
        BankId::new(1).unwrap(),
        Utc::now(),
        Event::BankReactivated(Default::default()),
    );
    let acknowledged = publisher.publish(&envelope).await.unwrap();
    assert_eq!(
        acknowledged.known_at, None,
        "the producer's time is no known-at"
    );
}
