//! The publisher contract of ingest (decisions.md "Publishers").

use ratewire_e2e::{eventually, Board, Stack, VISIBLE_WITHIN};
use serde_json::Value;

/// How many boards of `bank` the projector holds.
async fn boards(stack: &Stack, bank: i64) -> Option<i64> {
    stack
        .sql_number(&format!(
            "SELECT count(*) FROM readmodel.boards WHERE bank_id = {bank}"
        ))
        .await
        .ok()?
}

#[tokio::test]
async fn a_retried_push_with_the_same_idempotency_key_publishes_once() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    // No asOf: were it published twice, the two receipt times would make two boards.
    let board = Board::now().rate("USD", "155.1", 158);
    let (first_status, first) = stack
        .publish_keyed(bank, &token, Some("push-1"), &board)
        .await?;
    let (second_status, second) = stack
        .publish_keyed(bank, &token, Some("push-1"), &board)
        .await?;
    assert_eq!((first_status, second_status), (202, 202));
    assert_eq!(
        first["eventId"], second["eventId"],
        "the retry gets the first answer"
    );

    // A later board of the same bank lands on the same partition after
    // anything published before it: once it is folded, so is everything else.
    let sentinel = Board::now().rate("EUR", 180, 184);
    assert_eq!(stack.publish_board(bank, &token, sentinel).await?.0, 202);
    stack
        .wait_count(
            "the sentinel folded",
            &format!(
                "SELECT count(*) FROM readmodel.rates WHERE bank_id = {bank} AND currency = 'EUR'"
            ),
            1,
            VISIBLE_WITHIN,
        )
        .await?;
    assert_eq!(
        boards(&stack, bank).await,
        Some(2),
        "one keyed board and the sentinel"
    );
    Ok(())
}

#[tokio::test]
async fn the_same_key_with_another_body_is_422_and_publishes_nothing() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let board = Board::now().rate("USD", "155.1", 158);
    assert_eq!(
        stack.publish_keyed(bank, &token, Some("k"), board).await?.0,
        202
    );
    let other = Board::now().rate("USD", "155.2", 158);
    let (status, body) = stack.publish_keyed(bank, &token, Some("k"), other).await?;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["status"], 422);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("different board"));
    Ok(())
}

#[tokio::test]
async fn a_retry_of_the_same_board_written_otherwise_gets_the_first_answer() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let first = r#"{"asOf":"2026-11-20T08:00:00Z","rates":[{"currency":"USD","cashBuying":155.10,"cashSelling":158},{"currency":"EUR","cashBuying":180,"cashSelling":184}]}"#;
    // The same board: other whitespace, field and entry order, the
    // currency's case, the time in another offset.
    let reformatted = r#"{
        "rates": [
            {"cashSelling": 184, "cashBuying": 180, "currency": "eur"},
            {"currency": "USD", "cashBuying": 155.10, "cashSelling": 158}
        ],
        "asOf": "2026-11-20T11:00:00+03:00"
    }"#;
    let (status, answer) = stack
        .publish_keyed(bank, &token, Some("same-board"), first)
        .await?;
    assert_eq!(status, 202, "{answer}");
    let (status, again) = stack
        .publish_keyed(bank, &token, Some("same-board"), reformatted)
        .await?;
    assert_eq!(status, 202, "{again}");
    assert_eq!(again["eventId"], answer["eventId"]);
    // Other digits are another board: 155.1 is not the 155.10 published.
    let (status, body) = stack
        .publish_keyed(
            bank,
            &token,
            Some("same-board"),
            first.replace("155.10", "155.1"),
        )
        .await?;
    assert_eq!(status, 422, "{body}");
    Ok(())
}

#[tokio::test]
async fn a_rejected_board_does_not_use_up_its_key() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let bad = Board::now().rate("USD", 160, 158);
    let (status, body) = stack
        .publish_keyed(bank, &token, Some("fix-me"), bad)
        .await?;
    assert_eq!(status, 400, "{body}");
    let fixed = Board::now().rate("USD", 155, 158);
    assert_eq!(
        stack
            .publish_keyed(bank, &token, Some("fix-me"), &fixed)
            .await?
            .0,
        202
    );
    let (status, _) = stack
        .publish_keyed(bank, &token, Some(&"x".repeat(201)), &fixed)
        .await?;
    assert_eq!(status, 400, "keys are at most 200 characters");
    Ok(())
}

#[tokio::test]
async fn with_the_broker_unresponsive_pushes_get_503_quickly_and_succeed_when_it_returns(
) -> anyhow::Result<()> {
    use std::time::{Duration, Instant};

    let stack = Stack::builder()
        .own_broker()
        .env("RATEWIRE_PUBLISH_TIMEOUT_MS", "2000")
        .start()
        .await?;
    let key = stack.api_key("outage").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let first = Board::now().rate("USD", "155.1", 158);
    assert_eq!(stack.publish_board(bank, &token, first).await?.0, 202);

    // A hung broker: connections stay open, nothing is answered.
    stack.pause_broker(true)?;
    let board = Board::at("2026-11-20T08:00:00Z").rate("USD", "156.5", 158);
    let started = Instant::now();
    let response = stack
        .http()
        .post(format!("{}/v1/banks/{bank}/boards", stack.ingest_url))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("idempotency-key", "during-outage")
        .body(board.body())
        .send()
        .await?;
    let waited = started.elapsed();
    assert_eq!(response.status(), 503);
    assert!(
        waited < Duration::from_secs(4),
        "answered at the publish timeout: {waited:?}"
    );
    assert!(response.headers().get("retry-after").is_some());
    let body: Value = response.json().await?;
    assert_eq!(body["status"], 503);
    let ready = stack
        .http()
        .get(format!("{}/readyz", stack.ingest_url))
        .send()
        .await?;
    assert_eq!(ready.status(), 503, "ingest reports the broker on /readyz");

    stack.pause_broker(false)?;
    // The client retries with the same key until the broker answers again.
    let event_id = eventually(
        "the push accepted again",
        Duration::from_secs(30),
        || async {
            let (status, body) = stack
                .publish_keyed(bank, &token, Some("during-outage"), &board)
                .await
                .ok()?;
            (status == 202).then(|| body["eventId"].clone())
        },
    )
    .await?;
    let (status, again) = stack
        .publish_keyed(bank, &token, Some("during-outage"), &board)
        .await?;
    assert_eq!(
        (status, &again["eventId"]),
        (202, &event_id),
        "answered from the record"
    );
    eventually(
        "the board through the whole pipeline",
        Duration::from_secs(30),
        || async {
            let (_, body) = stack
                .get(
                    &format!("/api/v1/history?bankId={bank}&date=2026-11-20"),
                    Some(&key),
                )
                .await
                .ok()?;
            (body["data"]["cashBuying"] == 156.5).then_some(())
        },
    )
    .await?;
    // Published once: the outage attempt and the retries share one event id.
    let copies = stack
        .sql_number(&format!("SELECT count(*) FROM readmodel.boards WHERE bank_id = {bank} AND as_of = '2026-11-20T08:00:00Z'"))
        .await?;
    assert_eq!(copies, Some(1));
    Ok(())
}

#[tokio::test]
async fn bad_bodies_are_refused_in_the_spec_format_and_publish_nothing() -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_INGEST_BODY_LIMIT", "4096")
        .start()
        .await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let url = format!("{}/v1/banks/{bank}/boards", stack.ingest_url);

    let wrong_type = stack
        .http()
        .post(&url)
        .bearer_auth(&token)
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await?;
    assert_eq!(wrong_type.status(), 415);
    let body: Value = wrong_type.json().await?;
    assert_eq!(body["status"], 415);

    let huge = format!(
        r#"{{"rates":[{}]}}"#,
        vec![r#"{"currency":"USD","cashBuying":1,"cashSelling":2}"#; 200].join(",")
    );
    let too_large = stack
        .http()
        .post(&url)
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await?;
    assert_eq!(too_large.status(), 413);
    assert_eq!(too_large.json::<Value>().await?["status"], 413);

    for malformed in [
        "",
        "{",
        "not json",
        "[]",
        r#"{"rates":"USD"}"#,
        r#"{"rates":[{"currency":"USD","cashBuying":1"#,
    ] {
        let (status, body) = stack.publish_board(bank, &token, malformed).await?;
        assert_eq!(status, 400, "{malformed:?}: {body}");
        assert_eq!(body["message"], "Validation errors occurred.");
        assert!(body["errors"].is_object());
    }

    // A misspelt field is refused by name, never ignored (the board would
    // otherwise be stored at the current time, its transactional rate lost).
    let misspelt = r#"{"asof":"2026-11-19T00:00:00Z","rates":[{"currency":"USD","cashBuying":1,"cashSelling":2,"transactionalbuying":1}]}"#;
    let (status, body) = stack.publish_board(bank, &token, misspelt).await?;
    assert_eq!(status, 400, "{body}");
    let named: Vec<&String> = body["errors"].as_object().unwrap().keys().collect();
    assert_eq!(named, ["asof", "rates[0].transactionalbuying"], "{body}");

    // Random bodies, valid and not, small and huge, never get a 5xx, and only
    // valid ones publish.
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(6);
    let pieces = [
        r#"{"currency":"USD","cashBuying":1,"cashSelling":2}"#,
        r#"{"currency":"EUR","cashBuying":3.5,"cashSelling":3.25}"#,
        r#"{"currency":"QQQ","cashBuying":1,"cashSelling":2}"#,
        r#"{"currency":"GBP","cashBuying":-1,"cashSelling":2}"#,
        r#"{"currency":"JPY","cashBuying":1e999,"cashSelling":2}"#,
        r#"{"currency":"CHF","cashBuying":1,"cashSelling":2,"transactionalBuying":1}"#,
        r#"{"currency":"USD"}"#,
        r#"null"#,
    ];
    let mut accepted = 0;
    for _ in 0..60 {
        let n = rng.gen_range(0..4);
        let entries: Vec<&str> = (0..n)
            .map(|_| pieces[rng.gen_range(0..pieces.len())])
            .collect();
        let mut body = format!(r#"{{"rates":[{}]}}"#, entries.join(","));
        if rng.gen_bool(0.2) {
            body.truncate(rng.gen_range(0..body.len().max(1)));
        }
        if rng.gen_bool(0.1) {
            // Huge: over the entry limit, or over the body limit.
            let many = vec![pieces[rng.gen_range(0..pieces.len())]; rng.gen_range(400..8000)];
            body = format!(r#"{{"rates":[{}]}}"#, many.join(","));
        }
        let (status, answer) = stack.publish_board(bank, &token, &body).await?;
        assert!(
            [202, 400, 413].contains(&status),
            "{body:?} -> {status} {answer}"
        );
        accepted += usize::from(status == 202);
    }
    // Nothing refused reached the read model: only the accepted boards did.
    let sentinel = Board::now().rate("AED", 42, 43);
    assert_eq!(stack.publish_board(bank, &token, sentinel).await?.0, 202);
    stack
        .wait_count(
            "the sentinel folded",
            &format!(
                "SELECT count(*) FROM readmodel.rates WHERE bank_id = {bank} AND currency = 'AED'"
            ),
            1,
            VISIBLE_WITHIN,
        )
        .await?;
    let dead = stack
        .sql_number("SELECT count(*) FROM readmodel.dead_letters")
        .await?;
    assert_eq!(dead, Some(0));
    assert_eq!(
        boards(&stack, bank).await,
        Some(accepted as i64 + 1),
        "{accepted} accepted boards and the sentinel"
    );
    Ok(())
}
