//! The read models equal a fold of the log, whatever happens to the
//! projector around it: kill -9 mid-stream, two projectors with one killed,
//! Postgres cut mid-stream, a replay and switch while the API serves.
//!
//! Each test streams thousands of rate entries through ingest, breaks
//! something while they flow, waits until every accepted event is applied,
//! then replays the whole topic into a fresh schema and requires every table
//! and every Redis view of the live generation to be identical to it.

use std::time::Duration;

use rand::Rng;
use ratewire_e2e::{free_port, Stack, POSTGRES_PROXY};

const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(90);

async fn banks(stack: &Stack, count: usize) -> anyhow::Result<Vec<(i64, String)>> {
    let mut banks = Vec::new();
    for i in 0..count {
        banks.push(
            stack
                .bank_with_token(&format!("B{i}"), &format!("Bank {i}"))
                .await?,
        );
    }
    Ok(banks)
}

/// Waits for the stream, then for the fold, then checks it against a replay.
async fn settle_and_compare(
    stack: &Stack,
    banks: usize,
    stream: tokio::task::JoinHandle<anyhow::Result<usize>>,
    currencies: i64,
) -> anyhow::Result<()> {
    let accepted = stream.await?? as i64;
    stack
        .wait_applied(banks as i64 + accepted, CAUGHT_UP_WITHIN)
        .await?;
    let rows = stack.assert_fold_matches_replay().await?;
    assert_eq!(rows["boards"], accepted);
    assert_eq!(rows["rates"], accepted * currencies);
    assert_eq!(rows["dead_letters"], 0);
    Ok(())
}

#[tokio::test]
async fn kill_9_mid_stream_neither_loses_nor_repeats_anything() -> anyhow::Result<()> {
    let mut stack = Stack::start().await?;
    let banks = banks(&stack, 6).await?;
    // 1,500 boards of 6 currencies: 9,000 rate entries.
    let stream = stack.spawn_stream(banks, 250, 6);
    for _ in 0..3 {
        let pause = rand::thread_rng().gen_range(300..1200);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        stack.kill("ratewire-projector")?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        stack.start_process("ratewire-projector")?;
    }
    settle_and_compare(&stack, 6, stream, 6).await
}

#[tokio::test]
async fn two_projectors_split_the_partitions_and_survive_one_being_killed() -> anyhow::Result<()> {
    let mut stack = Stack::start_with(&[("RATEWIRE_PROJECTOR_PARTITIONS", "0")]).await?;
    let second = [
        ("RATEWIRE_PROJECTOR_PARTITIONS", "1,2".to_owned()),
        (
            "RATEWIRE_PROJECTOR_LISTEN",
            format!("127.0.0.1:{}", free_port()),
        ),
    ];
    stack.start_projector_as("projector-b", &second)?;
    // Enough banks that each projector's partitions carry some.
    let banks = banks(&stack, 12).await?;
    let stream = stack.spawn_stream(banks, 100, 5);
    for _ in 0..2 {
        let pause = rand::thread_rng().gen_range(300..1000);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        stack.kill("projector-b")?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        stack.start_projector_as("projector-b", &second)?;
    }
    settle_and_compare(&stack, 12, stream, 5).await?;

    // Both did their share.
    for log in ["ratewire-projector.log", "projector-b.log"] {
        let text = std::fs::read_to_string(stack.logs.join(log))?;
        assert!(text.contains("batch applied"), "{log} applied nothing");
    }
    Ok(())
}

#[tokio::test]
async fn postgres_cut_mid_stream_pauses_the_fold_and_loses_nothing() -> anyhow::Result<()> {
    let mut stack = Stack::start_with(&[(POSTGRES_PROXY, "")]).await?;
    let banks = banks(&stack, 4).await?;
    let stream = stack.spawn_stream(banks, 250, 6);
    tokio::time::sleep(Duration::from_millis(700)).await;
    stack.postgres_down()?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stack.postgres_up().await?;
    settle_and_compare(&stack, 4, stream, 6).await
}

#[tokio::test]
async fn a_replay_switches_generations_while_the_api_keeps_serving() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("replay").await?;
    let banks = banks(&stack, 3).await?;
    let (first_bank, first_token) = banks[0].clone();
    let accepted = stack.spawn_stream(banks, 100, 5).await?? as i64;
    stack.wait_applied(3 + accepted, CAUGHT_UP_WITHIN).await?;

    // Readers keep getting answers during the whole replay.
    let poller = {
        let (http, url, key) = (stack.http().clone(), stack.api_url.clone(), key.clone());
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            for _ in 0..200 {
                let response = http
                    .get(format!("{url}/api/v1/rates"))
                    .header("x-api-key", &key)
                    .send()
                    .await;
                statuses.push(response.map(|r| r.status().as_u16()).unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            statuses
        })
    };
    let replay = stack
        .run(
            "ratewire-projector",
            &["replay", "--schema", "readmodel_v2"],
            &[],
        )
        .await?;
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let statuses = poller.await?;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");

    assert_eq!(stack.active_generation().await?, "readmodel_v2");
    let rows = stack.compare_schemas("readmodel", "readmodel_v2").await?;
    assert_eq!(rows["boards"], accepted);
    stack.compare_views("readmodel", "readmodel_v2").await?;

    // The running projector followed the switch: a new board lands in the
    // new generation only, and the API serves it from there.
    let board = r#"{"rates":[{"currency":"ZAR","cashBuying":8.5,"cashSelling":8.9}]}"#;
    assert_eq!(
        stack
            .publish_board(first_bank, &first_token, board)
            .await?
            .0,
        202
    );
    stack
        .wait_served("the new board served", first_bank, &key, "ZAR")
        .await?;
    let in_old = stack
        .sql_number("SELECT count(*) FROM readmodel.rates WHERE currency = 'ZAR'")
        .await?;
    let in_new = stack
        .sql_number("SELECT count(*) FROM readmodel_v2.rates WHERE currency = 'ZAR'")
        .await?;
    assert_eq!((in_old, in_new), (Some(0), Some(1)));
    Ok(())
}
