//! `deploy/bench quality`: the quality reports (issue 60) on a month of
//! 50 banks x 30 currencies publishing hourly (the known-at bench's
//! history, 36,000 boards, each bank on an hourly schedule), read live and
//! as known at random past instants, at saturation and at 200 requests/s,
//! beside the live `/rates?bankId` and the axum baseline returning its
//! bytes in the same run.

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::known_at::history;
use super::known_at::targets::{any_of, instant, instants, Target};
use super::known_at::{known_window, measure, wait_folded, Figures, RATE};
use super::procs::{self, Procs};
use super::report::{fixed, replace_section};
use super::{say, Machine, Settings};

/// Days of history: the reports' default window.
const DAYS: u64 = 30;

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let mut procs = Procs::new(settings, &[]).await?;
    procs.start_stack().await?;
    let ingest_url = format!("http://127.0.0.1:{}", procs::INGEST);
    let operator = format!("http://127.0.0.1:{}", procs::INGEST_OPERATOR);
    let client = procs::ingest_client()?;
    let banks = history::register(&client).await?;
    say("schedules: every bank expected every hour");
    let http = reqwest::Client::new();
    for bank in &banks {
        http.patch(format!("{operator}/v1/admin/banks/{}", bank.id))
            .bearer_auth(procs::ADMIN_TOKEN)
            .json(&serde_json::json!({"schedule": {"every": "PT1H"}}))
            .send()
            .await?
            .error_for_status()?;
    }
    say(format!(
        "history: {DAYS} days of hourly boards of {} banks x 30 currencies, through the backfill",
        banks.len()
    ));
    let loaded = history::load(&client, &ingest_url, &banks, DAYS).await?;
    let pool = procs::database(procs::DATABASE).await?;
    let schema: String = sqlx::query_scalar("SELECT schema_name FROM ratewire.read_model")
        .fetch_one(&pool)
        .await?;
    wait_folded(&pool, &schema, &loaded).await?;
    let (from, to) = known_window(&pool, &schema).await?;
    let pattern =
        instants(from, to).context("no whole second between the first and last board known")?;

    let key = procs.api_key("quality", "bench")?;
    let headers = vec![
        format!("x-api-key: {key}"),
        "accept-encoding: identity".into(),
    ];
    let api = format!("http://127.0.0.1:{}", procs::API);
    let bank_ids = any_of(banks.iter().map(|b| b.id));
    let one = banks[0].id;
    let body = procs.dir.join("body.json");
    let live_one = format!("{api}/api/v1/rates?bankId={one}");
    let answer = http
        .get(&live_one)
        .header("x-api-key", &key)
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    std::fs::write(&body, &answer)?;
    let baseline_addr = format!("127.0.0.1:{}", procs::BASELINE);
    procs.start(
        "baseline",
        &settings.example("constant"),
        &[&baseline_addr, &body.to_string_lossy()],
        &[],
    )?;
    procs::wait_url(&format!("http://{baseline_addr}/")).await?;
    let reads = [
        Target::random(
            "quality-bank",
            format!("{api}/api/v1/banks/{bank_ids}/quality"),
            &headers,
        ),
        Target::exact("quality-all", format!("{api}/api/v1/quality"), &headers),
        Target::random(
            "quality-bank-known",
            format!("{api}/api/v1/banks/{bank_ids}/quality\\?asKnownAt={pattern}"),
            &headers,
        ),
        Target::random(
            "live-rates",
            format!("{api}/api/v1/rates\\?bankId={bank_ids}"),
            &headers,
        ),
        Target::exact(
            "baseline",
            format!("http://{baseline_addr}/api/v1/rates?bankId={one}"),
            &headers,
        ),
    ];
    for target in &reads {
        for url in target.samples(settings, 2)? {
            let answer = http.get(&url).header("x-api-key", &key).send().await?;
            anyhow::ensure!(answer.status().is_success(), "{url}: {}", answer.status());
        }
    }
    say(format!(
        "reads: {} rounds of oha ({}s closed loop at {} connections, then {}s at {RATE} requests/s)",
        settings.rounds, settings.seconds, settings.connections, settings.seconds
    ));
    let (figures, _) = tokio::task::block_in_place(|| measure(settings, &reads, &[]))?;
    procs.stop("baseline");
    replace_section(
        &settings.page(),
        &section(settings, &loaded, &figures, (from, to)),
    )
}

const ROWS: [&str; 5] = [
    "`/api/v1/banks/{id}/quality` (30 days), a random bank, live",
    "`/api/v1/quality` (30 days, every bank), live",
    "`/api/v1/banks/{id}/quality` as known at a random instant",
    "`/api/v1/rates?bankId`, a random bank, live",
    "axum baseline returning `/rates?bankId` of one bank",
];

fn section(
    settings: &Settings,
    loaded: &history::Loaded,
    figures: &[Figures],
    window: (DateTime<Utc>, DateTime<Utc>),
) -> String {
    let machine = Machine::here();
    let rows: Vec<String> = ROWS
        .iter()
        .zip(figures)
        .map(|(name, f)| {
            format!(
                "| {name} | {} | {} | {} | {} |",
                fixed(f.rps, 0),
                fixed(f.latency.p50, 2),
                fixed(f.latency.p99, 2),
                f.failed
            )
        })
        .collect();
    let p99 = |i: usize| fixed(figures[i].latency.p99, 2);
    format!(
        r#"## Quality reports (issue 60)

{run}, {memory} GiB, release build, on a stack of its own
(its own Kafka broker, database and Redis prefix; Postgres and Redis of the machine), load
generators and baselines on the same cores. Each figure is the median of {rounds} rounds.

The history: {boards} boards of 30 currencies ({entries} rate entries), 50 banks publishing one
an hour over {DAYS} days, each bank on an hourly schedule, with {corrections} corrections and
{retractions} retractions, loaded through the backfill in {load} s (the known-at bench's
history). Every board of the month was received within the load, so each report reads all of
its bank's 720 boards: the most a month of hourly publishing costs. A report reads one row per
board, and the rates of only the boards whose screen (kept by the fold) says a spread may be
over the cap or a value may be an outlier. A live report is kept by the API and refreshed
behind the requests (fresh for ten times its cost and at least 5 s), so a request waits only
for the first render of a report; a report as known at an instant (drawn uniformly from {from}
to {to}) is rendered for its request, the outliers of its boards once judged final kept.

### Targets

| what | target | measured |
|---|---|---|
| a bank's quality report, p99 at {RATE} requests/s | <= 10 ms | live: {bank} ms; as known at an instant: {known} ms |
| every bank's quality reports, p99 at {RATE} requests/s | <= 10 ms | {all} ms |

| read | requests/s (saturation) | p50 ms at {RATE}/s | p99 ms at {RATE}/s | not 2xx |
|---|---|---|---|---|
{rows}
"#,
        rounds = settings.rounds,
        run = machine.run_by(&format!(
            "RATEWIRE_BENCH_ROUNDS={} RATEWIRE_BENCH_SECONDS={} deploy/bench quality",
            settings.rounds, settings.seconds
        )),
        memory = machine.memory_gib,
        boards = loaded.boards,
        entries = loaded.entries,
        corrections = loaded.corrections,
        retractions = loaded.retractions,
        load = fixed(loaded.seconds, 0),
        from = instant(window.0),
        to = instant(window.1),
        bank = p99(0),
        known = p99(2),
        all = p99(1),
        rows = rows.join("\n"),
    )
}
