//! A quiet log is not fetched: the projector pauses its reads (with
//! `RATEWIRE_PROJECTOR_IDLE_AFTER_MS=10`, for brokers that hold every fetch
//! for its full wait) and reads again when
//! ingest says the log has new events, or when its lag report shows events
//! that came without a notice.

use std::time::Duration;

use ratewire_e2e::{eventually, sample, Board, Stack, StackBuilder};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

fn idle_after_10_ms() -> StackBuilder {
    Stack::builder().env("RATEWIRE_PROJECTOR_IDLE_AFTER_MS", "10")
}

/// The sample of `series` on the projector's /metrics (0 when absent).
async fn metric(stack: &Stack, series: &str) -> f64 {
    let text = stack
        .text_at(&format!("{}/metrics", stack.projector_url))
        .await
        .unwrap_or_default();
    sample(&text, series)
}

const NOTICE: &str = r#"ratewire_projector_reads_resumed_total{cause="notice"}"#;
const LAG: &str = r#"ratewire_projector_reads_resumed_total{cause="lag"}"#;
const ASSIGNMENT: &str = r#"ratewire_projector_reads_resumed_total{cause="assignment"}"#;

/// Waits until reads are paused and stay paused for half a second (no
/// notice or lag report still on its way from earlier events); returns the
/// resume counters then: (notice, lag and assignment).
async fn settled(stack: &Stack, what: &str) -> anyhow::Result<(f64, f64)> {
    eventually(what, Duration::from_secs(15), || async {
        let counts = (
            metric(stack, NOTICE).await,
            metric(stack, LAG).await + metric(stack, ASSIGNMENT).await,
        );
        if metric(stack, "ratewire_projector_reads_paused").await != 1.0 {
            return None;
        }
        // A window, not a wait for a result: nothing marks a notice or a
        // lag report still on its way, so reads must stay paused through
        // one for the counters to be the ones before the next push.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let still = metric(stack, "ratewire_projector_reads_paused").await == 1.0
            && (
                metric(stack, NOTICE).await,
                metric(stack, LAG).await + metric(stack, ASSIGNMENT).await,
            ) == counts;
        still.then_some(counts)
    })
    .await
}

#[tokio::test]
async fn a_push_to_a_quiet_log_is_read_on_ingest_s_notice() -> anyhow::Result<()> {
    let stack = idle_after_10_ms().start().await?;
    let key = stack.api_key("quiet").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let board = |rate: &str| Board::now().rate("USD", rate, 158);

    for (round, rate) in ["155.1", "155.2", "155.3"].into_iter().enumerate() {
        let (notices, _) = settled(&stack, "reads paused on the quiet log").await?;
        assert_eq!(stack.publish_board(bank, &token, board(rate)).await?.0, 202);
        stack
            .wait_served(&format!("board {round} after a pause"), bank, &key, rate)
            .await?;
        let after = metric(&stack, NOTICE).await;
        assert!(
            after > notices,
            "round {round}: read again without ingest's notice"
        );
    }
    Ok(())
}

#[tokio::test]
async fn events_without_a_notice_are_read_when_the_lag_report_shows_them() -> anyhow::Result<()> {
    let stack = idle_after_10_ms().start().await?;
    let (bank, _token) = stack.bank_with_token("CBE", "CBE").await?;
    eventually("the bank registered", Duration::from_secs(10), || async {
        let banks = stack
            .sql_number("SELECT count(*) FROM readmodel.banks")
            .await;
        (banks.ok().flatten() == Some(1)).then_some(())
    })
    .await?;
    let (notices, lags) = settled(&stack, "reads paused on the quiet log").await?;

    // Straight to the topic, as another producer would: no notice. A message
    // no build can apply, so that its effect (a dead letter) is easy to see.
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", stack.kafka_brokers())
        .create()?;
    producer
        .send(
            FutureRecord::to(&stack.topic)
                .key(&bank.to_string())
                .payload("not an event"),
            Duration::from_secs(5),
        )
        .await
        .map_err(|(e, _)| e)?;

    eventually(
        "the message read and dead-lettered",
        Duration::from_secs(15),
        || async {
            let dead = stack
                .sql_number("SELECT count(*) FROM readmodel.dead_letters")
                .await;
            (dead.ok().flatten() == Some(1)).then_some(())
        },
    )
    .await?;
    // Read again by the lag report (or, as rarely happens, by a new
    // assignment of the partitions), never by a notice.
    let later = metric(&stack, LAG).await + metric(&stack, ASSIGNMENT).await;
    assert!(later > lags, "{later} {lags}");
    assert_eq!(metric(&stack, NOTICE).await, notices);
    settled(&stack, "paused again once read").await?;
    Ok(())
}
