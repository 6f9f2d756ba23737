//! `deploy/bench live`: many live-stream subscribers on one API while
//! boards are published (delivery time, memory, REST throughput beside
//! them), then five-year daily series.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context};
use chrono::{Days, Timelike, Utc};

use super::load::{self, Latency};
use super::procs::{self, all_ticks, cpu_shares, Procs, Sampler};
use super::report::{fixed, replace_section, row};
use super::{say, Machine, Settings};

const RATE: u64 = 100;
const BANKS: usize = 50;

/// What one run of pushes (with or without streams and REST) measured.
struct Run {
    /// The subscribers' report.
    delivery: serde_json::Value,
    /// oha's requests/s of /rates?bankId=1 beside the pushes, if run.
    rps: Option<f64>,
    /// The API's peak resident memory.
    rss: f64,
    /// Each program's share of the machine in the middle of the run.
    cpu: BTreeMap<String, f64>,
}

/// Pushes `RATE` boards/s for the measured seconds + 4 with
/// `subscribers` streams open; with `rest`, oha saturates /rates?bankId=1
/// in the middle of the pushes.
async fn run_once(
    procs: &Procs,
    name: &str,
    subscribers: u64,
    key: &str,
    rest: bool,
) -> anyhow::Result<Run> {
    let settings = &procs.settings;
    let ready = procs.dir.join(format!("live-{name}.ready"));
    let _ = std::fs::remove_file(&ready);
    let report = File::create(procs.dir.join(format!("live-{name}.json")))?;
    let errors = File::options()
        .create(true)
        .append(true)
        .open(procs.dir.join("subscribers.log"))?;
    let mut load = std::process::Command::new(settings.example("subscribers"))
        .args(["--api", &format!("http://127.0.0.1:{}", procs::API)])
        .args(["--ingest", &format!("http://127.0.0.1:{}", procs::INGEST)])
        .args(["--key", key])
        .arg("--tokens")
        .arg(procs.dir.join("tokens.txt"))
        .args([
            "--subscribers",
            &subscribers.to_string(),
            "--rate",
            &RATE.to_string(),
        ])
        .args([
            "--seconds",
            &(settings.seconds + 4).to_string(),
            "--currencies",
            "30",
        ])
        .arg("--ready-file")
        .arg(&ready)
        .stdout(report)
        .stderr(errors)
        .spawn()
        .context("starting the subscribers")?;
    while !ready.exists() {
        if load.try_wait()?.is_some() {
            bail!(
                "the subscribers' run ended early; see {}/subscribers.log",
                procs.dir.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let sampler = Sampler::start(procs.pid("api"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let url = format!("http://127.0.0.1:{}/api/v1/rates?bankId=1", procs::API);
    let header = [format!("x-api-key: {key}")];
    let oha = rest.then(|| {
        let (settings, url, header) = (settings.clone(), url.clone(), header.clone());
        tokio::task::spawn_blocking(move || load::saturate(&settings, &url, &header))
    });
    // Counted while oha runs: a process that has ended is gone from /proc.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let middle = settings.seconds.saturating_sub(2).max(1);
    let before = all_ticks();
    tokio::time::sleep(Duration::from_secs(middle)).await;
    let cpu = cpu_shares(&before, &all_ticks(), middle, Machine::here().cores);
    let rps = match oha {
        Some(task) => Some(task.await?.context("the REST load beside the streams")?),
        None => {
            tokio::time::sleep(Duration::from_secs(1)).await;
            None
        }
    };
    let status = tokio::task::spawn_blocking(move || load.wait()).await??;
    let rss = sampler.peak().await;
    if !status.success() {
        bail!(
            "the subscribers' run failed; see {}/subscribers.log",
            procs.dir.display()
        );
    }
    let delivery = serde_json::from_str(&std::fs::read_to_string(
        procs.dir.join(format!("live-{name}.json")),
    )?)?;
    Ok(Run {
        delivery,
        rps,
        rss,
        cpu,
    })
}

/// Five years of daily boards of USD, EUR and GBP for `bank`, as the
/// backfill reads them.
fn five_years(bank: i64) -> String {
    let today = Utc::now()
        .with_hour(9)
        .and_then(|t| t.with_minute(0))
        .and_then(|t| t.with_second(0));
    let today = today
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or_else(Utc::now);
    let mut out = String::new();
    let days = 5 * 365;
    for d in (1..=days).rev() {
        let at = today - Days::new(d);
        let usd = 55.0 + 100.0 * (1.0 - d as f64 / days as f64) + (d as f64 / 9.0).sin();
        let rates: Vec<serde_json::Value> = [("USD", 1.0), ("EUR", 1.08), ("GBP", 1.27)]
            .iter()
            .map(|(code, m)| {
                let buying = (m * usd * 10_000.0).round() / 10_000.0;
                let selling = (m * usd * 1.02 * 10_000.0).round() / 10_000.0;
                serde_json::json!({"currency": code, "cashBuying": buying, "cashSelling": selling})
            })
            .collect();
        let line = serde_json::json!({"bankId": bank, "asOf": at.format("%Y-%m-%dT%H:%M:%SZ").to_string(), "rates": rates});
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let connections = settings.subscribers + 1000;
    let mut procs = Procs::new(
        settings,
        &[("RATEWIRE_HTTP_MAX_CONNECTIONS", connections.to_string())],
    )
    .await?;
    procs.start_stack().await?;
    let key = procs.api_key("live", "bench")?;

    say(format!(
        "{BANKS} banks with a board each, and a publisher token for each"
    ));
    procs.run(
        &settings.bin("ratewire-feed"),
        &[
            "load",
            "--banks",
            &BANKS.to_string(),
            "--currencies",
            "30",
            "--rate",
            "50",
            "--duration",
            "2s",
        ],
        "feed.log",
    )?;
    let http = reqwest::Client::new();
    let operator = format!("http://127.0.0.1:{}", procs::INGEST_OPERATOR);
    let bearer = format!("Bearer {}", procs::ADMIN_TOKEN);
    let banks: Vec<serde_json::Value> = http
        .get(format!("{operator}/v1/admin/banks"))
        .header("authorization", &bearer)
        .send()
        .await?
        .json()
        .await?;
    let mut tokens = Vec::new();
    for bank in banks
        .iter()
        .filter(|b| b["code"].as_str().is_some_and(|c| c.starts_with("LOAD")))
    {
        let id = bank["id"].as_i64().context("a bank id")?;
        let token: serde_json::Value = http
            .post(format!("{operator}/v1/admin/banks/{id}/tokens"))
            .header("authorization", &bearer)
            .send()
            .await?
            .json()
            .await?;
        tokens.push((id, token["token"].as_str().context("a token")?.to_owned()));
    }
    if tokens.len() != BANKS {
        bail!("expected {BANKS} banks with tokens, found {}", tokens.len());
    }
    let mut file = File::create(procs.dir.join("tokens.txt"))?;
    for (id, token) in &tokens {
        writeln!(file, "{id} {token}")?;
    }
    let api = format!("http://127.0.0.1:{}", procs::API);
    procs::wait_served(&api, &key).await?;
    let header = [format!("x-api-key: {key}")];
    load::warm(
        settings,
        &format!("{api}/api/v1/rates?bankId=1"),
        &header,
        settings.connections,
    )?;

    say(format!(
        "without subscribers: {RATE} boards/s, /rates?bankId=1 beside them"
    ));
    let alone = run_once(&procs, "alone", 0, &key, true).await?;
    say(format!(
        "with {} subscribers: {RATE} boards/s",
        settings.subscribers
    ));
    let streams = run_once(&procs, "streams", settings.subscribers, &key, false).await?;
    say(format!(
        "with {} subscribers: {RATE} boards/s, /rates?bankId=1 beside them",
        settings.subscribers
    ));
    let subscribed = run_once(&procs, "subscribed", settings.subscribers, &key, true).await?;
    let operator_metrics = format!("http://127.0.0.1:{}/metrics", procs::API_OPERATOR);
    let streams_open = procs::metric(&operator_metrics, "ratewire_api_streams_open")
        .await?
        .unwrap_or_else(|| "?".into());

    say("series: five years of daily boards for one bank, then five-year daily series");
    let (bank, token) = tokens[0].clone();
    let backfill = procs.dir.join("backfill.jsonl");
    std::fs::write(&backfill, five_years(bank))?;
    procs.run(
        &settings.bin("ratewire-feed"),
        &[
            "backfill",
            &backfill.to_string_lossy(),
            "--token",
            &format!("{bank}={token}"),
        ],
        "feed.log",
    )?;
    let pool = procs::database(procs::DATABASE).await?;
    loop {
        let count: i64 =
            sqlx::query_scalar("SELECT count(*) FROM readmodel.boards WHERE bank_id = $1")
                .bind(bank)
                .fetch_one(&pool)
                .await
                .unwrap_or(0);
        if count > 5 * 365 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (from, to) = (
        (Utc::now() - Days::new(5 * 365 - 2)).format("%F"),
        Utc::now().format("%F"),
    );
    let series =
        format!("{api}/api/v1/rates/series?currencyCode=USD&interval=day&from={from}&to={to}");
    let answer: serde_json::Value = http
        .get(format!("{series}&bankId={bank}"))
        .header("x-api-key", &key)
        .send()
        .await?
        .json()
        .await?;
    let points = answer["data"]["points"].as_array().map_or(0, Vec::len);
    load::warm(settings, &format!("{series}&bankId={bank}"), &header, 4)?;
    let one = tokio::task::block_in_place(|| {
        load::paced(
            &procs,
            "series-bank",
            &format!("{series}&bankId={bank}"),
            settings.series_rate,
            settings.connections * 2,
            &header,
        )
    })?;
    let all = tokio::task::block_in_place(|| {
        load::paced(
            &procs,
            "series-best",
            &format!("{series}&field=cashBuying"),
            settings.series_rate,
            settings.connections * 2,
            &header,
        )
    })?;

    let machine = Machine::here();
    let field = |run: &Run, name: &str| match &run.delivery[name] {
        serde_json::Value::Number(n) => n.as_f64().map_or_else(
            || n.to_string(),
            |f| fixed(f, if f.fract() == 0.0 { 0 } else { 2 }),
        ),
        other => other.to_string(),
    };
    let cpu_rows: Vec<String> = [
        ("alone", &alone),
        ("streams", &streams),
        ("subscribed", &subscribed),
    ]
    .iter()
    .map(|(name, run)| {
        let share = |program: &str| {
            format!(
                "{}%",
                fixed(run.cpu.get(program).copied().unwrap_or(0.0), 1)
            )
        };
        let stores = run.cpu.get("postgres").copied().unwrap_or(0.0)
            + run.cpu.get("redis-server").copied().unwrap_or(0.0);
        row(&[
            (*name).into(),
            share("ratewire-api"),
            share("subscribers"),
            share("oha"),
            share("ratewire-projec"),
            share("ratewire-ingest"),
            share("java"),
            format!("{}%", fixed(stores, 1)),
        ])
    })
    .collect();
    let times = |l: &Latency| {
        format!(
            "{} / {} / {}",
            fixed(l.p50, 2),
            fixed(l.p99, 2),
            fixed(l.p999, 2)
        )
    };
    let (rps_alone, rps_subscribed) = (
        alone.rps.unwrap_or(f64::NAN),
        subscribed.rps.unwrap_or(f64::NAN),
    );
    let section = format!(
        r#"## Live stream and series

{run}, release build. A stack of its own with {BANKS} banks of 30 currencies;
`RATEWIRE_HTTP_MAX_CONNECTIONS={connections}`. The load (tools/examples/subscribers.rs) opens
{opened} streams on one API process, each following one bank
(`/api/v1/stream?bankId=N&events=board`, so each board goes to {per_bank} subscribers), then
publishes {RATE} boards/s round robin through ingest for {push_seconds} s and times each board
from its push's 202 to its arrival at every subscriber of its bank. Three runs: `alone` (the
pushes and oha measuring `/api/v1/rates?bankId=1` closed loop for {seconds} s at {conns}
connections, no streams), `streams` (the streams and the pushes) and `subscribed` (the
streams, the pushes and oha). Load generators, broker, Postgres, Redis and the three
processes share the machine.

| what | target | measured |
|---|---|---|
| delivery p99, push's 202 to subscriber (`streams`) | <= 50 ms | {p99} ms |
| API resident memory with {opened} streams | <= 256 MB | {rss} MB (peak, sampled every 200 ms; {rss_rest} MB with oha beside them, {rss_alone} MB without streams) |
| /rates?bankId=1 beside them, share of the run without (`subscribed` / `alone`) | >= 0.80 | {ratio} ({rps_subscribed} vs {rps_alone} requests/s) |
| five-year daily series, one bank, p99 | <= 20 ms | {series_p99} ms |

Delivery, p50 / p99 / p99.9 / max ms: {s50} / {p99} / {s999} / {smax} (`streams`, {deliveries}
deliveries of {expected} expected, {lost} streams lost); with oha saturating the machine beside
them (`subscribed`): {b50} / {b99} / {b999} / {bmax} ({bdeliveries} of {bexpected}, {blost}
streams lost). Subscribing took {subscribing} s; `ratewire_api_streams_open` at the end:
{streams_open}. A board that reached a subscriber before the load generator had read its 202
counts as 0 ms.

Where the machine went during {middle} s in the middle of each run (share of all {cores}
cores, from /proc):

| run | api | subscribers (load) | oha (load) | projector | ingest | broker | Postgres + Redis |
|---|---|---|---|---|---|---|---|
{cpu_rows}

Series: {from} to {to}, `interval=day`, {points} points, after backfilling five years of daily
boards for one bank (`ratewire-feed backfill`); tools/examples/paced.rs, open loop,
{series_rate} requests/s for {seconds} s, p50 / p99 / p99.9 ms:
- one bank (`bankId`): {one}
- the best cash buying across the {BANKS} banks (no `bankId`, `field=cashBuying`): {all}
"#,
        run = machine.run_by("deploy/bench live"),
        opened = field(&streams, "subscribers"),
        per_bank = settings.subscribers / BANKS as u64,
        push_seconds = settings.seconds + 4,
        seconds = settings.seconds,
        conns = settings.connections,
        p99 = field(&streams, "p99_ms"),
        rss = fixed(streams.rss, 1),
        rss_rest = fixed(subscribed.rss, 1),
        rss_alone = fixed(alone.rss, 1),
        ratio = fixed(rps_subscribed / rps_alone, 2),
        rps_subscribed = fixed(rps_subscribed, 0),
        rps_alone = fixed(rps_alone, 0),
        series_p99 = fixed(one.p99, 2),
        s50 = field(&streams, "p50_ms"),
        s999 = field(&streams, "p999_ms"),
        smax = field(&streams, "max_ms"),
        deliveries = field(&streams, "deliveries"),
        expected = field(&streams, "deliveries_expected"),
        lost = field(&streams, "streams_lost"),
        b50 = field(&subscribed, "p50_ms"),
        b99 = field(&subscribed, "p99_ms"),
        b999 = field(&subscribed, "p999_ms"),
        bmax = field(&subscribed, "max_ms"),
        bdeliveries = field(&subscribed, "deliveries"),
        bexpected = field(&subscribed, "deliveries_expected"),
        blost = field(&subscribed, "streams_lost"),
        subscribing = field(&streams, "subscribing_seconds"),
        middle = settings.seconds.saturating_sub(2).max(1),
        cores = machine.cores,
        cpu_rows = cpu_rows.join("\n"),
        series_rate = settings.series_rate,
        one = times(&one),
        all = times(&all),
    );
    replace_section(&settings.page(), &section)
}
