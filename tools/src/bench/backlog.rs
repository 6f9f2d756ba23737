//! `deploy/bench backlog`, and the full run's projector figures: a backlog
//! published with the projector stopped, folded by a projector started on
//! it, then the whole log replayed into a fresh schema.

use std::time::{Duration, Instant};

use anyhow::bail;
use ratewire_service::progress::Progress;

use super::bare_producer::{bare_producer, Produced};
use super::freshness::FRESHNESS_LOAD;
use super::load::Figures;
use super::procs::{self, Procs};
use super::report::fixed;
use super::{say, Settings};

/// What the backlog measured.
pub(super) struct Backlog {
    /// Ingest's figures publishing the backlog.
    pub ingest: Figures,
    /// Boards acknowledged.
    pub accepted: f64,
    /// The same events produced again by the broker's client alone.
    pub bare: Produced,
    /// From the projector's start to its last event committed.
    pub fold_seconds: f64,
    /// From the projector's start to its first events committed: the
    /// process starting, joining the group and fetching, inside
    /// `fold_seconds`.
    pub start_seconds: f64,
    /// Rate entries in the read model after the fold: what the replay folds.
    pub total_entries: i64,
    pub replay_seconds: f64,
}

impl Backlog {
    /// Rate entries folded a second.
    pub fn fold_rate(&self) -> f64 {
        self.accepted * 30.0 / self.fold_seconds
    }

    /// Rate entries folded a second once the first were committed: the
    /// fold without the process's start.
    pub fn folding_rate(&self) -> f64 {
        self.accepted * 30.0 / (self.fold_seconds - self.start_seconds)
    }
}

/// Publishes `settings.entries` rate entries with the projector stopped,
/// starts it on them, then replays the whole log into a fresh schema.
pub(super) async fn backlog(procs: &mut Procs, pool: &sqlx::PgPool) -> anyhow::Result<Backlog> {
    let settings = procs.settings.clone();
    let boards = settings.entries.div_ceil(30).to_string();
    say(format!("ingest: {boards} boards of 30 currencies as fast as 32 publishers can, with the projector stopped"));
    procs.stop("projector");
    let ingest = procs.backlog(settings.entries)?;
    let accepted = ingest.number("accepted");
    say("bare baseline: the same events produced again by the broker's client alone, 32 at a time");
    let bare = bare_producer(accepted as usize, 32).await?;

    say(format!(
        "projector: folding the backlog of {} rate entries",
        accepted * 30.0
    ));
    let started = Instant::now();
    let projector = settings.bin("ratewire-projector");
    procs.start("projector", &projector, &[], &[])?;
    let first = wait_applied(accepted).await?;
    let fold_seconds = started.elapsed().as_secs_f64();
    let start_seconds = (first - started).as_secs_f64();
    let total_entries: i64 = sqlx::query_scalar("SELECT count(*) FROM readmodel.rates")
        .fetch_one(pool)
        .await?;

    say(format!(
        "replay: the whole log ({total_entries} rate entries) into a fresh schema"
    ));
    let started = Instant::now();
    procs.run(
        &projector,
        &["replay", "--schema", "bench_replay", "--no-switch"],
        "replay.log",
    )?;
    Ok(Backlog {
        ingest,
        accepted,
        bare,
        fold_seconds,
        start_seconds,
        total_entries,
        replay_seconds: started.elapsed().as_secs_f64(),
    })
}

/// Waits until the projector's own count of applied events reaches
/// `target` (polled every 20 ms on one connection: polling more often
/// slows the fold it times). Returns when it first saw events applied.
async fn wait_applied(target: f64) -> anyhow::Result<Instant> {
    let progress = Progress::new("projector backlog", Some(target as u64));
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{}/metrics", procs::PROJECTOR);
    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut first = None;
    while Instant::now() < deadline {
        if let Ok(answer) = http.get(&url).send().await {
            let text = answer.text().await.unwrap_or_default();
            let applied = text
                .lines()
                .find_map(|l| l.strip_prefix("ratewire_projector_events_applied_total "))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0);
            progress.set(applied as u64, "events applied");
            if applied > 0.0 {
                first.get_or_insert_with(Instant::now);
            }
            if applied >= target {
                progress.finish();
                return Ok(first.unwrap_or_else(Instant::now));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("the projector did not apply {target} events within an hour")
}

/// `deploy/bench backlog`: the fold of a backlog and the replay alone,
/// printed and not written to the page; a quick check of the fold.
pub async fn backlog_only(settings: &Settings) -> anyhow::Result<()> {
    let mut procs = Procs::new(settings, &[]).await?;
    procs.start_stack().await?;
    let pool = procs::database(procs::DATABASE).await?;
    // A broker started moments ago still compiles its hot paths: after
    // 20 s of this load its JIT compiler took a sixth of the cores while
    // ingest was measured, and a fifth beside the bare baseline; after
    // 90 s, under 4% (perf).
    say("warm-up: the freshness load for 90 s, not measured");
    let warm_up = [FRESHNESS_LOAD.as_slice(), &["--duration", "90s"]].concat();
    procs.run(&settings.bin("ratewire-feed"), &warm_up, "feed.log")?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let measured = backlog(&mut procs, &pool).await?;
    println!(
        "ingest: {} boards/s ({} boards; ack p50 {} ms, p99 {} ms)",
        measured.ingest.get("boards_per_second"),
        measured.accepted,
        measured.ingest.get("ack_p50_ms"),
        measured.ingest.get("ack_p99_ms"),
    );
    println!(
        "the broker's client alone, the same events 32 at a time: {} records/s (ack p50 {} ms, p99 {} ms)",
        fixed(measured.bare.per_second, 0),
        fixed(measured.bare.ack.p50, 2),
        fixed(measured.bare.ack.p99, 2),
    );
    println!(
        "projector, backlog of {} rate entries: {} s = {} entries/s (target >= 400,000)",
        measured.accepted * 30.0,
        fixed(measured.fold_seconds, 2),
        fixed(measured.fold_rate(), 0)
    );
    println!(
        "  of which the start, to its first events committed: {} s; after it, {} entries/s",
        fixed(measured.start_seconds, 2),
        fixed(measured.folding_rate(), 0)
    );
    println!(
        "replay of {} rate entries: {} s (target <= 3 s for 1.15 million)",
        measured.total_entries,
        fixed(measured.replay_seconds, 2)
    );
    Ok(())
}
