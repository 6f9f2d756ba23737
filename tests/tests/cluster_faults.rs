//! Kafka in the production shape (three nodes, the topic replicated on
//! each, `min.insync.replicas` 2): the node leading a partition is killed
//! with -9 in the middle of a burst of pushes. Its partitions get new
//! leaders among the other two; a publisher hears at most a 503 with
//! Retry-After, which it retries with its Idempotency-Key; two projectors
//! fold on. The read models then equal a replay of the log, with every
//! accepted board once, and the node killed rejoins.

use std::time::Duration;

use rand::Rng;
use ratewire_e2e::{Board, Stack};

const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(120);

#[tokio::test]
async fn killing_a_partition_leader_mid_burst_loses_and_doubles_nothing() -> anyhow::Result<()> {
    let mut stack = Stack::builder()
        .broker_cluster()
        .projectors(2)
        .env("RATEWIRE_PUBLISH_TIMEOUT_MS", "3000")
        .start()
        .await?;
    let mut banks = Vec::new();
    for i in 0..6 {
        banks.push(
            stack
                .bank_with_token(&format!("L{i}"), &format!("Leader Bank {i}"))
                .await?,
        );
    }
    let (probe_bank, probe_token) = banks[0].clone();
    // 1,200 boards of 4 currencies, six banks at a time, each retried on
    // 503 with its Idempotency-Key until accepted.
    let stream = stack.spawn_stream(banks, 200, 4);

    let at = rand::thread_rng().gen_range(100..600);
    stack.wait_published(at as f64, CAUGHT_UP_WITHIN).await?;
    let leader = stack.partition_leader(0).await?;
    stack.kill_cluster_node(leader)?;

    let streamed = stream.await?? as i64;
    assert_eq!(streamed, 1200, "every push was accepted in the end");
    stack.wait_applied(6 + streamed, CAUGHT_UP_WITHIN).await?;
    let rows = stack.assert_fold_matches_replay().await?;
    assert_eq!(rows["boards"], streamed, "every 202 is on the log, once");
    assert_eq!(rows["rates"], streamed * 4);
    assert_eq!(rows["dead_letters"], 0);
    assert_ne!(
        stack.partition_leader(0).await?,
        leader,
        "partition 0 moved to a live node"
    );

    // The node comes back with its log and catches up; a board published
    // afterwards is folded like any other.
    stack.start_cluster_node(leader)?;
    let response = stack
        .http()
        .post(format!("{}/v1/banks/{probe_bank}/boards", stack.ingest_url))
        .bearer_auth(&probe_token)
        .header("content-type", "application/json")
        .body(Board::now().rate("USD", 150, 152).body())
        .send()
        .await?;
    assert_eq!(response.status(), 202);
    stack
        .wait_applied(6 + streamed + 1, CAUGHT_UP_WITHIN)
        .await?;
    let rows = stack.assert_fold_matches_replay().await?;
    assert_eq!(rows["boards"], streamed + 1);
    Ok(())
}
