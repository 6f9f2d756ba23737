//! `deploy/bench alerts`: what alerts cost a board and how soon their
//! calls arrive, at a receiver on this machine that checks every
//! signature.
//! - A board's publish-to-visible time on /rates with no alert (the bare
//!   baseline), then with 10,000 alerts present and none crossed.
//! - One alert crossed again and again: each board's 202 to its call,
//!   and the first crossing after the projector restarts.
//! - 10,000 alerts crossed by one board: its 202 to the first and the last
//!   of the 10,000 calls.

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
use crate::feed::client::{new_bank, Pushed};
use crate::feed::load::Percentiles;
use crate::feed::receive::{self, Tally};

const ALERTS: usize = 10_000;
/// Boards timed for each freshness figure.
const FRESH: usize = 30;
/// Crossings of the one alert timed.
const CROSSINGS: usize = 100;
/// Projector restarts, each followed by a crossing.
const RESTARTS: usize = 6;
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
    let ingest = procs::ingest_client()?;
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

    // The first board after the stack's start, then the bare baseline:
    // publish-to-visible with no alert.
    let first_board = {
        let accepted = publish(149.5).await?;
        visible(149.5).await?;
        accepted.elapsed().as_secs_f64() * 1000.0
    };
    let mut bare = Vec::new();
    for round in 0..FRESH {
        let value = (14_900 - round as i64) as f64 / 100.0;
        let accepted = publish(value).await?;
        visible(value).await?;
        bare.push(accepted.elapsed().as_secs_f64() * 1000.0);
    }

    // A webhook to the receiver.
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
    let pool = procs::database(procs::DATABASE).await?;
    let alert = |threshold: f64| {
        let (http, api, key, hook) = (http.clone(), api.clone(), key.clone(), hook.clone());
        async move {
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
            let made: Value = answer.json().await?;
            Ok::<_, anyhow::Error>(made["data"]["id"].as_str().unwrap_or_default().to_owned())
        }
    };

    // One alert, crossed again and again: each crossing's 202 to its call.
    say(format!("crossing one alert {CROSSINGS} times"));
    let one = alert(150.0).await?;
    let mut single = Vec::new();
    for round in 0..CROSSINGS {
        let below = (148_000 - round as i64) as f64 / 1000.0;
        publish(below).await?;
        visible(below).await?;
        wait_armed(&pool, below).await?;
        single.push(
            crossing(&tally, publish((152_000 + round as i64) as f64 / 1000.0)).await? * 1000.0,
        );
    }
    // ...and the first crossing after the projector restarts.
    let mut after_restart = Vec::new();
    for round in 0..RESTARTS {
        let below = (147_500 - round as i64) as f64 / 1000.0;
        publish(below).await?;
        visible(below).await?;
        wait_armed(&pool, below).await?;
        procs.stop("projector");
        let projector = settings.bin("ratewire-projector");
        procs.start("projector", &projector, &[], &[])?;
        procs::wait_url(&format!("http://127.0.0.1:{}/readyz", procs::PROJECTOR)).await?;
        let above = (152_500 + round as i64) as f64 / 1000.0;
        after_restart.push(crossing(&tally, publish(above)).await? * 1000.0);
        say(format!(
            "after restart {}: called {:.0} ms after the 202",
            round + 1,
            after_restart.last().unwrap()
        ));
    }
    let answer = http
        .delete(format!("{api}/api/v1/alerts/{one}"))
        .header("x-api-key", &key)
        .send()
        .await?;
    anyhow::ensure!(answer.status().is_success(), "deleting the one alert");

    // The 10,000: the best USD cash buying above 150.0001, 150.0002, ...
    // (all below the crossing boards).
    say(format!("creating {ALERTS} alerts through the API"));
    let started = Instant::now();
    let made = futures_util::stream::iter(0..ALERTS)
        .map(|i| alert(150.0 + (i + 1) as f64 / 10_000.0))
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    if let Some(Err(e)) = made.into_iter().find(Result::is_err) {
        return Err(e);
    }
    let creating = started.elapsed().as_secs_f64();

    // Freshness with them present: boards below every threshold, each
    // moving their watch and crossing none (after one that makes them
    // known).
    publish(147.0).await?;
    visible(147.0).await?;
    wait_armed(&pool, 147.0).await?;
    let mut judged = Vec::new();
    for round in 0..FRESH {
        let value = (14_690 - round as i64) as f64 / 100.0;
        let accepted = publish(value).await?;
        visible(value).await?;
        judged.push(accepted.elapsed().as_secs_f64() * 1000.0);
    }

    let (mut crossed, mut first_call, mut delivered) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..settings.rounds {
        // Below every threshold: all re-armed (evaluated, not true), and
        // the last round's calls all recorded.
        let below = (14_600 - round as i64) as f64 / 100.0;
        publish(below).await?;
        visible(below).await?;
        wait_armed(&pool, below).await?;
        wait_settled(&pool).await?;
        let before = tally.verified.load(Ordering::Relaxed);
        *tally.first.lock().expect("tally") = None;
        let above = (15_200 + round as i64) as f64 / 100.0;
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
        let first = tally.first.lock().expect("tally").context("a call")?;
        let last = tally.last.lock().expect("tally").context("a call")?;
        first_call.push(first.duration_since(accepted).as_secs_f64() * 1000.0);
        delivered.push(last.duration_since(accepted).as_secs_f64());
        say(format!(
            "round {}: visible after {:.0} ms, first call after {:.0} ms, {ALERTS} calls in {:.2} s",
            round + 1,
            crossed.last().unwrap(),
            first_call.last().unwrap(),
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
    let single = Percentiles::of(single);
    let ms = |v: f64| format!("{} ms", fixed(v, 0));
    let section = format!(
        r#"## Alerts: what they cost a board, and how soon their calls arrive

{run}, release build, one projector (its deliverer at the default 64 requests in flight,
16 per endpoint) and one API on a stack of their own. The alerts watch the best USD cash
buying rate and all call one webhook: a receiver on this machine (`ratewire-feed receive`'s
code) that checks every signature. Every time starts at a board's 202.

| | median | rounds |
|---|---|---|
{rows}

- **Freshness** is a board's 202 to /rates showing it (polled every millisecond), over
  {FRESH} boards each: first with
  no alert (the bare baseline), then with {ALERTS} alerts present ("above" 150.0001 to
  151.0000), each board moving their watch and crossing none. The target is at most 1.2x
  the baseline. The first board after the stack's start took {first_board}.
- **One alert crossed {CROSSINGS} times** (a board re-arms it, then one crosses it): its
  call arrived p50 {p50}, p99 {p99}, slowest {max} after the crossing board's 202 (target:
  p99 at most 50 ms). The first crossing after the projector was restarted (stopped, started,
  ready): {restarts} ({RESTARTS} restarts).
- **{ALERTS} alerts crossed by one board**, medians of {rounds} rounds, each after a board
  that re-armed them all and once the last round's calls were all recorded (target: the last
  call within 2 s).

The fold judges a batch's events in order in memory (a board may cross and a later one in
the same batch cross back), reading only the alerts whose thresholds a move passed through,
then writes the batch at once in its transaction: the watches the batch moved (one row each)
and, per crossing, one row naming the alerts it crossed. The deliverer makes the messages
and sends them outside the fold, claiming the next ones while its calls run.

Creating the {ALERTS} alerts through the API (32 at a time) took {creating} s. The outbox
held {outbox} messages at the end; the receiver refused {refused} calls. Broker, Postgres,
Redis, the processes and the receiver share the machine's {cores} cores.
"#,
        run = machine.run_by("deploy/bench alerts"),
        rounds = settings.rounds,
        first_board = ms(first_board),
        p50 = ms(single.p50),
        p99 = ms(single.p99),
        max = ms(single.max),
        restarts = after_restart
            .iter()
            .map(|v| ms(*v))
            .collect::<Vec<_>>()
            .join(", "),
        rows = [
            row(&[
                "board visible on /rates, no alert (bare baseline)".into(),
                ms(median(&bare)),
                rounds(&bare, 0),
            ]),
            row(&[
                format!("board visible on /rates, {ALERTS} alerts present, none crossed"),
                format!(
                    "{} ({}x)",
                    ms(median(&judged)),
                    fixed(median(&judged) / median(&bare), 2)
                ),
                rounds(&judged, 0),
            ]),
            row(&[
                format!("board visible on /rates, crossing {ALERTS} alerts"),
                ms(median(&crossed)),
                rounds(&crossed, 0),
            ]),
            row(&[
                format!("202 to the first of {ALERTS} signed calls"),
                ms(median(&first_call)),
                rounds(&first_call, 0),
            ]),
            row(&[
                format!("202 to the last of {ALERTS} signed calls (target: 2 s)"),
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
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    bail!("/rates did not show {value} within 30 s")
}

/// Publishes a board that crosses one alert (`push`), and waits for its
/// call: the seconds from the board's 202 to the call.
async fn crossing(
    tally: &Tally,
    push: impl std::future::Future<Output = anyhow::Result<Instant>>,
) -> anyhow::Result<f64> {
    let before = tally.verified.load(Ordering::Relaxed);
    let accepted = push.await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while tally.verified.load(Ordering::Relaxed) == before {
        anyhow::ensure!(Instant::now() < deadline, "no call within 30 s");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let last = tally.last.lock().expect("tally").context("a call")?;
    Ok(last.duration_since(accepted).as_secs_f64())
}

/// Waits until every message is delivered and offered to the stream (the
/// deliverer's writes are over).
async fn wait_settled(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let busy: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM alerts.deliveries
                            WHERE (delivered_at IS NULL AND failed_at IS NULL) OR NOT streamed)",
        )
        .fetch_one(pool)
        .await?;
        if !busy {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("the outbox did not settle within 60 s")
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
