//! Redis misbehaving must not bend the API's rules: a hung Redis never
//! stalls requests nor lets more through than the plan allows, a quota
//! spent stays spent through a Redis restart, and a revocation holds even
//! when Redis refuses to write it down. Each test has a Redis of its own.

use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use ratewire_e2e::{
    ago, eventually, room_in_this_minute, Board, Stack, ADMIN_TOKEN, VISIBLE_WITHIN,
};
use serde_json::Value;

/// A stack with its own Redis and one bank with a board, served.
async fn serving(plans: &str, more: &[(&str, &str)]) -> anyhow::Result<(Stack, String)> {
    let mut stack = Stack::builder().own_redis().env("RATEWIRE_PLANS", plans);
    for (name, value) in more {
        stack = stack.env(name, *value);
    }
    let stack = stack.start().await?;
    let poll = stack.api_key_on("poll", "big").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let board = Board::at(ago(0, 1)).rate("USD", "155.1", 158);
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack.wait_served("the board", bank, &poll, "155.1").await?;
    Ok((stack, format!("/api/v1/rates?bankId={bank}")))
}

async fn status(stack: &Stack, url: &str, key: &str) -> anyhow::Result<(u16, Duration)> {
    let started = Instant::now();
    let response = stack
        .http()
        .get(url)
        .header("x-api-key", key)
        .send()
        .await?;
    Ok((response.status().as_u16(), started.elapsed()))
}

#[tokio::test]
async fn a_hung_redis_neither_stalls_the_api_nor_lets_more_through() -> anyhow::Result<()> {
    let (stack, path) = serving(
        "tiny=40/100000,anonymous=10/1000,big=1000000/1000000000",
        &[],
    )
    .await?;
    let key = stack.api_key_on("tiny", "tiny").await?;
    let url = format!("{}{path}", stack.api_url);
    room_in_this_minute(25).await;
    let mut admitted = 0;
    for _ in 0..20 {
        if status(&stack, &url, &key).await?.0 == 200 {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 20, "counted in redis");

    stack.signal("redis", "STOP")?;
    // Enough requests that the p99 is the service under load, not the
    // first few in flight, which wait out the budget before the breaker
    // opens (those are bounded by the slowest, below).
    let answers: Vec<(u16, Duration)> = stream::iter(0..2400)
        .map(|_| status(&stack, &url, &key))
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    if std::env::var("RATEWIRE_DEBUG_LATENCY").is_ok() {
        for (i, (s, took)) in answers.iter().enumerate() {
            if *took > Duration::from_millis(40) {
                eprintln!("#{i}: {s} in {took:?}");
            }
        }
    }
    let mut latencies: Vec<Duration> = answers.iter().map(|(_, took)| *took).collect();
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    let slowest = *latencies.last().expect("answers");
    admitted += answers.iter().filter(|(s, _)| *s == 200).count();
    assert!(
        answers.iter().all(|(s, _)| *s == 200 || *s == 429),
        "answered, not failed"
    );
    assert!(
        p99 < Duration::from_millis(100),
        "p99 {p99:?} with redis hung"
    );
    assert!(slowest < Duration::from_secs(1), "slowest {slowest:?}");
    assert!(
        admitted <= 40,
        "{admitted} admitted on a plan of 40 a minute"
    );
    let ready: Value = stack
        .http()
        .get(format!("{}/readyz", stack.api_url))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(ready["status"], "degraded");

    stack.signal("redis", "CONT")?;
    eventually(
        "counting in redis again",
        Duration::from_secs(10),
        || async {
            let ready: Value = stack.json_at(&format!("{}/readyz", stack.api_url)).await?;
            (ready["status"] == "ready").then_some(())
        },
    )
    .await?;
    let log = std::fs::read_to_string(stack.logs.join("ratewire-api.log"))?;
    assert!(
        log.contains("redis answers again"),
        "the recovery is logged"
    );
    Ok(())
}

/// A budget too short for a burst: the breaker opens and closes again and
/// again while 1,000 requests race, and the plan still holds across every
/// switch between counting in Redis and counting here.
#[tokio::test]
async fn a_flapping_breaker_never_lets_a_burst_past_the_plan() -> anyhow::Result<()> {
    let (stack, path) = serving(
        "burst=60/100000,anonymous=10/1000,big=1000000/1000000000",
        &[("RATEWIRE_REDIS_BUDGET_MS", "1")],
    )
    .await?;
    let key = stack.api_key_on("burst", "burst").await?;
    let url = format!("{}{path}", stack.api_url);
    room_in_this_minute(20).await;
    let statuses: Vec<u16> = stream::iter(0..1000)
        .map(|_| status(&stack, &url, &key))
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .map(|answer| answer.map(|(status, _)| status))
        .collect::<Result<_, _>>()?;
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    eprintln!("admitted {admitted}; logs in {}", stack.logs.display());
    let mut counts = std::collections::BTreeMap::new();
    for status in &statuses {
        *counts.entry(status).or_insert(0) += 1;
    }
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "answered, not failed: {counts:?}"
    );
    assert!(
        (1..=60).contains(&admitted),
        "{admitted} admitted on a plan of 60 a minute"
    );
    let log = std::fs::read_to_string(stack.logs.join("ratewire-api.log"))?;
    assert!(
        log.contains("redis unavailable"),
        "the breaker opened at least once"
    );
    Ok(())
}

#[tokio::test]
async fn a_key_at_its_monthly_quota_stays_refused_through_a_redis_restart() -> anyhow::Result<()> {
    let (mut stack, path) = serving(
        "monthly=1000/5,anonymous=10/1000,big=1000000/1000000000",
        &[("RATEWIRE_USAGE_SYNC_SECS", "1")],
    )
    .await?;
    let key = stack.api_key_on("monthly", "monthly").await?;
    let url = format!("{}{path}", stack.api_url);
    let mut statuses = vec![];
    for _ in 0..6 {
        statuses.push(status(&stack, &url, &key).await?.0);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429]);
    // Saved to Postgres by the usage sync.
    stack
        .wait_count(
            "the month's count saved",
            &format!(
                "SELECT coalesce(max(used), 0) FROM api.usage_months WHERE subject = '{}'",
                subject_of(&key)
            ),
            5,
            VISIBLE_WITHIN,
        )
        .await?;

    stack.stop_redis()?;
    for _ in 0..3 {
        assert_eq!(
            status(&stack, &url, &key).await?.0,
            429,
            "still refused without redis"
        );
    }
    stack.start_redis()?;
    eventually("redis counting again", VISIBLE_WITHIN, || async {
        let ready: Value = stack.json_at(&format!("{}/readyz", stack.api_url)).await?;
        (ready["status"] == "ready").then_some(())
    })
    .await?;
    // The empty Redis got the month's count back from Postgres.
    eventually("the count restored", VISIBLE_WITHIN, || async {
        let (status, body) = stack.get("/api/v1/usage", Some(&key)).await.ok()?;
        (status == 200 && body["data"]["month"]["used"] == 5).then_some(())
    })
    .await?;
    assert_eq!(status(&stack, &url, &key).await?.0, 429);
    Ok(())
}

#[tokio::test]
async fn a_revocation_holds_within_a_second_when_redis_refuses_to_write() -> anyhow::Result<()> {
    let (mut stack, path) = serving(
        "free=60/10000,pro=1000/1000000,enterprise=100000/1000000000,anonymous=10/1000,big=1000000/1000000000",
        &[],
    )
    .await?;
    let key = stack.api_key("soon-revoked").await?;
    let (second, _) = stack.start_api_as("api-b").await?;
    for base in [&stack.api_url, &second] {
        assert_eq!(status(&stack, &format!("{base}{path}"), &key).await?.0, 200);
    }
    // Reads still work; every write is refused.
    stack.redis_cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])?;
    stack.redis_cli(&["CONFIG", "SET", "maxmemory", "1"])?;

    let prefix = key.split('_').nth(1).expect("rwk_PREFIX_SECRET").to_owned();
    let revoke = format!("{}/v1/admin/keys/{prefix}", stack.api_operator_url);
    let revoked_at = Instant::now();
    let answer = stack
        .http()
        .delete(&revoke)
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await?;
    assert_eq!(answer.status(), 204, "revoked: Postgres decides");
    let on_second = format!("{second}{path}");
    eventually(
        "refused on the second instance",
        Duration::from_secs(5),
        || async {
            let (code, _) = status(&stack, &on_second, &key).await.ok()?;
            (code == 401).then_some(())
        },
    )
    .await?;
    let took = revoked_at.elapsed();
    assert!(
        took < Duration::from_millis(1_500),
        "refused after {took:?}"
    );
    let again = stack
        .http()
        .delete(&revoke)
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await?;
    assert_eq!(again.status(), 204, "revoking twice answers the same");
    stack.redis_cli(&["CONFIG", "SET", "maxmemory", "0"])?;
    Ok(())
}

#[tokio::test]
async fn two_projectors_racing_while_redis_is_flushed_end_with_the_views_of_a_fresh_rebuild(
) -> anyhow::Result<()> {
    let stack = Stack::builder().own_redis().projectors(2).start().await?;
    let mut banks = Vec::new();
    for i in 0..4 {
        banks.push(
            stack
                .bank_with_token(&format!("B{i}"), &format!("Bank {i}"))
                .await?,
        );
    }
    let stream = stack.spawn_stream(banks, 60, 6);
    // Flushed four times while the boards stream, thirty events apart.
    let start = stack.published().await;
    for flush in 1..=4 {
        stack
            .wait_published(start + 30.0 * f64::from(flush), Duration::from_secs(60))
            .await?;
        stack.redis_cli(&["FLUSHALL"])?;
    }
    assert_eq!(stream.await??, 240);
    stack.wait_applied(4 + 240, Duration::from_secs(60)).await?;

    // A fresh rebuild, written beside the stack's views (under a prefix of
    // its own), is what the racing projectors must end with.
    let beside = format!("{}rebuilt:", stack.redis_prefix);
    let rebuilt = stack
        .run(
            "ratewire-projector",
            &["rebuild"],
            &[("RATEWIRE_REDIS_PREFIX", &beside)],
        )
        .await?;
    assert!(
        rebuilt.status.success(),
        "{}",
        String::from_utf8_lossy(&rebuilt.stderr)
    );
    let fresh = stack.stored_views_under(&beside).await?;
    assert!(!fresh.is_empty());
    let ended = eventually(
        "the raced views equal a rebuild's",
        Duration::from_secs(30),
        || async { (stack.stored_views().await.ok()? == fresh).then_some(()) },
    )
    .await;
    if ended.is_err() {
        let raced = stack.stored_views().await?;
        assert_eq!(raced.len(), fresh.len(), "the same views");
        for (key, value) in &fresh {
            assert_eq!(raced.get(key), Some(value), "{key} after the race");
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_redis_restored_from_an_older_snapshot_gets_views_and_usage_back() -> anyhow::Result<()> {
    let mut stack = Stack::builder()
        .own_redis()
        .env("RATEWIRE_USAGE_SYNC_SECS", "1")
        .start()
        .await?;
    let key = stack.api_key("reader").await?;
    let (bank, token) = stack.bank_with_token("SNAP", "Snapshot Bank").await?;
    let board =
        |price: u32, hours_ago: i64| Board::at(ago(0, hours_ago)).rate("USD", price, price + 1);
    assert_eq!(
        stack.publish_board(bank, &token, board(100, 3)).await?.0,
        202
    );
    stack
        .wait_served("the first board", bank, &key, "\"cashBuying\":100")
        .await?;
    stack.redis_cli(&["SAVE"])?;
    std::fs::copy(stack.logs.join("dump.rdb"), stack.logs.join("older.rdb"))?;

    assert_eq!(
        stack.publish_board(bank, &token, board(200, 2)).await?.0,
        202
    );
    stack
        .wait_served("the second board", bank, &key, "\"cashBuying\":200")
        .await?;
    for _ in 0..5 {
        stack.get("/api/v1/currencies", Some(&key)).await?;
    }
    let (_, usage) = stack.get("/api/v1/usage", Some(&key)).await?;
    let used = usage["data"]["month"]["used"].as_i64().expect("a count");
    stack
        .wait_count(
            "the month's count saved",
            &format!(
                "SELECT count(*) FROM api.usage_months WHERE subject = '{}' AND used >= {used}",
                subject_of(&key)
            ),
            1,
            VISIBLE_WITHIN,
        )
        .await?;

    // Redis comes back from the older snapshot: old views, old counters,
    // and its marker that usage was restored this month.
    stack.stop_redis()?;
    std::fs::copy(stack.logs.join("older.rdb"), stack.logs.join("dump.rdb"))?;
    stack.start_redis()?;
    stack
        .wait_served("the newer board again", bank, &key, "\"cashBuying\":200")
        .await?;
    // At least what was saved: the requests counted between the restart
    // and the raise are the ones an interval may lose (docs/operations.md).
    eventually("the month's count back", VISIBLE_WITHIN, || async {
        let (status, body) = stack.get("/api/v1/usage", Some(&key)).await.ok()?;
        (status == 200 && body["data"]["month"]["used"].as_i64()? >= used).then_some(())
    })
    .await?;
    Ok(())
}

/// The usage subject of an API key `rwk_{prefix}_{secret}`: other keys
/// (the harness's polling key among them) count under their own.
fn subject_of(key: &str) -> String {
    format!("key:{}", key.split('_').nth(1).expect("a key prefix"))
}
