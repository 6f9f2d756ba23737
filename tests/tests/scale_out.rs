//! Projectors in `auto` mode (the default) share the topic's partitions by
//! themselves: under a steady load, one killed, one added and two stopped,
//! every partition has exactly one owner again within the takeover target,
//! and the read model still equals a replay of the log. (Partitions added
//! to a topic are tested at the lease level, `projector/tests/leases.rs`:
//! the development broker cannot add partitions.)

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use ratewire_e2e::{free_port, Stack};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const PARTITIONS: i32 = 6;
/// Takeover target: the default lease (6 s) plus a heartbeat (2 s), with room.
const TAKEOVER_WITHIN: Duration = Duration::from_secs(10);
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

/// The unexpired lease of each partition: its owner.
async fn leases(stack: &Stack) -> anyhow::Result<BTreeMap<i32, String>> {
    let pool = sqlx::PgPool::connect(&format!(
        "postgres://postgres@127.0.0.1:5432/{}",
        stack.database
    ))
    .await?;
    let rows: Vec<(i32, String)> = sqlx::query_as(
        "SELECT partition, owner FROM ratewire.partition_leases
         WHERE topic = $1 AND owner IS NOT NULL AND expires_at > now()",
    )
    .bind(&stack.topic)
    .fetch_all(&pool)
    .await?;
    pool.close().await;
    Ok(rows.into_iter().collect())
}

/// Waits until every partition is read by exactly one of `live`, which
/// holds its lease, and the shares are even; returns how long that took.
async fn one_owner_each(stack: &Stack, live: &[&Projector]) -> anyhow::Result<Duration> {
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
        let leases = leases(stack).await.unwrap_or_default();
        let settled = members.len() == live.len()
            && (0..PARTITIONS).all(|p| {
                readers
                    .get(&p)
                    .is_some_and(|r| r.len() == 1 && leases.get(&p) == members.get(r[0]))
            })
            && readers.len() == PARTITIONS as usize
            && shares
                .iter()
                .max()
                .zip(shares.iter().min())
                .is_some_and(|(h, l)| h - l <= 1);
        if settled {
            return Ok(started.elapsed());
        }
        if started.elapsed() > TAKEOVER_WITHIN {
            anyhow::bail!(
                "partitions not settled within {TAKEOVER_WITHIN:?}; last seen: readers {readers:?}, \
                 leases {leases:?}, members {members:?}; logs in {}",
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
    let took = one_owner_each(&stack, &[&first, &b, &c]).await?;
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
    let took = one_owner_each(&stack, &[&first, &b]).await?;
    eprintln!("a killed projector's partitions taken over in {took:?}");

    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = Projector::start(&mut stack, "projector-d")?;
    let took = one_owner_each(&stack, &[&first, &b, &d]).await?;
    eprintln!("a fourth projector given its share in {took:?}");

    tokio::time::sleep(Duration::from_secs(2)).await;
    for name in ["ratewire-projector", "projector-b"] {
        let status = stack.terminate(name, Duration::from_secs(15)).await?;
        ensure!(status.success(), "{name} stopped with {status}");
    }
    let took = one_owner_each(&stack, &[&d]).await?;
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

    // Every change of ownership was logged by the one that made it.
    let log = std::fs::read_to_string(stack.logs.join("projector-d.log"))?;
    assert!(
        log.contains("took a free partition"),
        "projector-d took nothing"
    );
    let log = std::fs::read_to_string(stack.logs.join("projector-b.log"))?;
    assert!(
        log.contains("took over an expired partition lease"),
        "projector-b never took over from the killed one"
    );
    Ok(())
}
