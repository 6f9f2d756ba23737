//! The broker itself fails: killed with -9 in the middle of a burst of
//! pushes and started again with its log. A publisher gets 202 only for what
//! the broker acknowledged, 503 with Retry-After while it is gone, and
//! ingest and the projector recover by themselves; the read models then
//! equal a replay of the log, with every accepted board once.

use std::time::Duration;

use rand::Rng;
use ratewire_e2e::{eventually, Board, Stack};
use serde_json::Value;

const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(120);

/// The status of ingest's /readyz, while it answers.
async fn ingest_readiness(stack: &Stack) -> Option<u16> {
    let url = format!("{}/readyz", stack.ingest_url);
    let response = stack.http().get(url).send().await.ok()?;
    Some(response.status().as_u16())
}

/// Publishes ingest gave up on: failed, or not acknowledged in time.
async fn unacknowledged(stack: &Stack) -> f64 {
    stack
        .metric(
            "ratewire-ingest",
            r#"ratewire_ingest_publish_total{result="failed"}"#,
        )
        .await
        + stack
            .metric(
                "ratewire-ingest",
                r#"ratewire_ingest_publish_total{result="timed_out"}"#,
            )
            .await
}

#[tokio::test]
async fn the_broker_killed_mid_burst_loses_and_doubles_nothing() -> anyhow::Result<()> {
    let mut stack = Stack::builder()
        .own_broker()
        .env("RATEWIRE_PUBLISH_TIMEOUT_MS", "3000")
        .start()
        .await?;
    let mut banks = Vec::new();
    for i in 0..6 {
        banks.push(
            stack
                .bank_with_token(&format!("K{i}"), &format!("Kill Bank {i}"))
                .await?,
        );
    }
    let (probe_bank, probe_token) = banks[0].clone();
    // 1,200 boards of 4 currencies, pushed six banks at a time; a push
    // answered 503 is retried with its Idempotency-Key until accepted.
    let stream = stack.spawn_stream(banks, 200, 4);

    // Killed part-way through the burst, at a point picked at random.
    let at = rand::thread_rng().gen_range(100..600);
    stack.wait_published(at as f64, CAUGHT_UP_WITHIN).await?;
    stack.stop_broker()?;

    // While it is gone: a clear 503 with Retry-After, and not ready. (The
    // event may still reach the log once the broker is back, so the probe
    // is retried with its key afterwards, as a publisher would.)
    let (http, ingest) = (stack.http().clone(), stack.ingest_url.clone());
    let probe_board = Board::now().rate("USD", 150, 152).body();
    let probe = || {
        http.post(format!("{ingest}/v1/banks/{probe_bank}/boards"))
            .bearer_auth(&probe_token)
            .header("content-type", "application/json")
            .header("idempotency-key", "probe")
            .body(probe_board.clone())
            .send()
    };
    let response = probe().await?;
    assert_eq!(response.status(), 503);
    assert!(response.headers().get("retry-after").is_some());
    let body: Value = response.json().await?;
    assert_eq!(body["status"], 503);
    eventually(
        "ingest reports the broker gone",
        Duration::from_secs(15),
        || async { (ingest_readiness(&stack).await? == 503).then_some(()) },
    )
    .await?;

    // Gone until every bank's push has been refused for it once more.
    let refused = unacknowledged(&stack).await;
    eventually(
        "six more pushes refused",
        Duration::from_secs(30),
        || async { (unacknowledged(&stack).await >= refused + 6.0).then_some(()) },
    )
    .await?;
    stack.start_broker()?;

    let streamed = stream.await?? as i64;
    assert_eq!(streamed, 1200);
    eventually("the probe accepted", Duration::from_secs(30), || async {
        (probe().await.ok()?.status() == 202).then_some(())
    })
    .await?;
    let accepted = streamed + 1;
    eventually("ingest ready again", Duration::from_secs(30), || async {
        (ingest_readiness(&stack).await? == 200).then_some(())
    })
    .await?;
    // Six registrations and every accepted board, each applied once.
    stack.wait_applied(6 + accepted, CAUGHT_UP_WITHIN).await?;
    let rows = stack.assert_fold_matches_replay().await?;
    assert_eq!(rows["boards"], accepted, "every 202 is on the log, once");
    assert_eq!(rows["rates"], streamed * 4 + 1);
    assert_eq!(rows["dead_letters"], 0);
    Ok(())
}
