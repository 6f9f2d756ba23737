//! Projectors in `auto` mode (the default) share the topic's partitions
//! through Kafka's consumer group: under a steady load, one killed, one
//! added and two stopped, every partition has exactly one owner again
//! within its target, and the read model still equals a replay of the log.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use ratewire_e2e::{free_port, Stack};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const PARTITIONS: i32 = 6;
/// A killed member's partitions move when the broker ends its session (the
/// test broker's `group.consumer.session.timeout.ms`, 6 s) and the others'
/// next heartbeats (1 s) bring the new assignment.
const TAKEOVER_WITHIN: Duration = Duration::from_secs(10);
/// A stopped member leaves the group at once.
const HANDOVER_WITHIN: Duration = Duration::from_secs(3);
/// A new member is given partitions at the next heartbeats.
const JOINED_WITHIN: Duration = Duration::from_secs(5);
const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(90);

/// A running projector: its process name and health listener.
struct Projector {
    name: String,
    url: String,
}

impl Projector {
    fn start(stack: &mut Stack, name: &str) -> anyhow::Result<Projector> {
        let port = free_port();
        stack.start_projector_as(
            name,
            &[("RATEWIRE_PROJECTOR_LISTEN", format!("127.0.0.1:{port}"))],
        )?;
        Ok(Projector {
            name: name.to_owned(),
            url: format!("http://127.0.0.1:{port}"),
        })
    }
}

/// What a projector's /readyz says it is and reads.
async fn reads(stack: &Stack, projector: &Projector) -> Option<(String, BTreeSet<i32>)> {
    let body: Value = stack.json_at(&format!("{}/readyz", projector.url)).await?;
    let member = body["member"].as_str()?.to_owned();
    let partitions = body["partitions"]
        .as_array()?
        .iter()
        .filter_map(|p| p.as_i64().map(|p| p as i32))
        .collect();
    Some((member, partitions))
}

/// Waits until every partition is read by exactly one of `live` and the
/// shares are even; returns how long that took, failing past `within`.
async fn one_owner_each(
    stack: &Stack,
    live: &[&Projector],
    within: Duration,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let mut readers: BTreeMap<i32, Vec<&str>> = BTreeMap::new();
        let mut shares = Vec::new();
        let mut members = BTreeMap::new();
        for projector in live {
            if let Some((member, partitions)) = reads(stack, projector).await {
                shares.push(partitions.len());
                for p in &partitions {
                    readers.entry(*p).or_default().push(&projector.name);
                }
                members.insert(projector.name.as_str(), member);
            }
        }
        let settled = members.len() == live.len()
            && (0..PARTITIONS).all(|p| readers.get(&p).is_some_and(|r| r.len() == 1))
            && readers.len() == PARTITIONS as usize
            && shares
                .iter()
                .max()
                .zip(shares.iter().min())
                .is_some_and(|(h, l)| h - l <= 1);
        if settled {
            return Ok(started.elapsed());
        }
        if started.elapsed() > within {
            anyhow::bail!(
                "partitions not settled within {within:?}; last seen: readers {readers:?}, \
                 members {members:?}; logs in {}",
                stack.logs.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn projectors_share_the_partitions_through_kill_join_and_stop() -> anyhow::Result<()> {
    let mut stack = Stack::start_with(&[("RATEWIRE_TOPIC_PARTITIONS", "6")]).await?;
    let first = Projector {
        name: "ratewire-projector".to_owned(),
        url: stack.projector_url.clone(),
    };
    let b = Projector::start(&mut stack, "projector-b")?;
    let c = Projector::start(&mut stack, "projector-c")?;
    let took = one_owner_each(&stack, &[&first, &b, &c], Duration::from_secs(30)).await?;
    eprintln!("three projectors settled in {took:?}");

    // Enough banks that every partition carries some.
    let mut banks = Vec::new();
    for i in 0..24 {
        banks.push(
            stack
                .bank_with_token(&format!("S{i}"), &format!("Scale {i}"))
                .await?,
        );
    }
    let stop = CancellationToken::new();
    let stream = stack.spawn_paced_stream(banks, 200, 3, stop.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;

    stack.kill("projector-c")?;
    let took = one_owner_each(&stack, &[&first, &b], TAKEOVER_WITHIN).await?;
    eprintln!("a killed projector's partitions taken over in {took:?}");

    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = Projector::start(&mut stack, "projector-d")?;
    let took = one_owner_each(&stack, &[&first, &b, &d], JOINED_WITHIN).await?;
    eprintln!("a new projector given its share in {took:?}");

    tokio::time::sleep(Duration::from_secs(2)).await;
    for name in ["ratewire-projector", "projector-b"] {
        let status = stack.terminate(name, Duration::from_secs(15)).await?;
        ensure!(status.success(), "{name} stopped with {status}");
    }
    let took = one_owner_each(&stack, &[&d], HANDOVER_WITHIN).await?;
    eprintln!("two stopped projectors' partitions handed over in {took:?}");

    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    let accepted = stream.await?? as i64;
    ensure!(accepted > 1_000, "only {accepted} boards were pushed");
    stack
        .wait_applied(24 + accepted, CAUGHT_UP_WITHIN)
        .await
        .context("the last projector did not catch up")?;
    let rows = stack.assert_fold_matches_replay().await?;
    assert_eq!(rows["boards"], accepted);
    assert_eq!(rows["rates"], accepted * 3);
    assert_eq!(rows["dead_letters"], 0);

    // Every change of ownership was logged by the member it reached.
    let log = std::fs::read_to_string(stack.logs.join("projector-d.log"))?;
    assert!(
        log.contains("the group assigned partitions"),
        "projector-d was given nothing"
    );
    let handed_back = ["ratewire-projector.log", "projector-b.log"]
        .iter()
        .filter_map(|log| std::fs::read_to_string(stack.logs.join(log)).ok())
        .any(|log| log.contains("partitions handed back to the group"));
    assert!(
        handed_back,
        "no member handed partitions back for the newcomer"
    );
    Ok(())
}

#[tokio::test]
async fn with_the_classic_protocol_the_members_share_the_partitions_too() -> anyhow::Result<()> {
    // For brokers without KIP-848: cooperative-sticky, run by the members.
    let mut stack = Stack::start_with(&[
        ("RATEWIRE_TOPIC_PARTITIONS", "6"),
        ("RATEWIRE_KAFKA_GROUP_PROTOCOL", "classic"),
        ("RATEWIRE_KAFKA_SESSION_TIMEOUT_MS", "6000"),
    ])
    .await?;
    let first = Projector {
        name: "ratewire-projector".to_owned(),
        url: stack.projector_url.clone(),
    };
    let b = Projector::start(&mut stack, "projector-b")?;
    let took = one_owner_each(&stack, &[&first, &b], Duration::from_secs(30)).await?;
    eprintln!("classic: two projectors settled in {took:?}");

    let key = stack.api_key("classic").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let status = stack
        .terminate("projector-b", Duration::from_secs(15))
        .await?;
    ensure!(status.success(), "projector-b stopped with {status}");
    let took = one_owner_each(&stack, &[&first], Duration::from_secs(10)).await?;
    eprintln!("classic: a stopped projector's partitions handed over in {took:?}");
    let board = r#"{"rates":[{"currency":"USD","cashBuying":155.1,"cashSelling":158}]}"#;
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack
        .wait_served("the board, folded by the one left", bank, &key, "155.1")
        .await?;
    Ok(())
}
