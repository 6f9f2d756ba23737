//! The log is the system of record, also on a bad day: after Postgres is
//! replaced by an empty cluster or restored from an earlier backup (the log
//! and Redis kept), and after Redis is emptied while the projector is down,
//! every answer is what the log gives, new banks never take an id the log
//! has, and the month's usage survives. Each recovery's time is printed
//! (`recovery:` lines) for docs/operations.md.

use std::time::{Duration, Instant};

use ratewire_e2e::{ago, eventually, without_computed_time, Board, Stack};
use serde_json::Value;

/// Long enough for a replay of a few dozen events and a rebuild of the
/// views on a busy machine.
const RECOVERED_WITHIN: Duration = Duration::from_secs(60);

/// What a client sees of every bank: the lists, each bank's rates and
/// history, the best rates and the currencies.
fn paths(banks: &[i64]) -> Vec<String> {
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let mut paths = vec![
        "/api/v1/banks".to_owned(),
        "/api/v1/banks?withRecentEx=true".to_owned(),
        "/api/v1/currencies".to_owned(),
        "/api/v1/rates".to_owned(),
        "/api/v1/rates/best-rates?currencyCode=USD".to_owned(),
        "/api/v1/rates/best-rates?currencyCode=EUR".to_owned(),
    ];
    for bank in banks {
        paths.push(format!("/api/v1/rates?bankId={bank}"));
        paths.push(format!("/api/v1/history?bankId={bank}&date={today}"));
        paths.push(format!(
            "/api/v1/history?bankId={bank}&date={today}&currencyCode=EUR"
        ));
    }
    paths
}

async fn answers(stack: &Stack, key: &str, paths: &[String]) -> anyhow::Result<Vec<Value>> {
    let mut answers = Vec::new();
    for path in paths {
        let (status, body) = stack.get(path, Some(key)).await?;
        anyhow::ensure!(status == 200, "{path}: {status} {body}");
        answers.push(without_computed_time(body));
    }
    Ok(answers)
}

/// Waits until every path answers `expected`; how long that took.
async fn until_answers(
    stack: &Stack,
    key: &str,
    paths: &[String],
    expected: &[Value],
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let found = eventually("the answers of before", RECOVERED_WITHIN, || async {
        let now = answers(stack, key, paths).await.ok()?;
        (now == expected).then_some(())
    })
    .await;
    if found.is_err() {
        let now = answers(stack, key, paths).await?;
        for ((path, was), is) in paths.iter().zip(expected).zip(&now) {
            assert_eq!(is, was, "{path}");
        }
    }
    Ok(started.elapsed())
}

fn board(usd: &str, hours: i64) -> Board {
    Board::at(ago(0, hours))
        .rate("USD", usd, 160)
        .transactional("USD", usd, 159)
        .rate("EUR", 180, 184.5)
}

/// Pushes `board(usd, hours)` as `bank`'s publisher; the answer's status.
async fn push(stack: &Stack, bank: i64, token: &str, usd: &str, hours: i64) -> anyhow::Result<u16> {
    Ok(stack.publish_board(bank, token, board(usd, hours)).await?.0)
}

/// `bank`'s token from before is refused; a new one is taken, and a board
/// pushed with it is served.
async fn takes_a_new_token(
    stack: &Stack,
    key: &str,
    bank: i64,
    lost: &str,
    usd: &str,
) -> anyhow::Result<()> {
    assert_eq!(push(stack, bank, lost, usd, 1).await?, 401);
    let token = stack.publisher_token(bank).await?;
    assert_eq!(push(stack, bank, &token, usd, 1).await?, 202);
    stack
        .wait_served("a board with the new token", bank, key, usd)
        .await
}

#[tokio::test]
async fn postgres_replaced_by_an_empty_cluster_comes_back_from_the_log() -> anyhow::Result<()> {
    let mut stack = Stack::builder().own_postgres().start().await?;
    let key = stack.api_key_on("ops", "pro").await?;
    let (cbe, cbe_token) = stack.bank_with_token("CBE", "Commercial Bank").await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    let schedule = serde_json::json!({"days": ["Mon", "Fri"], "by": "10:00"});
    stack
        .update_bank(cbe, serde_json::json!({"schedule": schedule}))
        .await?;
    for (bank, token, usd, hours) in [
        (cbe, &cbe_token, "155.10", 5),
        (cbe, &cbe_token, "155.35", 2),
        (awash, &awash_token, "154.90", 3),
    ] {
        assert_eq!(push(&stack, bank, token, usd, hours).await?, 202);
    }
    stack
        .wait_served("cbe's last board", cbe, &key, "155.35")
        .await?;
    stack
        .wait_served("awash's board", awash, &key, "154.90")
        .await?;
    stack.wait_aggregates_written().await?;
    let paths = paths(&[cbe, awash]);
    let before = answers(&stack, &key, &paths).await?;

    let restarted = stack.replace_postgres().await?;
    // API keys lived only in the lost Postgres (docs/operations.md: back
    // them up); this one is made on the new cluster.
    let key = stack.api_key_on("ops", "pro").await?;
    let recovered = until_answers(&stack, &key, &paths, &before).await?;
    eprintln!(
        "recovery: postgres replaced by an empty cluster: processes ready after {restarted:?}, \
         every answer as before {recovered:?} later"
    );
    // What a replay of the log gives, and what the API renders from
    // Postgres without the views.
    stack.assert_fold_matches_replay().await?;
    stack.flush_redis().await?;
    let key = stack.api_key_on("ops", "pro").await?;
    assert_eq!(answers(&stack, &key, &paths).await?, before);

    // A bank registered now takes an id above the log's, and its boards
    // land on it alone.
    let (newb, newb_token) = stack.bank_with_token("NEWB", "New Bank").await?;
    assert!(newb > awash, "bank {newb} after the log's {awash}");
    assert_eq!(push(&stack, newb, &newb_token, "150.00", 1).await?, 202);
    stack
        .wait_served("the new bank's board", newb, &key, "150.00")
        .await?;
    for bank in [cbe, awash] {
        let path = format!("/api/v1/rates?bankId={bank}");
        let at = paths.iter().position(|p| *p == path).unwrap();
        assert_eq!(answers(&stack, &key, &[path]).await?[0], before[at]);
    }

    // The schedule came back from the log with the bank, in ingest and in
    // the read model.
    let (_, restored) = stack
        .ingest_admin(
            reqwest::Method::GET,
            &format!("/v1/admin/banks/{cbe}"),
            None,
        )
        .await?;
    assert_eq!(restored["schedule"], schedule, "{restored}");
    assert_eq!(
        stack
            .sql_json(&format!(
                "SELECT schedule FROM readmodel.banks WHERE id = {cbe}"
            ))
            .await?,
        Some(schedule)
    );

    // Publisher tokens died with the old cluster; a restored bank takes a
    // new one, and its boards are served again.
    takes_a_new_token(&stack, &key, cbe, &cbe_token, "156.00").await?;
    Ok(())
}

#[tokio::test]
async fn postgres_restored_from_an_earlier_backup_catches_up_with_the_log() -> anyhow::Result<()> {
    let mut stack = Stack::builder().own_postgres().start().await?;
    let key = stack.api_key_on("ops", "pro").await?;
    let (cbe, cbe_token) = stack.bank_with_token("CBE", "Commercial Bank").await?;
    for (usd, hours) in [("155.10", 6), ("155.20", 5)] {
        assert_eq!(push(&stack, cbe, &cbe_token, usd, hours).await?, 202);
    }
    stack
        .wait_served("the second board", cbe, &key, "155.20")
        .await?;
    stack.backup_postgres("nightly").await?;

    // After the backup: two more boards, a new name, and a new bank with
    // its own.
    stack
        .update_bank(
            cbe,
            serde_json::json!({"name": "Commercial Bank of Ethiopia"}),
        )
        .await?;
    for (usd, hours) in [("155.30", 4), ("155.40", 3)] {
        assert_eq!(push(&stack, cbe, &cbe_token, usd, hours).await?, 202);
    }
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    assert_eq!(push(&stack, awash, &awash_token, "154.90", 2).await?, 202);
    stack
        .wait_served("the fourth board", cbe, &key, "155.40")
        .await?;
    stack
        .wait_served("awash's board", awash, &key, "154.90")
        .await?;
    stack.wait_aggregates_written().await?;
    let paths = paths(&[cbe, awash]);
    let before = answers(&stack, &key, &paths).await?;

    let restarted = stack.restore_postgres("nightly").await?;
    // The key was made before the backup.
    let recovered = until_answers(&stack, &key, &paths, &before).await?;
    eprintln!(
        "recovery: postgres restored from an earlier backup: processes ready after {restarted:?}, \
         every answer as before {recovered:?} later"
    );
    // Nothing applied twice, and the read model is a fold of the log.
    let boards = stack
        .sql_number(&format!(
            "SELECT count(*) FROM readmodel.boards WHERE bank_id = {cbe}"
        ))
        .await?;
    assert_eq!(boards, Some(4));
    stack.assert_fold_matches_replay().await?;
    // Ingest's own record took the name the log has, given to a bank it
    // had registered before the backup.
    let record: Value = stack
        .http()
        .get(format!(
            "{}/v1/admin/banks/{cbe}",
            stack.ingest_operator_url
        ))
        .bearer_auth(ratewire_e2e::ADMIN_TOKEN)
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(record["name"], "Commercial Bank of Ethiopia", "{record}");

    // A board after the restore is served: views written before it do not
    // hide it.
    assert_eq!(push(&stack, cbe, &cbe_token, "155.50", 1).await?, 202);
    stack
        .wait_served("a board after the restore", cbe, &key, "155.50")
        .await?;
    // Awash's token was made after the backup: gone with it. Awash itself
    // came back from the log and takes a new one.
    takes_a_new_token(&stack, &key, awash, &awash_token, "154.95").await?;
    Ok(())
}

#[tokio::test]
async fn redis_emptied_while_the_projector_is_down_is_rebuilt_and_keeps_the_month(
) -> anyhow::Result<()> {
    let mut stack = Stack::builder()
        .env("RATEWIRE_USAGE_SYNC_SECS", "1")
        .start()
        .await?;
    let key = stack.api_key_on("ops", "pro").await?;
    let (cbe, token) = stack.bank_with_token("CBE", "Commercial Bank").await?;
    assert_eq!(push(&stack, cbe, &token, "155.10", 1).await?, 202);
    stack.wait_served("the board", cbe, &key, "155.10").await?;
    for _ in 0..10 {
        stack.get("/api/v1/currencies", Some(&key)).await?;
    }
    stack.wait_aggregates_written().await?;
    let paths = paths(&[cbe]);
    let before = answers(&stack, &key, &paths).await?;
    let (_, usage) = stack.get("/api/v1/usage", Some(&key)).await?;
    let used = usage["data"]["month"]["used"].as_u64().unwrap() as i64;
    // Saved to Postgres within the sync period.
    let subject = format!("key:{}", key.split('_').nth(1).expect("a prefix"));
    eventually("the month's usage saved", RECOVERED_WITHIN, || async {
        let saved = stack
            .sql_number(&format!(
                "SELECT max(used) FROM api.usage_months WHERE subject = '{subject}'"
            ))
            .await
            .ok()??;
        (saved >= used).then_some(())
    })
    .await?;

    stack.kill("ratewire-projector")?;
    stack.flush_redis().await?;
    let started = Instant::now();
    stack.start_process("ratewire-projector")?;
    eventually("the views rebuilt", RECOVERED_WITHIN, || async {
        stack.bank_view_written(cbe).await.ok()?.then_some(())
    })
    .await?;
    let rebuilt = started.elapsed();
    assert_eq!(answers(&stack, &key, &paths).await?, before);
    // The month's count came back from Postgres: it counts on from there.
    let restored = eventually("the month's usage restored", RECOVERED_WITHIN, || async {
        let (_, usage) = stack.get("/api/v1/usage", Some(&key)).await.ok()?;
        let now = usage["data"]["month"]["used"].as_i64()?;
        (now >= used).then_some(now)
    })
    .await?;
    eprintln!(
        "recovery: redis emptied with the projector down: views rebuilt {rebuilt:?} after its start; \
         month's usage {used} before, {restored} after"
    );
    Ok(())
}
