//! `deploy/bench freshness`, and the full run's freshness: the freshness
//! load (each board polled on the API until served) on a stack of the
//! bench's own, with the projector's own count of how soon it wrote.

use std::fs::File;
use std::process::Stdio;
use std::time::Duration;

use anyhow::bail;

use super::load::Figures;
use super::procs::{self, cpu_pct, rss_mb, Procs};
use super::report::{fixed, row};
use super::{say, Settings};

/// The freshness load: 100 boards/s from 50 banks of 30 currencies.
pub(super) const FRESHNESS_LOAD: [&str; 7] = [
    "load",
    "--banks",
    "50",
    "--currencies",
    "30",
    "--rate",
    "100",
];

/// What the freshness load measured: the feed's figures, and the shares
/// of events whose bank views (and all-banks aggregates) the projector
/// wrote within 25, 50 and 100 ms of the 202.
pub(super) struct Freshness {
    pub fresh: Figures,
    pub at_projector: [String; 3],
    pub over_all: [String; 3],
    pub cpu_load: f64,
    pub under_load: [f64; 4],
}

/// Warms the stack up with the freshness load, then runs it for 30 s with
/// each board polled on the API until served.
pub(super) async fn freshness(
    procs: &Procs,
    feed: &std::path::Path,
    api: &str,
    key: &str,
) -> anyhow::Result<Freshness> {
    // A broker started moments ago still compiles its hot paths.
    say("warm-up: the freshness load for 20 s, not measured");
    let warm_up = [FRESHNESS_LOAD.as_slice(), &["--duration", "20s"]].concat();
    procs.run(feed, &warm_up, "feed.log")?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    say("freshness: 100 boards/s from 50 banks of 30 currencies for 30 s, each polled on the API until served");
    let out = File::create(procs.dir.join("freshness.txt"))?;
    let errors = File::options()
        .append(true)
        .create(true)
        .open(procs.dir.join("feed.log"))?;
    let mut freshness = procs
        .command(feed, &[])
        .args(FRESHNESS_LOAD)
        .args(["--duration", "30s", "--watch-api", api, "--api-key", key])
        .stdout(out)
        .stderr(errors)
        .stdin(Stdio::null())
        .spawn()?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cpu_load = cpu_pct(15, &[procs.pid("broker"), procs.pid("projector")]).await;
    let under_load = rss(procs);
    let status = tokio::task::spawn_blocking(move || freshness.wait()).await??;
    if !status.success() {
        bail!(
            "the freshness load failed; see {}/feed.log",
            procs.dir.display()
        );
    }
    let fresh = Figures::parse(&std::fs::read_to_string(procs.dir.join("freshness.txt"))?);
    let metrics = reqwest::get(format!("http://127.0.0.1:{}/metrics", procs::PROJECTOR))
        .await?
        .text()
        .await?;
    // Kept for reading the stages' histograms after a run.
    std::fs::write(procs.dir.join("projector-metrics.txt"), &metrics)?;
    Ok(Freshness {
        fresh,
        at_projector: shares_within(&metrics, "ratewire_projector_visible_delay_seconds"),
        over_all: shares_within(&metrics, "ratewire_projector_aggregates_delay_seconds"),
        cpu_load,
        under_load,
    })
}

/// The resident memory (MB) of ingest, the projector, the API and the broker.
pub(super) fn rss(procs: &Procs) -> [f64; 4] {
    ["ingest", "projector", "api", "broker"].map(|p| rss_mb(procs.pid(p)))
}

/// `deploy/bench freshness`: the freshness load alone, printed and not
/// written to the page; a quick check of the writer's hot path.
pub async fn freshness_only(settings: &Settings) -> anyhow::Result<()> {
    let mut procs = Procs::new(settings, &[]).await?;
    procs.start_stack().await?;
    let key = procs.api_key("bench", "bench")?;
    let api = format!("http://127.0.0.1:{}", procs::API);
    let feed = settings.bin("ratewire-feed");
    let measured = freshness(&procs, &feed, &api, &key).await?;
    println!("| what | p50 | p99 | p99.9 | max |\n|---|---|---|---|---|");
    println!("{}", freshness_rows(&measured.fresh));
    let [a, b, c] = &measured.at_projector;
    println!("bank views written within 25/50/100 ms of the 202: {a}% / {b}% / {c}%");
    let [a, b, c] = &measured.over_all;
    println!("all-banks aggregates within 25/50/100 ms of the 202: {a}% / {b}% / {c}%");
    println!(
        "broker and projector CPU under the load: {}%",
        fixed(measured.cpu_load, 1)
    );
    Ok(())
}

/// The shares (%) of the histogram `metric`'s events within 25, 50 and
/// 100 ms.
fn shares_within(metrics: &str, metric: &str) -> [String; 3] {
    let bucket = |le: &str| -> f64 {
        let prefix = format!("{metric}_bucket{{le=\"{le}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let all = bucket("+Inf");
    ["0.025", "0.05", "0.1"].map(|le| match all > 0.0 {
        true => fixed(100.0 * bucket(le) / all, 1),
        false => "n/a".into(),
    })
}

pub(super) fn freshness_rows(fresh: &Figures) -> String {
    [
        ("acknowledged (202)", "ack"),
        ("served by the API (`/rates?bankId`)", "visible"),
        ("... from the 202", "visible_after_ack"),
        ("served in the all-banks lists (`/banks`)", "listed"),
        ("... from the 202", "listed_after_ack"),
    ]
    .iter()
    .map(|(what, key)| {
        let cells: Vec<String> = std::iter::once((*what).to_owned())
            .chain(
                ["p50", "p99", "p999", "max"]
                    .map(|p| fresh.get(&format!("{key}_{p}_ms")).to_owned()),
            )
            .collect();
        row(&cells)
    })
    .collect::<Vec<_>>()
    .join("\n")
}
