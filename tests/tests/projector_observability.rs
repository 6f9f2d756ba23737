//! What the projector does with messages it cannot use, and what it tells
//! operators on /metrics.

use std::time::Duration;

use ratewire_e2e::{eventually, free_port, Board, Stack};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

#[tokio::test]
async fn bad_messages_are_dead_lettered_counted_and_never_stop_the_partition() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let key = stack.api_key("dead").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;

    // Two messages on the bank's partition that no build can apply: not JSON,
    // and an event version from the future.
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", stack.kafka_brokers())
        .create()?;
    let future_version = format!(
        r#"{{"eventId":"0191e0a4-1b2c-7d3e-8f40-123456789abc","type":"BoardPublished","version":99,"bankId":{bank},"occurredAt":"2026-11-23T08:00:00Z","payload":{{}}}}"#
    );
    for payload in ["not an event".to_owned(), future_version] {
        producer
            .send(
                FutureRecord::to(&stack.topic)
                    .key(&bank.to_string())
                    .payload(&payload),
                Duration::from_secs(5),
            )
            .await
            .map_err(|(e, _)| e)?;
    }

    // The partition goes on: a board after them is served.
    let board = Board::now().rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack
        .wait_served("the board after the bad messages", bank, &key, "155.1")
        .await?;

    let dead = stack
        .sql_number(
            "SELECT count(*) FROM readmodel.dead_letters WHERE error <> '' AND \"offset\" >= 0",
        )
        .await?;
    assert_eq!(dead, Some(2));

    let metrics = eventually("the gauges reported", Duration::from_secs(5), || async {
        let text = stack
            .text_at(&format!("{}/metrics", stack.projector_url))
            .await?;
        (text.contains("ratewire_projector_consumer_lag{partition=")
            && text.contains("ratewire_projector_newest_event_age_seconds")
            && text.contains("ratewire_projector_dead_letters_unresolved 2"))
        .then_some(text)
    })
    .await?;
    for expected in [
        r#"ratewire_projector_dead_letters_total{rule="envelope"} 1"#,
        r#"ratewire_projector_dead_letters_total{rule="unsupported-version"} 1"#,
        "ratewire_projector_dead_letters_unresolved 2",
        "ratewire_projector_events_applied_total",
        "ratewire_projector_newest_event_age_seconds",
        "ratewire_projector_batch_seconds_bucket",
    ] {
        assert!(metrics.contains(expected), "{expected} missing:\n{metrics}");
    }
    // Caught up: once the next lag report comes (every second), no
    // partition reports a lag.
    eventually("no partition lagging", Duration::from_secs(5), || async {
        let text = stack
            .text_at(&format!("{}/metrics", stack.projector_url))
            .await?;
        text.lines()
            .filter(|l| l.starts_with("ratewire_projector_consumer_lag{"))
            .all(|l| l.ends_with(" 0"))
            .then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_partition_no_projector_reads_shows_as_stalled_until_one_reads_it() -> anyhow::Result<()>
{
    // This projector reads partition 0 of the topic's 3; nobody reads 1 and 2.
    let mut stack = Stack::builder()
        .env("RATEWIRE_PROJECTOR_PARTITIONS", "0")
        .start()
        .await?;
    // Enough banks that some land on the partitions nobody reads.
    for i in 0..8 {
        let (bank, token) = stack
            .bank_with_token(&format!("S{i}"), &format!("Bank {i}"))
            .await?;
        let board = Board::now().rate("USD", "155.1", "158");
        assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    }
    let series = "ratewire_projector_partitions_stalled";
    stack
        .wait_metric("ratewire-projector", series, 1.0, Duration::from_secs(30))
        .await?;
    let log = std::fs::read_to_string(stack.logs.join("ratewire-projector.log"))?;
    assert!(
        log.contains("no member reads it, or its reader is stuck"),
        "the stall is not in the log"
    );
    assert!(
        stack.metric("ratewire-projector", series).await <= 2.0,
        "only the two unread partitions stall"
    );

    // Once another projector reads them, they move again.
    let other = [
        ("RATEWIRE_PROJECTOR_PARTITIONS", "1,2".to_owned()),
        (
            "RATEWIRE_PROJECTOR_LISTEN",
            format!("127.0.0.1:{}", free_port()),
        ),
    ];
    stack.start_projector_as("projector-b", &other)?;
    eventually("no partition stalled", Duration::from_secs(30), || async {
        (stack.metric("ratewire-projector", series).await == 0.0).then_some(())
    })
    .await?;
    let log = std::fs::read_to_string(stack.logs.join("ratewire-projector.log"))?;
    assert!(log.contains("a stalled partition moves again"));
    Ok(())
}
