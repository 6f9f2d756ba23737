//! `deploy/bench abuse`: a legitimate client's latency and the API's
//! memory while slow-header clients and a flood of made-up keys run.

use std::fs::File;
use std::time::Duration;

use anyhow::{bail, Context};

use super::load::{self, Latency};
use super::procs::{self, rss_mb, Procs, Sampler};
use super::report::{fixed, replace_section};
use super::{say, Machine, Settings};

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    // Room for every slow client and the two real ones at once: this run
    // measures time limits and memory; the connection cap has its own test.
    let mut procs = Procs::new(
        settings,
        &[("RATEWIRE_HTTP_MAX_CONNECTIONS", "2048".into())],
    )
    .await?;
    procs.start_stack().await?;
    procs.run(
        &settings.bin("ratewire-feed"),
        &[
            "load",
            "--banks",
            "12",
            "--currencies",
            "12",
            "--rate",
            "50",
            "--duration",
            "3s",
        ],
        "feed.log",
    )?;
    let key = procs.api_key("legit", "bench")?;
    let header = [format!("x-api-key: {key}")];
    let url = format!("http://127.0.0.1:{}/api/v1/rates?bankId=1", procs::API);
    procs::wait_served(&format!("http://127.0.0.1:{}", procs::API), &key).await?;
    procs.stop("projector");
    let header_timeout: u64 = std::env::var("RATEWIRE_HTTP_HEADER_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let attack_seconds = settings.seconds + header_timeout + 5;
    let legit = |procs: &Procs, name: &str| -> anyhow::Result<Latency> {
        tokio::task::block_in_place(|| {
            load::paced(procs, name, &url, settings.legit_rate, 8, &header)
        })
    };

    say(format!(
        "a legitimate client alone: {} requests/s for {}s",
        settings.legit_rate, settings.seconds
    ));
    let calm = legit(&procs, "calm")?;
    let calm_rss = rss_mb(procs.pid("api"));

    say(format!(
        "under attack: {} slow-header clients and {} made-up keys/s for {attack_seconds}s",
        settings.slow_clients, settings.flood_rate
    ));
    let report = File::create(procs.dir.join("abuse.json"))?;
    let errors = File::options()
        .create(true)
        .append(true)
        .open(procs.dir.join("abuse.log"))?;
    let mut attacker = std::process::Command::new(settings.example("abuse"))
        .args(["--seconds", &attack_seconds.to_string()])
        .args(["--slow-clients", &settings.slow_clients.to_string()])
        .args(["--flood-rate", &settings.flood_rate.to_string()])
        .arg(&url)
        .stdout(report)
        .stderr(errors)
        .spawn()
        .context("starting the attacker")?;
    // The first slow clients are cut at the header timeout; measure after
    // that, with the attack in its steady state.
    tokio::time::sleep(Duration::from_secs(header_timeout + 2)).await;
    let sampler = Sampler::start(procs.pid("api"));
    let attacked = legit(&procs, "attacked")?;
    let status = tokio::task::spawn_blocking(move || attacker.wait()).await??;
    let peak = sampler.peak().await;
    if !status.success() {
        bail!("the attacker failed; see {}/abuse.log", procs.dir.display());
    }
    let abuse: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(procs.dir.join("abuse.json"))?)?;
    let field = |name: &str| match &abuse[name] {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    };
    let operator_metrics = format!("http://127.0.0.1:{}/metrics", procs::API_OPERATOR);
    let lookups = procs::metric(&operator_metrics, "ratewire_api_key_lookups_postgres_total")
        .await?
        .unwrap_or_else(|| "0".into());
    let times = |l: &Latency| {
        format!(
            "{} / {} / {} / {}",
            fixed(l.p50, 2),
            fixed(l.p99, 2),
            fixed(l.p999, 2),
            fixed(l.max, 2)
        )
    };
    let machine = Machine::here();
    let section = format!(
        r#"## Under attack

{run}, release build, default listener limits (header timeout {header_timeout} s, 16 KiB of
headers, 30 s per request) but `RATEWIRE_HTTP_MAX_CONNECTIONS=2048`, so that every slow client
is accepted at once (the cap has its own test). A stack of its own with 12 banks; the
projector stopped, as in the full run. The attacker (tools/examples/abuse.rs) and the
legitimate client (tools/examples/paced.rs, open loop, {legit_rate} requests/s on 8
connections, a real key) share the machine with every process. For {attack_seconds} s the
attacker runs:
- {slow} slow-header clients, each sending 1 KB of a request head and then a byte a second,
  reconnecting when cut off;
- a flood of {flood} requests/s, each with a new made-up key.

The legitimate client's {seconds} s start {after} s into the attack, once the first slow
clients have been cut.

| what | target | alone | under attack |
|---|---|---|---|
| legitimate p99, `/api/v1/rates?bankId=1` | <= 10 ms | {calm_p99} ms | {attacked_p99} ms |
| API resident memory | < 128 MB | {calm_rss} MB | {peak} MB (peak, sampled every 200 ms) |
| longest life of a slow client, handshake to cut | <= header timeout + 0.1 s (timer and scheduling) = {limit} ms | | {max_life} ms |

Legitimate client, p50 / p99 / p99.9 / max ms: alone {calm}, under attack {attacked}.

Slow clients: {opened} connections opened, {closed} cut off by the API (lifetime p50 {life50}
ms, p99 {life99} ms); {open_at_end} were still within their time when the run ended. Flood
answers: {flood_statuses}. Postgres key lookups during the whole run: {lookups}
(`ratewire_api_key_lookups_postgres_total`).
"#,
        run = machine.run_by("deploy/bench abuse"),
        legit_rate = settings.legit_rate,
        slow = settings.slow_clients,
        flood = settings.flood_rate,
        seconds = settings.seconds,
        after = header_timeout + 2,
        calm_p99 = fixed(calm.p99, 2),
        attacked_p99 = fixed(attacked.p99, 2),
        calm_rss = fixed(calm_rss, 1),
        peak = fixed(peak, 1),
        limit = header_timeout * 1000 + 100,
        max_life = field("slow_lifetime_max_ms"),
        calm = times(&calm),
        attacked = times(&attacked),
        opened = field("slow_opened"),
        closed = field("slow_closed_by_server"),
        life50 = field("slow_lifetime_p50_ms"),
        life99 = field("slow_lifetime_p99_ms"),
        open_at_end = field("slow_open_at_end"),
        flood_statuses = field("flood_statuses"),
    );
    replace_section(&settings.page(), &section)
}
