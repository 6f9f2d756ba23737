//! With Redis down the API keeps answering, from Postgres, under a
//! per-process limiter, and never hangs; when Redis returns, everything
//! goes back to it by itself.

use std::time::{Duration, Instant};

use ratewire_e2e::{ago, eventually, room_in_this_minute, Board, Stack, VISIBLE_WITHIN};

#[tokio::test]
async fn the_api_keeps_serving_and_limiting_while_redis_is_down() -> anyhow::Result<()> {
    let mut stack = Stack::builder()
        .own_redis()
        .env(
            "RATEWIRE_PLANS",
            "tiny=5/1000,anonymous=10/1000,big=100000/100000000",
        )
        .start()
        .await?;
    let key = stack.api_key_on("tiny", "tiny").await?;
    // Polling for the board must not spend the tiny key's minute.
    let poll = stack.api_key_on("poll", "big").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let board = Board::at(ago(0, 1)).rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);
    let path = format!("/api/v1/rates?bankId={bank}");
    eventually("the board", VISIBLE_WITHIN, || async {
        let (status, body) = stack.get(&path, Some(&poll)).await.ok()?;
        (status == 200 && body["data"][0]["data"][0]["exchangeRates"][0]["cashBuying"] == 155.1)
            .then_some(())
    })
    .await?;
    let (_, served_from_redis) = stack.get(&path, Some(&poll)).await?;

    room_in_this_minute(20).await;
    stack.stop_redis()?;
    // Whatever the limiter counted in Redis is out of reach: this process
    // counts on its own, with the same limits.
    let mut statuses = vec![];
    for _ in 0..6 {
        let started = Instant::now();
        let (status, body) = stack.get(&path, Some(&key)).await?;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "answered in {:?}",
            started.elapsed()
        );
        if status == 200 {
            assert_eq!(body, served_from_redis, "the same answer, from postgres");
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429]);
    // Still in rotation, and saying why it is not at its best.
    let ready = stack
        .http()
        .get(format!("{}/readyz", stack.api_url))
        .send()
        .await?;
    assert_eq!(ready.status(), 200);
    let ready: serde_json::Value = ready.json().await?;
    assert_eq!(
        (&ready["status"], &ready["redis"]),
        (&serde_json::json!("degraded"), &serde_json::json!(false))
    );
    let metrics = stack.api_metrics().await?;
    let local_refusals: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("ratewire_api_limiter_decisions_total{"))
        .filter(|l| l.contains(r#"decision="rate_limited""#) && l.contains(r#"counted="local""#))
        .collect();
    assert_eq!(local_refusals.len(), 1, "{metrics}");
    assert!(local_refusals[0].ends_with(" 1"), "{metrics}");
    let log = std::fs::read_to_string(stack.logs.join("ratewire-api.log"))?;
    assert_eq!(
        log.matches("redis unavailable; deciding limits in this process")
            .count(),
        1,
        "the outage is logged once, not per request"
    );

    stack.start_redis()?;
    // Redis came back empty. Counting resumes there, and the five requests
    // admitted here this minute went with it: the key stays refused until
    // its minute ends, now by Redis.
    eventually("redis counting again", VISIBLE_WITHIN, || async {
        let response = stack
            .http()
            .get(format!("{}{path}", stack.api_url))
            .header("x-api-key", &key)
            .send()
            .await
            .ok()?;
        let remaining = response
            .headers()
            .get("x-ratelimit-remaining")?
            .to_str()
            .ok()?
            .to_owned();
        let metrics = stack
            .text_at(&format!("{}/metrics", stack.api_operator_url))
            .await?;
        let refused_by_redis = metrics.lines().any(|l| {
            l.starts_with("ratewire_api_limiter_decisions_total{")
                && l.contains(r#"decision="rate_limited""#)
                && l.contains(r#"counted="redis""#)
        });
        (response.status() == 429 && remaining == "0" && refused_by_redis).then_some(())
    })
    .await?;
    let (status, body) = stack.get(&path, Some(&poll)).await?;
    assert_eq!(
        (status, body),
        (200, served_from_redis),
        "the views rebuilt"
    );
    Ok(())
}
