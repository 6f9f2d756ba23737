//! The market watchdog's webhooks: a webhook that names
//! `quality.spread_cap_breached` and `quality.publication_missed` gets one
//! message when a pair goes over the spread cap (none while it stays over,
//! one more when it goes over again), and one when a bank begins missing
//! its schedule's slots (none while the silence lasts), each once across a
//! projector killed and started again.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use ratewire_e2e::receiver::{Received, Receiver};
use ratewire_e2e::{eventually, Board, Stack, VISIBLE_WITHIN};
use reqwest::Method;
use serde_json::{json, Value};

/// A board of USD only, as of `seconds` ago.
fn usd(seconds: i64, buying: &str, selling: &str) -> Board {
    let as_of = chrono::Utc::now() - chrono::Duration::seconds(seconds);
    Board::at(as_of.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .rate("USD", buying, selling)
}

/// The messages of `kind` received, each id once with its body.
fn of_kind(received: &[Received], kind: &str) -> Vec<(String, Value)> {
    let mut seen = BTreeSet::new();
    received
        .iter()
        .map(|r| (r.id().to_owned(), r.json()))
        .filter(|(_, body)| body["type"] == kind)
        .filter(|(id, _)| seen.insert(id.clone()))
        .collect()
}

#[tokio::test]
async fn breaches_and_missed_publications_are_each_told_once_across_a_projector_kill() -> Result<()>
{
    let mut stack = Stack::start().await?;
    let key = stack.api_key("watchdog").await?;
    let receiver = Receiver::start().await?;
    let (status, created) = stack
        .post(
            "/api/v1/webhooks",
            &key,
            json!({"url": receiver.url(),
                   "events": ["quality.spread_cap_breached", "quality.publication_missed"]}),
        )
        .await?;
    ensure!(status == 201, "{created}");
    assert_eq!(
        created["data"]["events"],
        json!(["quality.spread_cap_breached", "quality.publication_missed"])
    );
    let (status, refused) = stack
        .post(
            "/api/v1/webhooks",
            &key,
            json!({"url": receiver.url(), "events": ["quality.nothing"]}),
        )
        .await?;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["errors"]["events"].is_array(), "{refused}");

    let (status, registered) = stack
        .ingest_admin(
            Method::POST,
            "/v1/admin/banks",
            Some(json!({
                "code": "WIDE",
                "name": "Wide Bank",
                "imageUrl": "https://img.test/wide.png",
                "schedule": {"every": "PT10S"},
            })),
        )
        .await?;
    ensure!(status == 201, "{registered}");
    let bank = registered["id"].as_i64().context("id")?;
    let token = stack.publisher_token(bank).await?;

    // Within the cap, over it (told), still over (not told), within,
    // over again (told): the projector killed and started again after
    // the first breach.
    stack
        .push_and_wait(bank, &token, &usd(50, "155", "157"))
        .await?;
    let first = stack
        .push_and_wait(bank, &token, &usd(40, "150", "155"))
        .await?;
    // Killed once its call is made: a call in flight would wait out its
    // lease, a minute, to be sent again (with its id).
    receiver.wait_for(1, Duration::from_secs(30)).await?;
    stack.wait_calls_settled(VISIBLE_WITHIN).await?;
    stack.kill("ratewire-projector")?;
    stack.start_process("ratewire-projector")?;
    stack
        .push_and_wait(bank, &token, &usd(30, "150", "156"))
        .await?;
    stack
        .push_and_wait(bank, &token, &usd(20, "155", "157"))
        .await?;
    let second = stack
        .push_and_wait(bank, &token, &usd(10, "150", "155"))
        .await?;
    let received = receiver.wait_for(2, Duration::from_secs(30)).await?;
    let breaches = of_kind(&received, "quality.spread_cap_breached");
    let events: Vec<&Value> = breaches
        .iter()
        .map(|(_, b)| &b["data"]["eventId"])
        .collect();
    assert_eq!(
        events,
        [&first["eventId"], &second["eventId"]],
        "{breaches:?}"
    );
    let data = &breaches[0].1["data"];
    assert_eq!(data["bank"]["id"], bank);
    assert_eq!(data["currencyCode"], "USD");
    assert_eq!(data["pair"], "cash");
    assert_eq!(data["spreadPercent"], 3.2787);
    assert_eq!(data["spreadCapPercent"], 2);

    // Silent from now: the first slot of ten seconds that ends without a
    // board is told once every fold has passed it by the grace, and the
    // slots after it are the same run. The projector is killed while the
    // silence lasts.
    tokio::time::sleep(Duration::from_secs(12)).await;
    stack.kill("ratewire-projector")?;
    stack.start_process("ratewire-projector")?;
    let missed = eventually(
        "a missed publication told",
        Duration::from_secs(60),
        || async {
            let missed = of_kind(&receiver.received(), "quality.publication_missed");
            (!missed.is_empty()).then_some(missed)
        },
    )
    .await?;
    let data = &missed[0].1["data"];
    assert_eq!(data["bank"]["id"], bank);
    assert_eq!(data["schedule"], json!({"every": "PT10S"}));
    let (from, to) = (
        data["from"].as_str().context("from")?,
        data["to"].as_str().context("to")?,
    );
    ensure!(from < to, "{data}");
    // Two more slots of silence: still the same run, not told again.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let received = receiver.received();
    assert_eq!(of_kind(&received, "quality.publication_missed").len(), 1);
    // The restarted projector told it, and counts it once for the alert rules.
    let counted = stack
        .metric(
            "ratewire-projector",
            "ratewire_projector_publications_missed_total",
        )
        .await;
    assert_eq!(counted, 1.0);
    assert_eq!(of_kind(&received, "quality.spread_cap_breached").len(), 2);
    let recorded = stack
        .sql_number("SELECT count(*) FROM alerts.deliveries")
        .await?
        .unwrap_or_default();
    assert_eq!(recorded, 3, "one message each, recorded once");
    Ok(())
}
