//! A board's provenance as publishers send it (docs/publishers.md): its
//! `source` and `reason` are taken, checked field by field and carried on
//! the log; a board's 202 says when it became known (the broker's
//! log-append time); and a broken source written straight onto the topic
//! is dead-lettered like any broken rule.

use std::time::Duration;

use chrono::{DateTime, Utc};
use ratewire_e2e::{ago, Board, Stack, VISIBLE_WITHIN};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::{json, Value};

/// The payloads of every message on the stack's topic, read from the start.
fn payloads_on_the_log(stack: &Stack) -> anyhow::Result<Vec<Value>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", stack.kafka_brokers())
        .set("group.id", format!("board-source-{}", uuid::Uuid::now_v7()))
        .set("enable.auto.commit", "false")
        .create()?;
    let metadata = consumer.fetch_metadata(Some(&stack.topic), Duration::from_secs(5))?;
    let mut assignment = TopicPartitionList::new();
    let mut ends = Vec::new();
    for partition in metadata.topics()[0].partitions() {
        let (_, high) =
            consumer.fetch_watermarks(&stack.topic, partition.id(), Duration::from_secs(5))?;
        assignment.add_partition_offset(&stack.topic, partition.id(), Offset::Beginning)?;
        ends.push((partition.id(), high));
    }
    consumer.assign(&assignment)?;
    let total: i64 = ends.iter().map(|(_, high)| high).sum();
    let mut payloads = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while (payloads.len() as i64) < total && std::time::Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message?;
            if let Some(bytes) = message.payload() {
                payloads.push(serde_json::from_slice(bytes)?);
            }
        }
    }
    Ok(payloads)
}

#[tokio::test]
async fn a_board_with_its_source_and_reason_is_known_at_the_brokers_time_and_on_the_log(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;

    // The topic ingest made stamps each event with the broker's time.
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", stack.kafka_brokers())
        .create()?;
    let described = admin
        .describe_configs(
            [&ResourceSpecifier::Topic(&stack.topic)],
            &AdminOptions::new(),
        )
        .await?;
    let config = described.into_iter().next().unwrap().unwrap();
    assert_eq!(
        config
            .get("message.timestamp.type")
            .and_then(|e| e.value.as_deref()),
        Some("LogAppendTime")
    );

    let sha = "AB".repeat(32);
    let before = Utc::now();
    let board = Board::at(ago(0, 1))
        .rate("USD", "155.10", "158.20")
        .source(json!({"url": "https://bank.example/rates", "method": "api",
            "capturedAt": ago(0, 1), "sha256": sha}))
        .reason("the 08:00 board read 1550 for 155.0");
    let (status, accepted) = stack.publish_board(bank, &token, &board).await?;
    assert_eq!(status, 202, "{accepted}");
    let known_at = accepted["knownAt"].as_str().expect("knownAt");
    assert_eq!(
        known_at.len(),
        "2026-11-23T08:00:01.234Z".len(),
        "{known_at}"
    );
    assert!(known_at.ends_with('Z'), "UTC: {known_at}");
    let known_at: DateTime<Utc> = known_at.parse()?;
    let slack = chrono::Duration::seconds(5);
    assert!(before - slack <= known_at && known_at <= Utc::now() + slack);
    stack.wait_board_served(bank, &board).await?;

    // A retry under one key gets the first answer whole.
    let earlier = board.clone().as_of(ago(0, 2));
    let (_, first) = stack
        .publish_keyed(bank, &token, Some("sourced"), &earlier)
        .await?;
    let (_, again) = stack
        .publish_keyed(bank, &token, Some("sourced"), &earlier)
        .await?;
    assert_eq!(first, again);
    assert!(first["knownAt"].is_string(), "{first}");

    let event = accepted["eventId"].as_str().unwrap();
    let on_log = payloads_on_the_log(&stack)?;
    let message = on_log
        .iter()
        .find(|m| m["eventId"] == event)
        .expect("the board on the log");
    assert_eq!(
        message["version"], 1,
        "an optional addition, no new version"
    );
    let payload = &message["payload"];
    assert_eq!(payload["source"]["method"], "api");
    assert_eq!(payload["source"]["url"], "https://bank.example/rates");
    assert_eq!(payload["source"]["sha256"], sha.to_ascii_lowercase());
    assert_eq!(payload["reason"], "the 08:00 board read 1550 for 155.0");
    Ok(())
}

#[tokio::test]
async fn a_bad_source_or_an_overlong_reason_is_400_naming_each_field_and_publishes_nothing(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let usd = || Board::now().rate("USD", "155.1", "158");
    let in_an_hour = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let cases: Vec<(Board, &[&str])> = vec![
        (
            usd().source(json!({"url": "https://bank.example"})),
            &["source.method"],
        ),
        (
            usd().source(json!({"method": "scrape"})),
            &["source.method"],
        ),
        (
            usd().source(json!({"method": "page", "url": "ftp://bank.example/rates"})),
            &["source.url"],
        ),
        (
            usd().source(json!({"method": "page",
                "url": format!("https://bank.example/{}", "a".repeat(2048))})),
            &["source.url"],
        ),
        (
            usd().source(json!({"method": "api", "capturedAt": "yesterday"})),
            &["source.capturedAt"],
        ),
        (
            usd().source(json!({"method": "api", "capturedAt": in_an_hour})),
            &["source.capturedAt"],
        ),
        (
            usd().source(json!({"method": "file", "sha256": "abc"})),
            &["source.sha256"],
        ),
        (
            usd().source(json!({"method": "file", "note": "x"})),
            &["source.note"],
        ),
        (usd().source(json!("scraper")), &["source"]),
        (usd().reason("x".repeat(501)), &["reason"]),
        (
            usd()
                .source(json!({"method": "scrape", "url": "ftp://x", "sha256": "z"}))
                .reason("x".repeat(501)),
            &["reason", "source.method", "source.sha256", "source.url"],
        ),
    ];
    for (board, fields) in &cases {
        let (status, body) = stack.publish_board(bank, &token, board).await?;
        assert_eq!(status, 400, "{board}: {body}");
        assert_eq!(body["message"], "Validation errors occurred.");
        let named: Vec<&String> = body["errors"].as_object().unwrap().keys().collect();
        assert_eq!(named, *fields, "{board}: {body}");
    }
    let (status, body) = stack
        .publish_board(bank, &token, usd().reason("x".repeat(501)))
        .await?;
    assert_eq!(
        (status, &body["errors"]["reason"]),
        (400, &json!(["must be at most 500 characters"]))
    );

    // Nothing was published: the bank's one board is the valid one after.
    let valid = usd().source(json!({"method": "manual"}));
    stack.push_and_wait(bank, &token, &valid).await?;
    let boards = stack
        .sql_number(&format!(
            "SELECT count(*) FROM readmodel.boards WHERE bank_id = {bank}"
        ))
        .await?;
    assert_eq!(boards, Some(1));
    Ok(())
}

/// Writes `payload` onto the stack's topic under `key`, as any Kafka client
/// could.
async fn produce(stack: &Stack, key: &str, payload: &str) -> anyhow::Result<()> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", stack.kafka_brokers())
        .create()?;
    producer
        .send(
            FutureRecord::to(&stack.topic).key(key).payload(payload),
            Duration::from_secs(5),
        )
        .await
        .map_err(|(e, _)| e)?;
    Ok(())
}

fn board_event(bank: i64, occurred_at: &str, payload: Value) -> String {
    json!({"eventId": uuid::Uuid::now_v7(), "type": "BoardPublished", "version": 1,
        "bankId": bank, "occurredAt": occurred_at, "payload": payload})
    .to_string()
}

#[tokio::test]
async fn a_broken_source_on_the_log_is_dead_lettered_and_a_good_one_applied() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let key = bank.to_string();
    let now = Utc::now().to_rfc3339();
    let usd = json!([{"currency": "USD", "cashBuying": "150", "cashSelling": "152"}]);
    for source in [
        json!({"method": "scrape"}),
        json!({"method": "api", "url": "ftp://bank.example"}),
        json!({"method": "api", "capturedAt": "9999-01-01T00:00:00Z"}),
    ] {
        let payload = json!({"asOf": ago(0, 3), "rates": usd, "source": source});
        produce(&stack, &key, &board_event(bank, &now, payload)).await?;
    }
    let payload = json!({"asOf": ago(0, 3), "rates": usd, "reason": "x".repeat(501)});
    produce(&stack, &key, &board_event(bank, &now, payload)).await?;
    // Another producer's board with a good source, and an old-style board
    // without one, are applied.
    let payload = json!({"asOf": ago(0, 2), "rates": usd,
        "source": {"method": "page", "url": "https://bank.example/rates", "robot": "v2"}});
    produce(&stack, &key, &board_event(bank, &now, payload)).await?;
    let payload = json!({"asOf": ago(0, 1), "rates": usd});
    produce(&stack, &key, &board_event(bank, &now, payload)).await?;

    // Then a board through ingest: once it is folded, so is all of the above.
    let last = Board::now().rate("USD", "160", "161");
    stack.push_and_wait(bank, &token, &last).await?;
    stack
        .wait_count(
            "the broken sources dead-lettered",
            "SELECT count(*) FROM readmodel.dead_letters WHERE rule = 'source'",
            3,
            VISIBLE_WITHIN,
        )
        .await?;
    let reasons = stack
        .sql_number("SELECT count(*) FROM readmodel.dead_letters WHERE rule = 'reason'")
        .await?;
    assert_eq!(reasons, Some(1));
    let boards = stack
        .sql_number(&format!(
            "SELECT count(*) FROM readmodel.boards WHERE bank_id = {bank}"
        ))
        .await?;
    assert_eq!(
        boards,
        Some(3),
        "the good source, the old-style board, ingest's"
    );
    stack.assert_fold_matches_replay().await?;
    Ok(())
}
