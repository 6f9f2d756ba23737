//! What the projector does with messages it cannot use, and what it tells
//! operators on /metrics.

use std::time::Duration;

use ratewire_e2e::{eventually, Board, Stack};
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
    // Caught up: no partition reports a lag.
    let lagging: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("ratewire_projector_consumer_lag{") && !l.ends_with(" 0"))
        .collect();
    assert!(lagging.is_empty(), "{lagging:?}");
    Ok(())
}
