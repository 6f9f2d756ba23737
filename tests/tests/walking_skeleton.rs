//! The first slice, end to end: a publisher pushes a board to ingest, the
//! projector folds it, and the API serves it in api-v1's shape.

use std::time::{Duration, Instant};

use ratewire_e2e::{eventually, Board, Stack};
use serde_json::Value;

const VISIBLE_WITHIN: Duration = Duration::from_secs(10);

async fn rates_for(stack: &Stack, key: &str, bank_id: i64, query: &str) -> anyhow::Result<Value> {
    eventually(
        "the bank's board on /api/v1/rates",
        VISIBLE_WITHIN,
        || async {
            let (status, body) = stack
                .get(&format!("/api/v1/rates?bankId={bank_id}{query}"), Some(key))
                .await
                .ok()?;
            let rates = &body["data"][0]["data"][0]["exchangeRates"];
            (status == 200 && rates.as_array().is_some_and(|r| !r.is_empty())).then_some(body)
        },
    )
    .await
}

#[tokio::test]
async fn a_board_pushed_over_http_is_served_by_the_api_in_the_spec_shape() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let bank = stack
        .register_bank("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let token = stack.publisher_token(bank).await?;
    let key = stack.api_key("e2e").await?;

    let pushed = Instant::now();
    let (status, accepted) = stack
        .publish_board(
            bank,
            &token,
            Board::at("2026-11-20T08:00:00Z")
                .rate("USD", "155.10", "158.2")
                .transactional("USD", "155.0", "158.0"),
        )
        .await?;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["status"], 202);
    assert_eq!(accepted["message"], "Accepted");
    assert!(accepted["eventId"].is_string());

    let body = rates_for(&stack, &key, bank, "&transactional=true&socialLinks=true").await?;
    eprintln!("publish-to-visible: {:?}", pushed.elapsed());
    assert_eq!(body["message"], "Success");
    assert_eq!(body["status"], 200);
    let inner = &body["data"][0];
    assert_eq!(inner["message"], "success");
    assert_eq!(inner["status"], 200);
    let served = &inner["data"][0];
    assert_eq!(served["id"], bank, "bank id is a number on /rates");
    assert_eq!(served["name"], "Commercial Bank of Ethiopia");
    assert_eq!(served["code"], "CBE");
    assert_eq!(served["lastRatesUpdatedAt"], "2026-11-20T08:00:00.000Z");
    assert_eq!(served["socialLinks"][0]["platform"], "telegram");
    let usd = &served["exchangeRates"][0];
    assert_eq!(usd["currency"]["symbol"], "USD");
    assert_eq!(usd["updatedAt"], "2026-11-20T08:00:00.000Z");
    assert_eq!(usd["difference"]["cashBuying"], 0);

    // The published digits arrive as they were sent: 155.10, not 155.1.
    let (_, raw) = stack
        .get_raw(
            &format!("/api/v1/rates?bankId={bank}&transactional=1"),
            Some(&key),
        )
        .await?;
    assert!(raw.contains(r#""cashBuying":155.10,"cashSelling":158.2,"transactionalBuying":155.0,"transactionalSelling":158.0"#), "{raw}");
    Ok(())
}

#[tokio::test]
async fn all_banks_are_listed_and_a_second_board_shows_the_difference() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let cbe = stack
        .register_bank("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let awash = stack.register_bank("AWASH", "Awash Bank").await?;
    let key = stack.api_key("e2e").await?;
    for (bank, buying) in [(cbe, "150.00"), (awash, "151.25")] {
        let token = stack.publisher_token(bank).await?;
        let board = Board::at("2026-11-19T08:00:00Z").rate("EUR", buying, 190);
        assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);
    }
    let token = stack.publisher_token(cbe).await?;
    let board = Board::at("2026-11-20T08:00:00Z").rate("EUR", "150.25", "189.5");
    assert_eq!(stack.publish_board(cbe, &token, &board).await?.0, 202);

    let body = eventually(
        "both banks with CBE's second board",
        VISIBLE_WITHIN,
        || async {
            let (_, body) = stack.get("/api/v1/rates", Some(&key)).await.ok()?;
            let list = body["data"].as_array()?.clone();
            let cbe_rate = &list.first()?["data"][0]["exchangeRates"][0];
            (list.len() == 2 && cbe_rate["cashBuying"] == 150.25).then_some(body)
        },
    )
    .await?;
    let list = body["data"].as_array().unwrap();
    assert_eq!(list[0]["data"][0]["code"], "CBE", "ordered by bank id");
    assert_eq!(list[1]["data"][0]["code"], "AWASH");
    let difference = &list[0]["data"][0]["exchangeRates"][0]["difference"];
    assert_eq!(difference["cashBuying"], 0.25);
    assert_eq!(difference["cashSelling"], -0.5);
    assert!(
        difference.get("transactionalBuying").is_none(),
        "transactional left out by default"
    );
    assert!(
        list[0]["data"][0].get("socialLinks").is_none(),
        "socialLinks left out by default"
    );
    Ok(())
}

#[tokio::test]
async fn rates_need_a_valid_api_key() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (status, body) = stack.get("/api/v1/rates", None).await?;
    assert_eq!(
        (status, &body["message"]),
        (401, &"API key is required".into())
    );
    assert_eq!(body["status"], 401);
    let (status, body) = stack
        .get(
            "/api/v1/rates",
            Some("rwk_notakey0_000000000000000000000000000000"),
        )
        .await?;
    assert_eq!((status, &body["message"]), (401, &"Invalid API key".into()));
    Ok(())
}

#[tokio::test]
async fn bad_parameters_and_unknown_banks_get_the_spec_errors() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("e2e").await?;
    let (status, body) = stack
        .get("/api/v1/rates?bankId=abc&socialLinks=maybe", Some(&key))
        .await?;
    assert_eq!(status, 400);
    assert_eq!(body["message"], "Validation errors occurred.");
    assert!(body["errors"]["bankId"].is_array());
    assert!(body["errors"]["socialLinks"].is_array());
    let (status, body) = stack.get("/api/v1/rates?bankId=999", Some(&key)).await?;
    assert_eq!((status, &body["message"]), (404, &"Bank not found".into()));
    Ok(())
}

#[tokio::test]
async fn views_come_back_after_redis_loses_them() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let bank = stack.register_bank("DASHEN", "Dashen Bank").await?;
    let token = stack.publisher_token(bank).await?;
    let key = stack.api_key("e2e").await?;
    let board = Board::now().rate("GBP", "200.5", "205.75");
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);
    let before = rates_for(&stack, &key, bank, "").await?;

    stack.flush_redis().await?;
    // The API answers from Postgres meanwhile (the key cache went too).
    let (status, during) = stack
        .get(&format!("/api/v1/rates?bankId={bank}"), Some(&key))
        .await?;
    assert_eq!(status, 200);
    assert_eq!(during, before);
    // And the projector puts the views back by itself.
    let prefix = stack.views_prefix().await?;
    eventually("views rebuilt in redis", VISIBLE_WITHIN, || async {
        let client = redis::Client::open("redis://127.0.0.1:6379/0").ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let exists: bool = redis::cmd("EXISTS")
            .arg(format!("{prefix}view:rates:bank:{bank}:00"))
            .query_async(&mut conn)
            .await
            .ok()?;
        exists.then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn publishers_are_authenticated_and_bound_to_their_bank() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let cbe = stack
        .register_bank("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let awash = stack.register_bank("AWASH", "Awash Bank").await?;
    let token = stack.publisher_token(cbe).await?;
    let board = Board::now().rate("USD", 1, 2);

    let (status, body) = stack.publish_board(awash, &token, &board).await?;
    assert_eq!(
        (status, body["status"].as_i64()),
        (403, Some(403)),
        "{body}"
    );
    let (status, _) = stack
        .publish_board(cbe, "rwp_wrong000_00000000000000000000000000000000", &board)
        .await?;
    assert_eq!(status, 401);
    let (status, body) = stack.publish_board(cbe, &token, r#"{"rates":[]}"#).await?;
    assert_eq!(status, 400);
    assert_eq!(body["message"], "Validation errors occurred.");
    assert!(body["errors"]["rates"].is_array());
    Ok(())
}
