//! `deploy/bench alerts`: 10,000 alerts on one currency and one board
//! that crosses them all, timed from the board's 202 to the last of the
//! 10,000 signed calls at a receiver on this machine (which checks every
//! signature), beside the board's publish-to-visible time on /rates with
//! no alert at all and with the 10,000 (the fold records the crossings in
//! the board's own transaction; delivery runs beside it).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures_util::StreamExt;
use ratewire_alerts::Secret;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::procs::{self, Procs};
use super::report::{fixed, replace_section, row};
use super::{median, say, Machine, Settings};
use crate::feed::client::{new_bank, IngestClient, Pushed};
use crate::feed::receive;

const ALERTS: usize = 10_000;
const RECEIVER: u16 = 18199;
/// The bench's key sealing webhook secrets (32 bytes, base64).
const SECRETS_KEY: &str = "YmVuY2gtd2ViaG9vay1zZWNyZXRzLWtleS0zMmJ5dGU=";

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let mut procs = Procs::new(
        settings,
        &[
            ("RATEWIRE_WEBHOOK_SECRETS_KEY", SECRETS_KEY.into()),
            ("RATEWIRE_WEBHOOK_ALLOW_PRIVATE", "true".into()),
        ],
    )
    .await?;
    procs.start_stack().await?;
    let ingest = IngestClient::new(
        &format!("http://127.0.0.1:{}", procs::INGEST),
        &format!("http://127.0.0.1:{}", procs::INGEST_OPERATOR),
        Some(procs::ADMIN_TOKEN),
    )?;
    let bank = ingest
        .register_bank(new_bank(
            "BENCH",
            "Bench Bank",
            "https://img.test/bench.png",
            &[],
        ))
        .await?;
    let (token, _) = ingest.create_token(bank).await?.context("a token")?;
    let key = procs.api_key("alerts", "bench")?;
    let api = format!("http://127.0.0.1:{}", procs::API);
    let http = reqwest::Client::new();
    let mut minutes = 600i64;
    let mut publish = |buying: f64| {
        minutes -= 1;
        let as_of = chrono::Utc::now() - chrono::Duration::minutes(minutes);
        let body = json!({"asOf": as_of.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "rates": [{"currency": "USD", "cashBuying": buying, "cashSelling": buying + 4.0}]})
        .to_string();
        let (ingest, token) = (ingest.clone(), token.clone());
        async move {
            match ingest.push_board(bank, &token, body, None).await {
                Pushed::Accepted { .. } => Ok(Instant::now()),
                other => bail!("a board was not accepted: {other:?}"),
            }
        }
    };
    let visible = |value: f64| {
        let (http, api, key) = (http.clone(), api.clone(), key.clone());
        async move { shown(&http, &api, &key, bank, value).await }
    };

    // The bare baseline: publish-to-visible with no alert.
    let mut bare = Vec::new();
    for round in 0..settings.rounds {
        let value = 149.0 - round as f64 * 0.01;
        let accepted = publish(value).await?;
        visible(value).await?;
        bare.push(accepted.elapsed().as_secs_f64() * 1000.0);
    }

    // A webhook to the receiver, and the alerts: the best USD cash buying
    // above 150.0001, 150.0002, ... (all below the crossing board).
    let created: Value = http
        .post(format!("{api}/api/v1/webhooks"))
        .header("x-api-key", &key)
        .json(&json!({"url": format!("http://127.0.0.1:{RECEIVER}/hooks")}))
        .send()
        .await?
        .json()
        .await?;
    let hook = created["data"]["id"]
        .as_str()
        .context("a webhook")?
        .to_owned();
    let secret = Secret::decode(created["data"]["secret"].as_str().context("its secret")?)
        .context("a secret")?;
    let stop = CancellationToken::new();
    let tally = receive::serve(
        ([127, 0, 0, 1], RECEIVER).into(),
        vec![secret],
        false,
        stop.clone(),
    )
    .await?;
    say(format!("creating {ALERTS} alerts through the API"));
    let started = Instant::now();
    let made = futures_util::stream::iter(0..ALERTS)
        .map(|i| {
            let (http, api, key, hook) = (http.clone(), api.clone(), key.clone(), hook.clone());
            async move {
                let threshold = 150.0 + (i + 1) as f64 / 10_000.0;
                let answer = http
                    .post(format!("{api}/api/v1/alerts"))
                    .header("x-api-key", &key)
                    .json(
                        &json!({"webhookId": hook, "currencyCode": "USD", "field": "cashBuying",
                                  "condition": "above", "threshold": threshold}),
                    )
                    .send()
                    .await?;
                anyhow::ensure!(answer.status() == 201, "an alert: {}", answer.text().await?);
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    if let Some(Err(e)) = made.into_iter().find(Result::is_err) {
        return Err(e);
    }
    let creating = started.elapsed().as_secs_f64();

    let (mut armed, mut crossed, mut delivered) = (Vec::new(), Vec::new(), Vec::new());
    let pool = procs::database(procs::DATABASE).await?;
    for round in 0..settings.rounds {
        // Below every threshold: all re-armed (evaluated, not true).
        let below = 148.0 - round as f64 * 0.01;
        let accepted = publish(below).await?;
        visible(below).await?;
        armed.push(accepted.elapsed().as_secs_f64() * 1000.0);
        wait_armed(&pool, below).await?;
        let before = tally.verified.load(Ordering::Relaxed);
        let above = 152.0 + round as f64 * 0.01;
        let accepted = publish(above).await?;
        visible(above).await?;
        crossed.push(accepted.elapsed().as_secs_f64() * 1000.0);
        let goal = before + ALERTS as u64;
        let deadline = Instant::now() + Duration::from_secs(120);
        while tally.verified.load(Ordering::Relaxed) < goal {
            if Instant::now() > deadline {
                bail!(
                    "{} of {ALERTS} calls within 2 minutes; logs in {}",
                    tally.verified.load(Ordering::Relaxed) - before,
                    procs.dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let last = tally.last.lock().expect("tally").context("a call")?;
        delivered.push(last.duration_since(accepted).as_secs_f64());
        say(format!(
            "round {}: visible after {:.0} ms, {ALERTS} calls in {:.2} s",
            round + 1,
            crossed.last().unwrap(),
            delivered.last().unwrap()
        ));
    }
    let refused = tally.refused.load(Ordering::Relaxed);
    stop.cancel();
    let outbox: i64 = sqlx::query_scalar("SELECT count(*) FROM alerts.deliveries")
        .fetch_one(&pool)
        .await?;
    pool.close().await;
    let rounds = |values: &[f64], digits: usize| {
        values
            .iter()
            .map(|v| fixed(*v, digits))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let machine = Machine::here();
    let section = format!(
        r#"## Alerts: 10,000 crossed by one board

{run}, release build, one projector (its deliverer at the default 64 requests in flight,
16 per endpoint) and one API on a stack of their own. {ALERTS} alerts of one key on the best
USD cash buying rate ("above" thresholds 150.0001 to 151.0000), all calling one webhook: a
receiver on this machine (`ratewire-feed receive`'s code) that checks every signature. Each
round publishes a board below every threshold (re-arming them), waits until all are armed,
then publishes one above them all: its 202 starts the clock. Medians of {rounds} rounds.

| | median | rounds |
|---|---|---|
{rows}

The fold judges a batch's events in order in memory (a board may cross and a later one in
the same batch cross back), then writes the batch at once in its transaction: the watches
the batch moved (one row each) and, per crossing, the alerts it crossed as one index range,
recorded as one row naming them; the {ALERTS} messages are made and sent by the deliverer,
outside the fold. What the board pays is the difference between the first row and the next
two.

Creating the {ALERTS} alerts through the API (32 at a time) took {creating} s. The outbox
held {outbox} messages at the end, one per crossing; the receiver refused {refused} calls.
Broker, Postgres, Redis, the processes and the receiver share the machine's {cores} cores.
"#,
        run = machine.run_by("deploy/bench alerts"),
        rounds = settings.rounds,
        rows = [
            row(&[
                "board visible on /rates, no alert (bare baseline)".into(),
                format!("{} ms", fixed(median(&bare), 0)),
                rounds(&bare, 0),
            ]),
            row(&[
                format!("board visible on /rates, {ALERTS} alerts judged, none crossed"),
                format!("{} ms", fixed(median(&armed), 0)),
                rounds(&armed, 0),
            ]),
            row(&[
                format!("board visible on /rates, crossing {ALERTS} alerts"),
                format!("{} ms", fixed(median(&crossed), 0)),
                rounds(&crossed, 0),
            ]),
            row(&[
                format!("202 to the last of {ALERTS} signed calls (target: 10 s)"),
                format!("{} s", fixed(median(&delivered), 2)),
                rounds(&delivered, 2),
            ]),
        ]
        .join("\n"),
        creating = fixed(creating, 1),
        cores = machine.cores,
    );
    replace_section(&settings.page(), &section)
}

/// Waits until /rates shows the bank's USD cash buying at `value`.
async fn shown(
    http: &reqwest::Client,
    api: &str,
    key: &str,
    bank: i64,
    value: f64,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(answer) = http
            .get(format!("{api}/api/v1/rates?bankId={bank}"))
            .header("x-api-key", key)
            .send()
            .await
        {
            let body: Value = answer.json().await.unwrap_or_default();
            if body["data"][0]["data"][0]["exchangeRates"][0]["cashBuying"].as_f64() == Some(value)
            {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    bail!("/rates did not show {value} within 30 s")
}

/// Waits until the alerts' watch has been evaluated at `value` (below
/// every threshold: all are armed).
async fn wait_armed(pool: &sqlx::PgPool, value: f64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let watched: Option<f64> = sqlx::query_scalar(
            "SELECT value::float8 FROM alerts.watches
             WHERE currency = 'USD' AND field = 'cashBuying' AND bank_id = 0",
        )
        .fetch_optional(pool)
        .await?
        .flatten();
        if watched == Some(value) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("the alerts were not re-armed within 30 s")
}
