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
/// The positions are committed to the group at most once a second.
const COMMITTED_WITHIN: Duration = Duration::from_secs(5);

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
    owners_of(stack, live, PARTITIONS, within).await
}

/// [`one_owner_each`] for a topic of `count` partitions.
async fn owners_of(
    stack: &Stack,
    live: &[&Projector],
    count: i32,
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
            && (0..count).all(|p| readers.get(&p).is_some_and(|r| r.len() == 1))
            && readers.len() == count as usize
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

/// Waits until the offsets committed to the projectors' group equal every
/// partition's high watermark, as `kafka-consumer-groups --describe` would
/// read them; returns how long that took.
async fn group_at_log_end(stack: &Stack, within: Duration) -> anyhow::Result<Duration> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let client: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", stack.kafka_brokers())
        .set("group.id", &stack.group)
        .create()?;
    let (topic, started) = (stack.topic.clone(), Instant::now());
    loop {
        let (ends, committed) = tokio::task::block_in_place(|| -> anyhow::Result<_> {
            let mut list = rdkafka::TopicPartitionList::new();
            let mut ends = BTreeMap::new();
            for p in 0..PARTITIONS {
                list.add_partition(&topic, p);
                ends.insert(
                    p,
                    client
                        .fetch_watermarks(&topic, p, Duration::from_secs(5))?
                        .1,
                );
            }
            let committed: BTreeMap<i32, i64> = client
                .committed_offsets(list, Duration::from_secs(5))?
                .elements()
                .iter()
                .filter_map(|e| e.offset().to_raw().map(|o| (e.partition(), o)))
                .collect();
            Ok((ends, committed))
        })?;
        if committed == ends {
            return Ok(started.elapsed());
        }
        if started.elapsed() > within {
            anyhow::bail!("the group committed {committed:?}, the log ends at {ends:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
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

    // Lag tools see the group at the log's end too.
    let took = group_at_log_end(&stack, COMMITTED_WITHIN).await?;
    eprintln!("the group's committed offsets reached the log's end {took:?} after the fold");

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

#[tokio::test]
async fn a_projector_beyond_the_partition_count_is_ready_and_stands_by() -> anyhow::Result<()> {
    let mut stack = Stack::start_with(&[("RATEWIRE_TOPIC_PARTITIONS", "2")]).await?;
    let first = Projector {
        name: "ratewire-projector".to_owned(),
        url: stack.projector_url.clone(),
    };
    let b = Projector::start(&mut stack, "projector-b")?;
    let spare = Projector::start(&mut stack, "projector-spare")?;
    owners_of(&stack, &[&first, &b, &spare], 2, Duration::from_secs(30)).await?;

    // The member given nothing still reports ready (an orchestrator would
    // otherwise restart it forever), listing no partitions.
    let started = Instant::now();
    let idle = loop {
        let mut idle = Vec::new();
        for projector in [&first, &b, &spare] {
            let response = stack
                .http()
                .get(format!("{}/readyz", projector.url))
                .send()
                .await?;
            let ready = response.status() == 200;
            let body: Value = response.json().await?;
            if ready && body["partitions"].as_array().is_some_and(|p| p.is_empty()) {
                idle.push(projector.name.clone());
            }
        }
        if idle.len() == 1 {
            break idle.remove(0);
        }
        ensure!(
            started.elapsed() < Duration::from_secs(30),
            "no member was ready with no partitions; logs in {}",
            stack.logs.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!(
        "{idle} ready with no partitions after {:?}",
        started.elapsed()
    );

    // It stands by: killed, an owner's partition goes to it.
    let owner = [&first, &b, &spare]
        .into_iter()
        .find(|p| p.name != idle)
        .expect("two owners");
    stack.kill(&owner.name)?;
    let live: Vec<&Projector> = [&first, &b, &spare]
        .into_iter()
        .filter(|p| p.name != owner.name)
        .collect();
    let took = owners_of(&stack, &live, 2, TAKEOVER_WITHIN).await?;
    eprintln!("the standby took over a killed owner's partition in {took:?}");
    let (bank, token) = stack.bank_with_token("SBY", "Standby").await?;
    let key = stack.api_key("standby").await?;
    let board = r#"{"rates":[{"currency":"USD","cashBuying":155.1,"cashSelling":158}]}"#;
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack
        .wait_served("a board after the takeover", bank, &key, "155.1")
        .await?;
    Ok(())
}
