//! Alerts under faults: projectors killed mid-stream and a replay of the
//! whole log neither lose a crossing nor send one twice (each crossing's
//! `webhook-id` comes from its alert and its board, and is recorded with
//! the board's effects).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use chrono::{SubsecRound, Utc};
use ratewire_e2e::receiver::Receiver;
use ratewire_e2e::{eventually, Stack, VISIBLE_WITHIN};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

fn board(minutes: i64, buying: f64, selling: f64) -> String {
    let as_of = (Utc::now() - chrono::Duration::minutes(minutes)).trunc_subsecs(3);
    format!(
        r#"{{"asOf":"{}","rates":[{{"currency":"USD","cashBuying":{buying},"cashSelling":{selling}}}]}}"#,
        as_of.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

fn crossing_id(alert: &str, event: &str) -> String {
    let digest = Sha256::digest(format!("{alert}:{event}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("msg_{}", &hex[..32])
}

async fn create(stack: &Stack, key: &str, path: &str, body: Value) -> Result<String> {
    let response = stack
        .http()
        .post(format!("{}{path}", stack.api_url))
        .header("x-api-key", key)
        .json(&body)
        .send()
        .await?;
    let status = response.status();
    let body: Value = response.json().await?;
    ensure!(status == 201, "{path}: {status} {body}");
    Ok(body["data"]["id"].as_str().context("id")?.to_owned())
}

/// The crossings an alert sees over `values` (its watched value after
/// each event), starting not known: the indexes that fire.
fn crossings(values: &[f64], holds: impl Fn(f64) -> bool) -> Vec<usize> {
    let mut was = None;
    let mut fired = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let now = holds(*value);
        if now && was != Some(true) {
            fired.push(i);
        }
        was = Some(now);
    }
    fired
}

#[tokio::test]
async fn killed_projectors_and_a_replay_neither_lose_nor_repeat_a_crossing() -> Result<()> {
    let mut stack = Stack::start().await?;
    let key = stack.api_key("faults").await?;
    let (cbe, cbe_token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    let receiver = Receiver::start().await?;
    let hook = create(
        &stack,
        &key,
        "/api/v1/webhooks",
        json!({"url": receiver.url()}),
    )
    .await?;
    stack
        .publish_board(cbe, &cbe_token, &board(200, 150.0, 160.0))
        .await?;
    stack
        .publish_board(awash, &awash_token, &board(200, 150.0, 160.0))
        .await?;
    stack.wait_applied(4, VISIBLE_WITHIN).await?;
    // CBE's buying above 150; the best (lowest) selling below 158.
    let on_cbe = create(
        &stack,
        &key,
        "/api/v1/alerts",
        json!({"webhookId": hook, "currencyCode": "USD", "field": "cashBuying",
               "condition": "above", "threshold": 150, "bankId": cbe}),
    )
    .await?;
    let on_best = create(
        &stack,
        &key,
        "/api/v1/alerts",
        json!({"webhookId": hook, "currencyCode": "USD", "field": "cashSelling",
               "condition": "below", "threshold": 158}),
    )
    .await?;

    // 40 boards, the banks in turn, two projector kills among them.
    const BOARDS: usize = 40;
    let cbe_buying = [151.0, 152.0, 145.0, 153.0, 140.0];
    let cbe_selling = [157.5, 159.0, 158.5, 157.0, 160.0];
    // Awash's selling never leads: banks' boards are ordered within a bank
    // (a partition), not across banks, so the best rate's sequence is
    // only certain when one bank moves it.
    let awash_selling = [160.0, 161.0, 160.5, 162.0];
    let (mut cbe_values, mut best_values) = (Vec::new(), Vec::new());
    let (mut cbe_events, mut all_events) = (Vec::new(), Vec::new());
    let (mut cbe_sell, mut awash_sell) = (160.0f64, 160.0f64);
    for i in 0..BOARDS {
        let minutes = 150 - i as i64;
        let (bank, token, text) = if i % 2 == 0 {
            let j = i / 2;
            cbe_sell = cbe_selling[j % 5];
            (cbe, &cbe_token, board(minutes, cbe_buying[j % 5], cbe_sell))
        } else {
            let k = i / 2;
            awash_sell = awash_selling[k % 4];
            (awash, &awash_token, board(minutes, 150.0, awash_sell))
        };
        let (status, answer) = stack.publish_board(bank, token, &text).await?;
        ensure!(status == 202, "{answer}");
        let event = answer["eventId"].as_str().context("eventId")?.to_owned();
        if bank == cbe {
            cbe_values.push(cbe_buying[(i / 2) % 5]);
            cbe_events.push(event.clone());
        }
        best_values.push(cbe_sell.min(awash_sell));
        all_events.push(event);
        if i == 13 || i == 27 {
            stack.kill("ratewire-projector")?;
            stack.start_process("ratewire-projector")?;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut expected = BTreeSet::new();
    for i in crossings(&cbe_values, |v| v > 150.0) {
        expected.insert(crossing_id(&on_cbe, &cbe_events[i]));
    }
    for i in crossings(&best_values, |v| v < 158.0) {
        expected.insert(crossing_id(&on_best, &all_events[i]));
    }
    ensure!(
        expected.len() >= 10,
        "the sequence crosses often: {}",
        expected.len()
    );
    stack
        .wait_applied(4 + BOARDS as i64, Duration::from_secs(60))
        .await?;
    let distinct = |receiver: &Receiver| -> BTreeSet<String> {
        receiver
            .received()
            .iter()
            .map(|r| r.id().to_owned())
            .collect()
    };
    eventually(
        "every crossing delivered",
        Duration::from_secs(30),
        || async { (distinct(&receiver).len() >= expected.len()).then_some(()) },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(distinct(&receiver), expected, "one message per crossing");
    let recorded = stack
        .sql_number("SELECT count(*) FROM alerts.deliveries")
        .await?
        .unwrap_or_default();
    assert_eq!(recorded as usize, expected.len());

    // A replay folds the log again from offset zero: nothing new is sent.
    let replay = stack
        .run(
            "ratewire-projector",
            &["replay", "--schema", "readmodel_v2"],
            &[],
        )
        .await?;
    ensure!(
        replay.status.success(),
        "replay: {}",
        String::from_utf8_lossy(&replay.stderr)
    );
    // After the switch, a new crossing is sent once.
    let last_cbe = *cbe_values.last().unwrap();
    let mut extra = 0;
    if last_cbe > 150.0 {
        stack
            .publish_board(cbe, &cbe_token, &board(5, 140.0, 160.0))
            .await?;
        extra += 1;
    }
    let (_, answer) = stack
        .publish_board(cbe, &cbe_token, &board(4, 155.0, 160.0))
        .await?;
    extra += 1;
    let crossing = crossing_id(&on_cbe, answer["eventId"].as_str().unwrap());
    stack
        .wait_applied(4 + BOARDS as i64 + extra, Duration::from_secs(30))
        .await?;
    eventually("the crossing after the replay", VISIBLE_WITHIN, || async {
        distinct(&receiver).contains(&crossing).then_some(())
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut after = expected.clone();
    after.insert(crossing);
    assert_eq!(distinct(&receiver), after);
    let recorded = stack
        .sql_number("SELECT count(*) FROM alerts.deliveries")
        .await?
        .unwrap_or_default();
    assert_eq!(recorded as usize, after.len());
    Ok(())
}
