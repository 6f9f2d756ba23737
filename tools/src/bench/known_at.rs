//! `deploy/bench known-at`: answers as known at a past instant (issue 59),
//! on a history of a year of 50 banks x 30 currencies publishing hourly
//! (`--days`): its reads at random past instants against the live path
//! and the bare baseline, a final answer asked again, Postgres bytes per
//! rate entry before and after the bitemporal change, signed against
//! unsigned `/convert`, and the live `/rates?bankId` beside the last full
//! run.
//!
//! `history` loads the history, `targets` asks the API (oha),
//! `storage` measures Postgres, `live_times` gives the history the
//! known-at times of a year published live (the reads as known at are
//! measured on both), `section` writes the page's section.

pub(super) mod history;
mod live_times;
mod section;
mod storage;
pub(super) mod targets;

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};

use super::load::Latency;
use super::procs::{self, Procs};
use super::report::replace_section;
use super::{median, say, Settings};
use history::Loaded;
use storage::Footprint;
use targets::{any_of, instant, instants, Run, Target};

/// The rate of the latency target: p99 within 20 ms at 200 requests/s.
pub const RATE: u64 = 200;

/// The reads measured at saturation and at [`RATE`], in the table's order.
const READS: [&str; 5] = [
    "`/rates?bankId`, as loaded, asKnownAt a random instant of the load, a random bank",
    "best-rates, as loaded, asKnownAt a random instant of the load, a random currency",
    "`/rates?bankId`, live, a random bank",
    "best-rates, live, a random currency",
    "baseline: axum returning `/rates?bankId=1`'s bytes",
];

/// The reads as known at measured again on the history as if published
/// live, at random instants of its year.
const PUBLISHED_LIVE: [&str; 2] = [
    "`/rates?bankId`, published live, asKnownAt a random instant of the year, a random bank",
    "best-rates, published live, asKnownAt a random instant of the year, a random currency",
];

/// The reads measured at saturation only.
const THROUGHPUTS: [&str; 4] = [
    "a final answer asked again (`/rates?bankId=1&asKnownAt=T`)",
    "`/rates?bankId=1`, live",
    "`/convert?from=USD&to=ETB&amount=100`",
    "the same, signed (`Accept-Signature`)",
];

/// A read's figures: medians over the rounds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    pub rps: f64,
    /// At [`RATE`] (reads only).
    pub latency: Latency,
    /// Answers not 2xx (or not answered) over every run of the read.
    pub failed: u64,
    pub requests: u64,
}

impl Figures {
    fn of(saturated: &[Run], paced: &[Run]) -> Self {
        let runs = saturated.iter().chain(paced);
        Self {
            rps: median(&saturated.iter().map(|r| r.rps).collect::<Vec<_>>()),
            latency: Latency::median(&paced.iter().map(|r| r.latency).collect::<Vec<_>>()),
            failed: runs.clone().map(|r| r.failed).sum(),
            requests: runs.map(|r| r.requests).sum(),
        }
    }
}

/// Everything the section reports.
pub struct Measured {
    pub command: String,
    pub loaded: Loaded,
    /// From the last 202 of the load to the fold having it all.
    pub fold_lag: f64,
    /// The instants asked: from when every bank had a board to the last
    /// board known.
    pub window: (DateTime<Utc>, DateTime<Utc>),
    pub final_at: DateTime<Utc>,
    pub reads: Vec<Figures>,
    pub throughputs: Vec<Figures>,
    /// `PUBLISHED_LIVE`, and the span of their instants.
    pub published_live: Vec<Figures>,
    pub year: (DateTime<Utc>, DateTime<Utc>),
    pub footprint: Footprint,
    pub bodies: [u64; 2],
}

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let mut procs = Procs::new(settings, &[]).await?;
    procs.start_stack().await?;
    let ingest_url = format!("http://127.0.0.1:{}", procs::INGEST);
    let client = procs::ingest_client()?;
    let banks = history::register(&client).await?;
    say(format!(
        "history: {} days of hourly boards of {} banks x 30 currencies, through the backfill",
        settings.days,
        banks.len()
    ));
    let loaded = history::load(&client, &ingest_url, &banks, settings.days).await?;
    let loaded_at = Instant::now();
    let pool = procs::database(procs::DATABASE).await?;
    let schema: String = sqlx::query_scalar("SELECT schema_name FROM ratewire.read_model")
        .fetch_one(&pool)
        .await?;
    wait_folded(&pool, &schema, &loaded).await?;
    let fold_lag = loaded_at.elapsed().as_secs_f64();
    let (from, to) = known_window(&pool, &schema).await?;
    let pattern =
        instants(from, to).context("no whole second between the first and last board known")?;
    let final_at = from + (to - from) / 2;

    let key = procs.api_key("known-at", "bench")?;
    let headers = vec![
        format!("x-api-key: {key}"),
        "accept-encoding: identity".into(),
    ];
    let api = format!("http://127.0.0.1:{}", procs::API);
    let http = reqwest::Client::new();
    wait_final(
        &http,
        &headers,
        &format!(
            "{api}/api/v1/rates?bankId={}&asKnownAt={}",
            banks[0].id,
            instant(to)
        ),
    )
    .await?;

    let bank_ids = any_of(banks.iter().map(|b| b.id));
    let codes = any_of(history::currencies().map(|(c, _)| c));
    let one = banks[0].id;
    let kid = signing_key_id(&http, &headers, &api).await?;
    let signed = [
        headers.clone(),
        vec![format!(
            r#"accept-signature: sig1=("@status" "content-digest" "content-type");keyid="{kid}""#
        )],
    ]
    .concat();
    let baseline_addr = format!("127.0.0.1:{}", procs::BASELINE);
    let convert = format!("{api}/api/v1/convert?from=USD&to=ETB&amount=100");
    let reads = [
        Target::random(
            "known-rates",
            format!("{api}/api/v1/rates\\?bankId={bank_ids}&asKnownAt={pattern}"),
            &headers,
        ),
        Target::random(
            "known-best",
            format!("{api}/api/v1/rates/best-rates\\?currencyCode={codes}&asKnownAt={pattern}"),
            &headers,
        ),
        Target::random(
            "live-rates",
            format!("{api}/api/v1/rates\\?bankId={bank_ids}"),
            &headers,
        ),
        Target::random(
            "live-best",
            format!("{api}/api/v1/rates/best-rates\\?currencyCode={codes}"),
            &headers,
        ),
        Target::exact(
            "baseline",
            format!("http://{baseline_addr}/api/v1/rates?bankId={one}"),
            &headers,
        ),
    ];
    let throughputs = [
        Target::exact(
            "final",
            format!(
                "{api}/api/v1/rates?bankId={one}&asKnownAt={}",
                instant(final_at)
            ),
            &headers,
        ),
        Target::exact(
            "live-one",
            format!("{api}/api/v1/rates?bankId={one}"),
            &headers,
        ),
        Target::exact("convert", convert.clone(), &headers),
        Target::exact("convert-signed", convert, &signed),
    ];

    // The baseline answers what the live path answers for bank one.
    let body = procs.dir.join("body.json");
    let live_body = get(&http, &throughputs[1].url, &headers).await?;
    std::fs::write(&body, &live_body.1)?;
    let final_body = get(&http, &throughputs[0].url, &headers).await?;
    if !final_body.0.contains("immutable") {
        bail!(
            "{} is not answered as final: {}",
            throughputs[0].url,
            final_body.0
        );
    }
    let constant = settings.example("constant");
    procs.start(
        "baseline",
        &constant,
        &[&baseline_addr, &body.to_string_lossy()],
        &[],
    )?;
    procs::wait_url(&format!("http://{baseline_addr}/")).await?;
    for target in reads.iter().chain(&throughputs) {
        for url in target.samples(settings, 2)? {
            let (_, bytes) = get(&http, &url, &target.headers).await?;
            anyhow::ensure!(!bytes.is_empty(), "{url} answered nothing");
        }
    }

    say(format!(
        "reads: {} rounds of oha ({}s closed loop at {} connections, then {}s at {RATE} requests/s)",
        settings.rounds, settings.seconds, settings.connections, settings.seconds
    ));
    let (read_figures, throughput_figures) =
        tokio::task::block_in_place(|| measure(settings, &reads, &throughputs))?;
    procs.stop("baseline");

    say("storage: the read model's bytes, and the same rows in the tables before 0008");
    let footprint = storage::measure(&pool, &schema).await?;
    storage::drop_copy(&pool).await?;

    say("the same history as if published live (known-at times beside the as-of times); the API restarted, its final answers forgotten");
    live_times::as_if_published_live(&pool, &schema).await?;
    procs.stop("api");
    let signing = procs.dir.join("signing-key.pem").display().to_string();
    procs.start(
        "api",
        &settings.bin("ratewire-api"),
        &[],
        &[("RATEWIRE_SIGNING_KEY_FILE", signing)],
    )?;
    procs::wait_url(&format!("{api}/readyz")).await?;
    let year = (
        loaded.first_as_of + chrono::Duration::hours(1),
        loaded.last_as_of,
    );
    let in_year = instants(year.0, year.1).context("no whole second in the history")?;
    let live_reads = [
        Target::random(
            "year-known-rates",
            format!("{api}/api/v1/rates\\?bankId={bank_ids}&asKnownAt={in_year}"),
            &headers,
        ),
        Target::random(
            "year-known-best",
            format!("{api}/api/v1/rates/best-rates\\?currencyCode={codes}&asKnownAt={in_year}"),
            &headers,
        ),
    ];
    for target in &live_reads {
        for url in target.samples(settings, 2)? {
            get(&http, &url, &target.headers).await?;
        }
    }
    let (published_live, _) = tokio::task::block_in_place(|| measure(settings, &live_reads, &[]))?;

    let measured = Measured {
        command: format!(
            "RATEWIRE_BENCH_DAYS={} RATEWIRE_BENCH_ROUNDS={} RATEWIRE_BENCH_SECONDS={} deploy/bench known-at",
            settings.days, settings.rounds, settings.seconds
        ),
        loaded,
        fold_lag,
        window: (from, to),
        final_at,
        reads: read_figures,
        throughputs: throughput_figures,
        published_live,
        year,
        footprint,
        bodies: [live_body.1.len() as u64, final_body.1.len() as u64],
    };
    let page = settings.page();
    let last_full = std::fs::read_to_string(&page)
        .ok()
        .and_then(|p| section::last_full_run(&p));
    replace_section(
        &page,
        &section::render(settings, &measured, last_full.as_ref()),
    )
}

/// Every round asks every read at saturation and then at [`RATE`], and
/// every throughput at saturation, in turn, so that a slow moment of the
/// machine falls on all of them alike; the figures are medians.
pub(super) fn measure(
    settings: &Settings,
    reads: &[Target],
    throughputs: &[Target],
) -> anyhow::Result<(Vec<Figures>, Vec<Figures>)> {
    for target in reads.iter().chain(throughputs) {
        target.warm(settings)?;
    }
    let mut read_runs = vec![(Vec::new(), Vec::new()); reads.len()];
    let mut throughput_runs = vec![Vec::new(); throughputs.len()];
    for round in 1..=settings.rounds {
        say(format!("round {round} of {}", settings.rounds));
        for (target, (saturated, paced)) in reads.iter().zip(&mut read_runs) {
            saturated.push(target.saturate(settings)?);
            paced.push(target.paced(settings, RATE)?);
        }
        for (target, saturated) in throughputs.iter().zip(&mut throughput_runs) {
            saturated.push(target.saturate(settings)?);
        }
    }
    Ok((
        read_runs.iter().map(|(s, p)| Figures::of(s, p)).collect(),
        throughput_runs
            .iter()
            .map(|s| Figures::of(s, &[]))
            .collect(),
    ))
}

/// Waits until the fold has every board, correction and retraction of
/// the history (an hour at most, and never a minute without progress).
pub(super) async fn wait_folded(
    pool: &sqlx::PgPool,
    schema: &str,
    loaded: &Loaded,
) -> anyhow::Result<()> {
    let versions = (loaded.boards + loaded.corrections) as i64;
    let retractions = loaded.retractions as i64;
    let progress = ratewire_service::progress::Progress::new("the fold", Some(versions as u64));
    let query = format!(
        "SELECT (SELECT count(*) FROM {schema}.board_versions),
                (SELECT count(*) FROM {schema}.retracted_boards)"
    );
    let (started, mut last, mut moved) = (Instant::now(), -1, Instant::now());
    loop {
        let (folded, retracted): (i64, i64) = sqlx::query_as(&query).fetch_one(pool).await?;
        progress.set(folded as u64, "board versions");
        if folded >= versions && retracted >= retractions {
            progress.finish();
            return Ok(());
        }
        if folded != last {
            (last, moved) = (folded, Instant::now());
        }
        if moved.elapsed() > Duration::from_secs(60)
            || started.elapsed() > Duration::from_secs(3600)
        {
            bail!(
                "the fold stopped at {folded} of {versions} board versions and {retracted} of {retractions} retractions; see projector.log in the bench directory"
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// From when every bank had a board known to the last board known: the
/// instants a history's answers as known at are asked at.
pub(super) async fn known_window(
    pool: &sqlx::PgPool,
    schema: &str,
) -> anyhow::Result<(DateTime<Utc>, DateTime<Utc>)> {
    Ok(sqlx::query_as(&format!(
        "SELECT max(first), (SELECT max(known_from) FROM {schema}.board_versions)
         FROM (SELECT min(known_from) AS first FROM {schema}.board_versions GROUP BY bank_id) f"
    ))
    .fetch_one(pool)
    .await?)
}

/// Waits until `url` is answered as final (its partitions settled past
/// its instant).
async fn wait_final(http: &reqwest::Client, headers: &[String], url: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (cache_control, _) = get(http, url, headers).await?;
        if cache_control.contains("immutable") {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{url} was not final within two minutes: {cache_control}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A 2xx answer's Cache-Control and body.
async fn get(
    http: &reqwest::Client,
    url: &str,
    headers: &[String],
) -> anyhow::Result<(String, Vec<u8>)> {
    let mut request = http.get(url);
    for header in headers {
        if let Some((name, value)) = header.split_once(':') {
            request = request.header(name.trim(), value.trim());
        }
    }
    let answer = request.send().await.with_context(|| format!("GET {url}"))?;
    let status = answer.status();
    let cache_control = answer
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = answer.bytes().await?.to_vec();
    if !status.is_success() {
        bail!(
            "{url} was answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok((cache_control, body))
}

/// The current signing key's id, as `Accept-Signature` names it.
async fn signing_key_id(
    http: &reqwest::Client,
    headers: &[String],
    api: &str,
) -> anyhow::Result<String> {
    let (_, body) = get(http, &format!("{api}/api/v1/signing-keys"), headers).await?;
    let set: serde_json::Value = serde_json::from_slice(&body)?;
    set["keys"][0]["kid"]
        .as_str()
        .map(str::to_owned)
        .context("the API serves no signing key")
}
