//! `ratewire-bench`: the benchmarks' harness (see `ratewire_tools::bench`);
//! `deploy/bench` builds it and the clients, then runs it.

use clap::{Parser, Subcommand};
use ratewire_tools::bench::{self, Settings};

#[derive(Parser)]
#[command(
    name = "ratewire-bench",
    about = "ratewire benchmarks, written to docs/benchmarks.md"
)]
struct Cli {
    #[command(flatten)]
    settings: Settings,
    #[command(subcommand)]
    scenario: Option<Scenario>,
}

#[derive(Subcommand)]
enum Scenario {
    /// Everything on a stack of its own, beside the baselines (the default).
    All,
    /// /api/v1/rates?bankId=1 with rate limits on and off, on the running
    /// local stack.
    Limits,
    /// A legitimate client's latency and the API's memory under slow-header
    /// clients and a flood of made-up keys.
    Abuse,
    /// Many live-stream subscribers while boards are published; then
    /// five-year daily series.
    Live,
    /// One, two and three projectors folding the same backlog.
    Projectors,
    /// Freshness with one projector and with three sharing the partitions;
    /// how soon boards are fresh again after a member joins, leaves or is
    /// killed; what the group's heartbeats cost at rest.
    Group,
    /// 10,000 alerts crossed by one board: the time to the last signed
    /// call, and the board's freshness beside it.
    Alerts,
    /// The freshness load alone, printed and not written to the page.
    Freshness,
    /// The projector on a backlog and the replay alone, printed and not
    /// written to the page.
    Backlog,
    /// The API's hot reads beside the axum baseline, printed and not
    /// written to the page (pairs two builds: RATEWIRE_BENCH_ROOT).
    Reads,
    /// Answers as known at a past instant on a year of hourly history:
    /// latency and throughput beside the live path, a final answer asked
    /// again, Postgres bytes before and after the bitemporal change, signed
    /// `/convert`.
    KnownAt,
    /// The quality reports on a month of hourly history: live and as
    /// known at past instants, beside the live path and the baseline.
    Quality,
    /// Postgres bytes per board on three feeds (every value changing, the
    /// demo's mix, every board repeated), beside the same boards in the
    /// layouts before.
    Storage,
    /// What OpenTelemetry traces cost: ingest and the API with traces off,
    /// and on at two sampling ratios, beside the bare baselines.
    Traces,
    /// The README's two commands on fresh clones: `deploy/stack up` with
    /// every cache empty and nothing started, then `.ci/run`.
    Setup,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let settings = &cli.settings;
    match cli.scenario.unwrap_or(Scenario::All) {
        Scenario::All => bench::full::run(settings).await,
        Scenario::Limits => bench::limits::run(settings).await,
        Scenario::Abuse => bench::abuse::run(settings).await,
        Scenario::Live => bench::live::run(settings).await,
        Scenario::Projectors => bench::projectors::run(settings).await,
        Scenario::Group => bench::group::run(settings).await,
        Scenario::Alerts => bench::alerts::run(settings).await,
        Scenario::Reads => bench::reads::run(settings).await,
        Scenario::Freshness => bench::freshness::freshness_only(settings).await,
        Scenario::Backlog => bench::backlog::backlog_only(settings).await,
        Scenario::KnownAt => bench::known_at::run(settings).await,
        Scenario::Quality => bench::quality::run(settings).await,
        Scenario::Storage => bench::storage::run(settings).await,
        Scenario::Setup => bench::setup::run(settings).await,
        Scenario::Traces => bench::traces::run(settings).await,
    }
}
