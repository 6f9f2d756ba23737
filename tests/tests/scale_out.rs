//! Projectors in `auto` mode (the default) share the topic's partitions
//! through Kafka's consumer group: under a steady load, one killed, one
//! added and two stopped, every partition has exactly one owner again
//! within its target, and the read model still equals a replay of the log.
//! A revocation lost while a broker is frozen is sent again at the next
//! heartbeat that gets through, not after the group's rebalance timeout.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use ratewire_e2e::{eventually, Board, Stack};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const PARTITIONS: i32 = 6;
/// A killed member's partitions move when the broker ends its session (the
/// test broker's `group.consumer.session.timeout.ms`, 2 s) and the others'
/// next heartbeats (250 ms) bring the new assignment; the rest is room for
/// a busy machine.
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
    /// One of the projectors the stack started.
    fn of(stack: &Stack, name: &str) -> anyhow::Result<Projector> {
        Ok(Projector {
            name: name.to_owned(),
            url: stack.projector_url_of(name)?,
        })
    }

    /// Another projector, started now.
    fn start(stack: &mut Stack, name: &str) -> anyhow::Result<Projector> {
        Ok(Projector {
            name: name.to_owned(),
            url: stack.start_another_projector(name)?,
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
    let seen = RefCell::new(String::new());
    let settled = eventually("the partitions settled", within, || async {
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
        *seen.borrow_mut() = format!("readers {readers:?}, members {members:?}");
        let settled = members.len() == live.len()
            && (0..count).all(|p| readers.get(&p).is_some_and(|r| r.len() == 1))
            && readers.len() == count as usize
            && shares
                .iter()
                .max()
                .zip(shares.iter().min())
                .is_some_and(|(h, l)| h - l <= 1);
        settled.then_some(())
    })
    .await;
    if settled.is_err() {
        anyhow::bail!(
            "partitions not settled within {within:?}; last seen: {}; logs in {}",
            seen.borrow(),
            stack.logs.display()
        );
    }
    Ok(started.elapsed())
}

/// Waits until ingest has had the banks' registrations and `boards` boards
/// of the stream acknowledged: a point part-way through it, whatever the
/// machine's speed.
async fn streamed(stack: &Stack, boards: u32) -> anyhow::Result<()> {
    stack
        .wait_published(f64::from(24 + boards), CAUGHT_UP_WITHIN)
        .await
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
    let seen = RefCell::new(String::new());
    let read = || -> anyhow::Result<(BTreeMap<i32, i64>, BTreeMap<i32, i64>)> {
        tokio::task::block_in_place(|| {
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
        })
    };
    let at_end = eventually("the group at the log's end", within, || {
        let now = read();
        if let Ok((ends, committed)) = &now {
            *seen.borrow_mut() =
                format!("the group committed {committed:?}, the log ends at {ends:?}");
        }
        async move {
            let (ends, committed) = now.ok()?;
            (committed == ends).then_some(())
        }
    })
    .await;
    if at_end.is_err() {
        anyhow::bail!("{}", seen.borrow());
    }
    Ok(started.elapsed())
}

#[tokio::test(flavor = "multi_thread")]
async fn projectors_share_the_partitions_through_kill_join_and_stop() -> anyhow::Result<()> {
    let mut stack = Stack::builder()
        .env("RATEWIRE_TOPIC_PARTITIONS", "6")
        .projectors(3)
        .start()
        .await?;
    let first = Projector::of(&stack, "ratewire-projector")?;
    let b = Projector::of(&stack, "projector-b")?;
    let c = Projector::of(&stack, "projector-c")?;
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
    // Each change comes once another stretch of the stream is on the log:
    // the members are busy folding when it comes.
    streamed(&stack, 600).await?;

    stack.kill("projector-c")?;
    let took = one_owner_each(&stack, &[&first, &b], TAKEOVER_WITHIN).await?;
    eprintln!("a killed projector's partitions taken over in {took:?}");

    streamed(&stack, 900).await?;
    let d = Projector::start(&mut stack, "projector-d")?;
    let took = one_owner_each(&stack, &[&first, &b, &d], JOINED_WITHIN).await?;
    eprintln!("a new projector given its share in {took:?}");

    streamed(&stack, 1200).await?;
    for name in ["ratewire-projector", "projector-b"] {
        let status = stack.terminate(name, Duration::from_secs(15)).await?;
        ensure!(status.success(), "{name} stopped with {status}");
    }
    let took = one_owner_each(&stack, &[&d], HANDOVER_WITHIN).await?;
    eprintln!("two stopped projectors' partitions handed over in {took:?}");

    streamed(&stack, 1500).await?;
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
    let mut stack = Stack::builder()
        .env("RATEWIRE_TOPIC_PARTITIONS", "6")
        .env("RATEWIRE_KAFKA_GROUP_PROTOCOL", "classic")
        .env("RATEWIRE_KAFKA_SESSION_TIMEOUT_MS", "6000")
        .projectors(2)
        .start()
        .await?;
    let first = Projector::of(&stack, "ratewire-projector")?;
    let b = Projector::of(&stack, "projector-b")?;
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
    let board = Board::now().rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack
        .wait_served("the board, folded by the one left", bank, &key, "155.1")
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_projector_beyond_the_partition_count_is_ready_and_stands_by() -> anyhow::Result<()> {
    let mut stack = Stack::builder()
        .env("RATEWIRE_TOPIC_PARTITIONS", "2")
        .start()
        .await?;
    let first = Projector::of(&stack, "ratewire-projector")?;
    let b = Projector::start(&mut stack, "projector-b")?;
    let spare = Projector::start(&mut stack, "projector-spare")?;
    owners_of(&stack, &[&first, &b, &spare], 2, Duration::from_secs(30)).await?;

    // The member given nothing still reports ready (an orchestrator would
    // otherwise restart it forever), listing no partitions.
    let started = Instant::now();
    let idle = eventually(
        "a member ready with no partitions",
        Duration::from_secs(30),
        || async {
            let mut idle = Vec::new();
            for projector in [&first, &b, &spare] {
                let response = stack
                    .http()
                    .get(format!("{}/readyz", projector.url))
                    .send()
                    .await
                    .ok()?;
                let ready = response.status() == 200;
                let body: Value = response.json().await.ok()?;
                if ready && body["partitions"].as_array().is_some_and(|p| p.is_empty()) {
                    idle.push(projector.name.clone());
                }
            }
            (idle.len() == 1).then(|| idle.remove(0))
        },
    )
    .await
    .with_context(|| format!("logs in {}", stack.logs.display()))?;
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
    let board = Board::now().rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack
        .wait_served("a board after the takeover", bank, &key, "155.1")
        .await?;
    Ok(())
}

/// A member told to revoke in a heartbeat's answer that never reaches it
/// (the answer waits on the group log's replication, which a frozen
/// follower holds up past the client's request timeout) is told again: the
/// heartbeat after a timed-out one is a full one, which the coordinator
/// answers with the assignment (vendor/rdkafka-sys/RATEWIRE.md). Without
/// that, the newcomer waited until the coordinator dropped the member at
/// the 20 s rebalance timeout, well past this bound.
const RESENT_WITHIN: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread")]
async fn a_revocation_lost_with_a_frozen_broker_is_sent_again_by_the_next_full_heartbeat(
) -> anyhow::Result<()> {
    let mut stack = Stack::builder()
        .broker_cluster()
        .env("RATEWIRE_TOPIC_PARTITIONS", "6")
        .projectors(2)
        .start()
        .await?;
    let first = Projector::of(&stack, "ratewire-projector")?;
    let b = Projector::of(&stack, "projector-b")?;
    one_owner_each(&stack, &[&first, &b], Duration::from_secs(30)).await?;

    let follower = *stack
        .group_log_followers()
        .await?
        .first()
        .context("the group's log has no follower")?;
    stack.pause_cluster_node(follower, true)?;
    let c = Projector::start(&mut stack, "projector-c")?;
    // The follower leaves the in-sync replicas after 5 s
    // (`replica.lag.time.max.ms`); the group's writes commit then.
    tokio::time::sleep(Duration::from_secs(8)).await;
    stack.pause_cluster_node(follower, false)?;

    let took = one_owner_each(&stack, &[&first, &b, &c], RESENT_WITHIN).await?;
    eprintln!("the newcomer was given its share {took:?} after the follower thawed");
    Ok(())
}
