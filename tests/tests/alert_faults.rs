//! Alerts under faults: projectors killed mid-stream and a replay of the
//! whole log neither lose a crossing nor send one twice (each crossing's
//! `webhook-id` comes from its alert and its board, and is recorded with
//! the board's effects).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use ratewire_e2e::receiver::{crossing_id, Receiver};
use ratewire_e2e::{eventually, minutes_ago, Board, Stack, VISIBLE_WITHIN};
use serde_json::json;

fn board(minutes: i64, buying: f64, selling: f64) -> Board {
    Board::at(minutes_ago(minutes)).rate("USD", buying, selling)
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

/// Waits until every crossing is made into its messages (they are then
/// all there will be) and the receiver has had each of them: a message a
/// killed projector had claimed is sent again, with its id, once its lease
/// ends.
async fn received_every_message(stack: &Stack, receiver: &Receiver) -> Result<()> {
    stack.wait_crossings_made(Duration::from_secs(30)).await?;
    let messages = stack.message_ids().await?;
    let received = || -> BTreeSet<String> {
        receiver
            .received()
            .iter()
            .map(|r| r.id().to_owned())
            .collect()
    };
    let all = eventually(
        "every message received",
        Duration::from_secs(30),
        || async { received().is_superset(&messages).then_some(()) },
    )
    .await;
    if all.is_err() {
        let got = received();
        let missing: Vec<&String> = messages.difference(&got).collect();
        let states = stack.message_states(&missing).await?;
        anyhow::bail!("messages never received: {states:#?}");
    }
    Ok(())
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
    let (hook, _) = stack.webhook(&key, &receiver.url()).await?;
    stack
        .publish_board(cbe, &cbe_token, board(200, 150.0, 160.0))
        .await?;
    stack
        .publish_board(awash, &awash_token, board(200, 150.0, 160.0))
        .await?;
    stack.wait_applied(4, VISIBLE_WITHIN).await?;
    // CBE's buying above 150; the best (lowest) selling below 158.
    let on_cbe = stack
        .alert(
            &key,
            json!({"webhookId": hook, "currencyCode": "USD", "field": "cashBuying",
               "condition": "above", "threshold": 150, "bankId": cbe}),
        )
        .await?;
    let on_best = stack
        .alert(
            &key,
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
        // Killed as it folds this board: every board before it folded and
        // its calls made, so a crash finds the fold at work and no call in
        // flight (one would wait out its lease, a minute, to be sent again).
        let kill = i == 13 || i == 27;
        if kill {
            stack.wait_applied(4 + i as i64, VISIBLE_WITHIN).await?;
            stack.wait_calls_settled(VISIBLE_WITHIN).await?;
        }
        let (status, answer) = stack.publish_board(bank, token, text).await?;
        ensure!(status == 202, "{answer}");
        let event = answer["eventId"].as_str().context("eventId")?.to_owned();
        if bank == cbe {
            cbe_values.push(cbe_buying[(i / 2) % 5]);
            cbe_events.push(event.clone());
        }
        best_values.push(cbe_sell.min(awash_sell));
        all_events.push(event);
        if kill {
            stack.kill("ratewire-projector")?;
            stack.start_process("ratewire-projector")?;
        }
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
    received_every_message(&stack, &receiver).await?;
    assert_eq!(distinct(&receiver), expected, "one message per crossing");
    let recorded = stack
        .sql_number("SELECT count(*) FROM alerts.deliveries")
        .await?
        .unwrap_or_default();
    assert_eq!(recorded as usize, expected.len());

    // A replay folds the log again from offset zero: nothing new is sent.
    stack.replay(&["--schema", "readmodel_v2"]).await?;
    // After the switch, a new crossing is sent once.
    let last_cbe = *cbe_values.last().unwrap();
    let mut extra = 0;
    if last_cbe > 150.0 {
        stack
            .publish_board(cbe, &cbe_token, board(5, 140.0, 160.0))
            .await?;
        extra += 1;
    }
    let (_, answer) = stack
        .publish_board(cbe, &cbe_token, board(4, 155.0, 160.0))
        .await?;
    extra += 1;
    let crossing = crossing_id(&on_cbe, answer["eventId"].as_str().unwrap());
    stack
        .wait_applied(4 + BOARDS as i64 + extra, Duration::from_secs(30))
        .await?;
    received_every_message(&stack, &receiver).await?;
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
