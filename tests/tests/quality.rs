//! A bank's quality report: the slots its schedule expected and those it
//! missed, its boards, corrections, retractions and outliers, the spans
//! its spread was over the cap, and a score with its components; the same
//! as known at an earlier instant; every active bank, worst first; and bad
//! requests answered 400 or 404.

use std::time::Duration;

use ratewire_e2e::{Board, Stack};
use reqwest::Method;
use serde_json::{json, Value};

/// A board of USD only, as of `as_of`.
fn usd(as_of: &str, buying: &str, selling: &str) -> Board {
    Board::at(as_of).rate("USD", buying, selling)
}

/// The `data` of `path`, asked with `key`, after checking it is a 200.
async fn data(stack: &Stack, path: &str, key: &str) -> anyhow::Result<Value> {
    let (status, body) = stack.get(path, Some(key)).await?;
    anyhow::ensure!(status == 200, "{path}: {status} {body}");
    Ok(body["data"].clone())
}

/// An RFC 3339 time `seconds` from now, to the millisecond.
fn in_seconds(seconds: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(seconds))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[tokio::test]
async fn a_bank_that_misses_slots_breaches_the_cap_and_publishes_a_typo_scores_below_one_that_does_not(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("quality").await?;
    // Two banks make the market: USD at 155 / 157.
    for (code, name) in [("MKA", "Market A"), ("MKB", "Market B")] {
        let (bank, token) = stack.bank_with_token(code, name).await?;
        stack
            .push_and_wait(bank, &token, &usd(&in_seconds(-60), "155", "157"))
            .await?;
    }
    let (status, registered) = stack
        .ingest_admin(
            Method::POST,
            "/v1/admin/banks",
            Some(json!({
                "code": "WATCH",
                "name": "Watched Bank",
                "imageUrl": "https://img.test/watch.png",
                "schedule": {"every": "PT10S"},
            })),
        )
        .await?;
    assert_eq!(status, 201, "{registered}");
    let bank = registered["id"].as_i64().unwrap();
    let token = stack.publisher_token(bank).await?;

    // 3.28 % over the 2 % cap, then back within it, corrected, then a
    // tenfold typo, retracted.
    let wide = usd(&in_seconds(-4), "150", "155");
    let opened = stack.push_and_wait(bank, &token, &wide).await?;
    let within_at = in_seconds(-3);
    stack
        .push_and_wait(bank, &token, &usd(&within_at, "155", "157"))
        .await?;
    stack
        .push_and_wait(bank, &token, &usd(&within_at, "155", "157.5"))
        .await?;
    let typo = usd(&in_seconds(-2), "1550", "1575");
    let typo_id = stack.push_and_wait(bank, &token, &typo).await?["eventId"]
        .as_str()
        .unwrap()
        .to_owned();
    let response = stack
        .http()
        .delete(format!(
            "{}/v1/banks/{bank}/boards/{typo_id}",
            stack.ingest_url
        ))
        .bearer_auth(&token)
        .send()
        .await?;
    assert_eq!(response.status(), 202);

    // Silent for two whole slots of ten seconds: until the end of the
    // second slot after the one under way.
    let now = chrono::Utc::now().timestamp_millis();
    let second_slot_ends = (now / 10_000 + 3) * 10_000;
    tokio::time::sleep(Duration::from_millis((second_slot_ends - now + 200) as u64)).await;
    let report = data(&stack, &format!("/api/v1/banks/{bank}/quality"), &key).await?;
    assert_eq!(report["bankId"], bank);
    assert_eq!(report["days"], 30);
    assert_eq!(report["schedule"], json!({"every": "PT10S"}));
    let (expected, missed) = (
        report["publishesExpected"].as_u64().unwrap(),
        report["publishesMissed"].as_u64().unwrap(),
    );
    assert!(missed >= 2 && expected >= missed, "{report}");
    assert!(!report["missed"].as_array().unwrap().is_empty(), "{report}");
    assert_eq!(report["boards"], 4, "{report}");
    assert_eq!(report["corrections"], 1, "{report}");
    assert_eq!(report["retractions"], 1, "{report}");
    // Both cash values of the typo departed from 155 / 157.5 and from the market.
    assert_eq!(report["outliers"], 2, "{report}");
    assert_eq!(report["spreadCapPercent"], 2);
    let breaches = report["spreadCapBreaches"].as_array().unwrap();
    assert_eq!(breaches.len(), 1, "{report}");
    assert_eq!(breaches[0]["currencyCode"], "USD");
    assert_eq!(breaches[0]["pair"], "cash");
    assert_eq!(breaches[0]["maxSpreadPercent"], 3.2787);
    assert!(
        breaches[0]["to"].is_string(),
        "closed by the next board: {report}"
    );
    assert!(
        report["medianDelaySeconds"].is_null(),
        "not a daily schedule"
    );
    let components = &report["scoreComponents"];
    assert_eq!(
        components["plausibility"]["share"], 0.75,
        "one board in four: {report}"
    );
    assert_eq!(
        components["stability"]["share"], 0.5,
        "two revisions in four: {report}"
    );
    let points: f64 = ["publishing", "plausibility", "stability", "spreadCap"]
        .iter()
        .map(|c| components[c]["points"].as_f64().unwrap())
        .sum();
    assert_eq!(
        report["score"].as_f64().unwrap(),
        points.round(),
        "{report}"
    );

    // As known just after the wide board: the breach open, one board.
    let (_, board) = stack
        .get(
            &format!("/api/v1/boards/{}", opened["eventId"].as_str().unwrap()),
            Some(&key),
        )
        .await?;
    let known_at = board["data"]["knownAt"].as_str().unwrap().to_owned();
    let then = data(
        &stack,
        &format!("/api/v1/banks/{bank}/quality?days=1&asKnownAt={known_at}"),
        &key,
    )
    .await?;
    assert_eq!(then["boards"], 1, "{then}");
    assert_eq!(then["to"], known_at);
    assert!(
        then["spreadCapBreaches"][0]["to"].is_null(),
        "open then: {then}"
    );

    // Every active bank, the watched one first.
    let all = data(&stack, "/api/v1/quality?days=7", &key).await?;
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0]["bankId"], bank);
    assert_eq!(all[1]["score"], 100, "{all:?}");

    // Bad requests, and a bank never registered.
    for bad in ["days=0", "days=91", "days=seven", "asKnownAt=yesterday"] {
        let (status, body) = stack
            .get(&format!("/api/v1/banks/{bank}/quality?{bad}"), Some(&key))
            .await?;
        assert_eq!(status, 400, "{bad}: {body}");
        let name = bad.split('=').next().unwrap();
        assert!(body["errors"][name].is_array(), "{bad}: {body}");
    }
    let (status, body) = stack.get("/api/v1/banks/abc/quality", Some(&key)).await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"]["id"].is_array(), "{body}");
    let (status, body) = stack
        .get("/api/v1/banks/999999/quality", Some(&key))
        .await?;
    assert_eq!((status, &body["message"]), (404, &json!("Bank not found")));
    Ok(())
}
