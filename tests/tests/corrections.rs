//! Corrections: a bank publishes a wrong board (1550 for 155.0 passes every
//! rule of ingest; best-rates sets it aside as an outlier), retracts it, and every reader answers as if it had never been
//! published, across a projector restart and a replay. Dead letters can
//! be looked at and applied after all once what they lacked exists.

use std::time::Duration;

use chrono::Utc;
use ratewire_e2e::{ago, eventually, Board, Stack, ADMIN_TOKEN, VISIBLE_WITHIN};
use serde_json::Value;

/// A board of USD only, as of `as_of`.
fn usd(as_of: &str, buying: &str, selling: &str) -> Board {
    Board::at(as_of).rate("USD", buying, selling)
}

/// Retracts `board` of `bank` with `token`; the status and body.
async fn retract(
    stack: &Stack,
    bank: i64,
    token: &str,
    board: &str,
    reason: Option<&str>,
) -> anyhow::Result<(u16, Value)> {
    let mut request = stack
        .http()
        .delete(format!(
            "{}/v1/banks/{bank}/boards/{board}",
            stack.ingest_url
        ))
        .bearer_auth(token);
    if let Some(reason) = reason {
        request = request
            .header("content-type", "application/json")
            .body(serde_json::json!({ "reason": reason }).to_string());
    }
    let response = request.send().await?;
    Ok((response.status().as_u16(), response.json().await?))
}

/// What the readers say of the bank's USD: /rates buying and difference,
/// best cash buying, and /history of today.
async fn usd_as_served(stack: &Stack, bank: i64, key: &str) -> anyhow::Result<Value> {
    let (_, rates) = stack
        .get(&format!("/api/v1/rates?bankId={bank}"), Some(key))
        .await?;
    let rate = &rates["data"][0]["data"][0]["exchangeRates"][0];
    let (_, best) = stack
        .get("/api/v1/rates/best-rates?currencyCode=USD", Some(key))
        .await?;
    let today = Utc::now().date_naive();
    let (_, history) = stack
        .get(
            &format!("/api/v1/history?bankId={bank}&date={today}"),
            Some(key),
        )
        .await?;
    Ok(serde_json::json!({
        "rate": rate["cashBuying"],
        "difference": rate["difference"]["cashBuying"],
        "best": best["data"]["cashBuying"]["price"],
        "history": history["data"]["cashBuying"],
    }))
}

async fn wait_usd(stack: &Stack, bank: i64, key: &str, expected: Value) -> anyhow::Result<()> {
    let seen = eventually("the readers agree", VISIBLE_WITHIN, || async {
        let seen = usd_as_served(stack, bank, key).await.ok()?;
        (seen == expected).then_some(())
    })
    .await;
    if seen.is_err() {
        anyhow::bail!(
            "expected {expected}, served {}",
            usd_as_served(stack, bank, key).await?
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_retracted_board_is_as_if_never_published_across_a_restart_and_a_replay(
) -> anyhow::Result<()> {
    let mut stack = Stack::start().await?;
    let key = stack.api_key("corrections").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let (other, other_token) = stack.bank_with_token("AWASH", "Awash").await?;
    let first = usd(&ago(0, 3), "155.0", "158");
    assert_eq!(stack.publish_board(bank, &token, &first).await?.0, 202);
    let (status, typo) = stack
        .publish_board(bank, &token, usd(&ago(0, 2), "1550", "1580"))
        .await?;
    assert_eq!(status, 202);
    let typo = typo["eventId"].as_str().unwrap().to_owned();
    // Ten times its previous value: an outlier, which best-rates leaves out
    // (docs/api.md); no other bank quotes USD, so it has no best buying.
    let typo_view =
        serde_json::json!({"rate": 1550, "difference": 1395.0, "best": null, "history": 1550});
    wait_usd(&stack, bank, &key, typo_view).await?;

    // Not another bank's, not a made-up one, not malformed.
    assert_eq!(
        retract(&stack, bank, &other_token, &typo, None).await?.0,
        403
    );
    assert_eq!(
        retract(&stack, other, &other_token, &typo, None).await?.0,
        404
    );
    let made_up = uuid::Uuid::now_v7().to_string();
    assert_eq!(retract(&stack, bank, &token, &made_up, None).await?.0, 404);
    let (status, body) = retract(&stack, bank, &token, "not-a-uuid", None).await?;
    assert_eq!((status, body["errors"]["eventId"].is_array()), (400, true));

    let (status, first_answer) =
        retract(&stack, bank, &token, &typo, Some("a typo: 1550 for 155.0")).await?;
    assert_eq!(status, 202, "{first_answer}");
    let (status, again) = retract(&stack, bank, &token, &typo, None).await?;
    assert_eq!(
        (status, &again["eventId"]),
        (202, &first_answer["eventId"]),
        "retracting twice is one retraction"
    );
    let corrected =
        serde_json::json!({"rate": 155.0, "difference": 0, "best": 155.0, "history": 155.0});
    wait_usd(&stack, bank, &key, corrected.clone()).await?;

    // While the projector is down, a new board and its retraction by the
    // operator: on restart, the earlier board is still the one in force.
    stack.kill("ratewire-projector")?;
    let (status, second_typo) = stack
        .publish_board(bank, &token, usd(&ago(0, 1), "15.5", "15.8"))
        .await?;
    assert_eq!(status, 202);
    let operator = stack
        .http()
        .delete(format!(
            "{}/v1/admin/banks/{bank}/boards/{}",
            stack.ingest_operator_url,
            second_typo["eventId"].as_str().unwrap()
        ))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await?;
    assert_eq!(operator.status().as_u16(), 202);
    stack.start_process("ratewire-projector")?;
    // Two registrations, three boards and two retractions, all applied.
    stack
        .wait_applied(2 + 3 + 2, Duration::from_secs(60))
        .await?;
    wait_usd(&stack, bank, &key, corrected).await?;

    let retracted = stack
        .sql_number("SELECT count(*) FROM readmodel.retracted_boards")
        .await?;
    assert_eq!(retracted, Some(2));
    stack.assert_fold_matches_replay().await?;
    Ok(())
}

#[tokio::test]
async fn dead_letters_are_listed_shown_and_applied_after_all() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("letters").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    assert_eq!(
        stack
            .publish_board(bank, &token, usd(&ago(0, 2), "155", "158"))
            .await?
            .0,
        202
    );
    stack
        .wait_served("the first bank", bank, &key, "155")
        .await?;

    // A board of the next bank to be registered, on the log before it is:
    // the projector cannot apply it yet.
    let next = bank + 1;
    let envelope = format!(
        r#"{{"eventId":"{}","type":"BoardPublished","version":1,"bankId":{next},"occurredAt":"{}","payload":{{"asOf":"{}","rates":[{{"currency":"USD","cashBuying":"149","cashSelling":"151"}}]}}}}"#,
        uuid::Uuid::now_v7(),
        Utc::now().to_rfc3339(),
        ago(0, 1)
    );
    let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", stack.kafka_brokers())
        .create()?;
    producer
        .send(
            rdkafka::producer::FutureRecord::to(&stack.topic)
                .key(&next.to_string())
                .payload(&envelope),
            Duration::from_secs(5),
        )
        .await
        .map_err(|(e, _)| e)?;
    stack
        .wait_count(
            "the board dead-lettered",
            "SELECT count(*) FROM readmodel.dead_letters WHERE rule = 'unknown-bank'",
            1,
            VISIBLE_WITHIN,
        )
        .await?;

    let cli = |args: &'static [&'static str]| stack.run("ratewire-projector", args, &[]);
    let listed = cli(&["dead-letters", "list", "--rule", "unknown-bank"]).await?;
    let listed = String::from_utf8(listed.stdout)?;
    let letter: Value = serde_json::from_str(listed.lines().next().unwrap_or("{}"))?;
    assert_eq!(letter["rule"], "unknown-bank", "{listed}");
    let id = letter["id"].as_i64().unwrap().to_string();
    let shown = stack
        .run("ratewire-projector", &["dead-letters", "show", &id], &[])
        .await?;
    let shown: Value = serde_json::from_slice(&shown.stdout)?;
    assert_eq!(shown["key"], next.to_string());
    assert_eq!(shown["payload"]["payload"]["rates"][0]["cashBuying"], "149");
    assert!(cli(&["dead-letters", "list", "--rule", "as-of"])
        .await?
        .stdout
        .is_empty());

    // The fix: the bank registered. Re-driven, the board is served.
    let (registered, _) = stack.bank_with_token("DASHEN", "Dashen").await?;
    assert_eq!(registered, next);
    // Registered on the log; re-driven before the projector has folded the
    // registration, the board would be refused again, rightly.
    stack
        .wait_count(
            "the registration folded",
            &format!("SELECT count(*) FROM readmodel.banks WHERE id = {next}"),
            1,
            VISIBLE_WITHIN,
        )
        .await?;
    let redriven = cli(&["dead-letters", "redrive", "--all", "--rule", "unknown-bank"]).await?;
    assert!(redriven.status.success(), "{redriven:?}");
    let outcome: Value = serde_json::from_slice(&redriven.stdout)?;
    assert_eq!(outcome["outcome"], "applied");
    stack
        .wait_served("the re-driven board", next, &key, "149")
        .await?;
    let (_, best) = stack
        .get("/api/v1/rates/best-rates?currencyCode=USD", Some(&key))
        .await?;
    assert_eq!(best["data"]["cashSelling"]["price"], 151);

    // Exactly once: nothing left to re-drive, and the letter is kept as
    // re-driven.
    let again = cli(&["dead-letters", "redrive", "--all"]).await?;
    assert!(again.stdout.is_empty(), "{again:?}");
    let all = cli(&["dead-letters", "list", "--all"]).await?;
    let all: Value = serde_json::from_str(String::from_utf8(all.stdout)?.trim())?;
    assert_eq!(all["resolution"], "redriven");
    let applied = stack
        .sql_number(&format!(
            "SELECT count(*) FROM readmodel.rates WHERE bank_id = {next}"
        ))
        .await?;
    assert_eq!(applied, Some(1));
    Ok(())
}
