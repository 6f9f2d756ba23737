//! The benchmarks: scenarios that start the real processes (release
//! builds) on a stack of their own, load them with the tools' clients and
//! the load generators, and write what they measured into
//! docs/benchmarks.md, each into its own section. Every figure that varies
//! from run to run is the median of `--rounds` rounds, beside the bare
//! baseline measured in the same run.
//!
//! [`procs`] runs and watches the processes, [`load`] drives the load
//! generators against them (a backlog for the projector included),
//! [`report`] writes Markdown; one module per scenario:
//! [`full`], [`limits`], [`abuse`], [`live`], [`projectors`], [`group`],
//! [`alerts`], [`known_at`], [`storage`], [`traces`].

pub mod abuse;
pub mod alerts;
pub mod backlog;
pub mod bare_producer;
pub mod freshness;
pub mod full;
pub mod group;
pub mod known_at;
pub mod limits;
pub mod live;
pub mod load;
pub mod procs;
pub mod projectors;
pub mod quality;
pub mod reads;
pub mod report;
pub mod setup;
pub mod storage;
pub mod traces;

use std::path::PathBuf;

/// What every scenario is run with.
#[derive(clap::Args, Debug, Clone)]
pub struct Settings {
    /// The repository: where the release binaries and docs/benchmarks.md are.
    #[arg(long, env = "RATEWIRE_BENCH_ROOT", default_value = ".")]
    pub root: PathBuf,
    /// Seconds of each API measurement.
    #[arg(long, env = "RATEWIRE_BENCH_SECONDS", default_value_t = 10)]
    pub seconds: u64,
    /// Connections of the closed-loop runs.
    #[arg(long, env = "RATEWIRE_BENCH_CONNECTIONS", default_value_t = 32)]
    pub connections: u64,
    /// Rounds of each measurement; the report gives their median.
    #[arg(long, env = "RATEWIRE_BENCH_ROUNDS", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub rounds: u64,
    /// The projector's backlog, in rate entries.
    #[arg(long, env = "RATEWIRE_BENCH_ENTRIES", default_value_t = 1_000_000)]
    pub entries: u64,
    /// Where the oha load generator is (`deploy/bench` installs it).
    #[arg(long, env = "RATEWIRE_BENCH_OHA", default_value = "oha")]
    pub oha: PathBuf,
    /// The live stream's subscribers (`live`).
    #[arg(long, env = "RATEWIRE_BENCH_SUBSCRIBERS", default_value_t = 10_000)]
    pub subscribers: u64,
    /// Slow-header clients of the attack (`abuse`).
    #[arg(long, env = "RATEWIRE_BENCH_SLOW_CLIENTS", default_value_t = 1_000)]
    pub slow_clients: u64,
    /// Requests per second of made-up keys in the attack (`abuse`).
    #[arg(long, env = "RATEWIRE_BENCH_FLOOD_RATE", default_value_t = 2_000)]
    pub flood_rate: u64,
    /// The legitimate client's requests per second (`abuse`).
    #[arg(long, env = "RATEWIRE_BENCH_LEGIT_RATE", default_value_t = 500)]
    pub legit_rate: u64,
    /// Requests per second of the five-year series runs (`live`).
    #[arg(long, env = "RATEWIRE_BENCH_SERIES_RATE", default_value_t = 50)]
    pub series_rate: u64,
    /// Days of history of 50 banks x 30 currencies publishing hourly
    /// (`known-at`; 365 is about 438,000 boards).
    #[arg(long, env = "RATEWIRE_BENCH_DAYS", default_value_t = 365, value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub days: u64,
    /// The page written (default docs/benchmarks.md; another one for a
    /// trial run whose figures are not to be kept).
    #[arg(long, env = "RATEWIRE_BENCH_PAGE")]
    pub page: Option<PathBuf>,
}

impl Settings {
    /// A release binary or example of the workspace.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.root.join("target/release").join(name)
    }

    pub fn example(&self, name: &str) -> PathBuf {
        self.root.join("target/release/examples").join(name)
    }

    /// Where the scenarios keep their logs and intermediate files.
    pub fn dir(&self) -> PathBuf {
        self.root.join(".stack/bench")
    }

    /// The page the scenarios write.
    pub fn page(&self) -> PathBuf {
        self.page
            .clone()
            .unwrap_or_else(|| self.root.join("docs/benchmarks.md"))
    }
}

/// The machine the figures come from, as the report's first line says.
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub memory_gib: u64,
    pub date: String,
}

impl Machine {
    pub fn here() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, name)| name.trim().to_owned())
            .unwrap_or_else(|| "unknown CPU".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kib: u64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        Self {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            memory_gib: (kib as f64 / 1_048_576.0).round() as u64,
            date: chrono::Utc::now().format("%Y-%m-%d").to_string(),
        }
    }

    /// "`deploy/bench X`, DATE, on N cores (CPU)".
    pub fn run_by(&self, command: &str) -> String {
        format!(
            "`{command}`, {}, on {} cores ({})",
            self.date, self.cores, self.cpu
        )
    }
}

/// The median of `values` (the lower middle of an even count: a figure
/// that was measured).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
        .get((sorted.len().max(1) - 1) / 2)
        .copied()
        .unwrap_or(f64::NAN)
}

/// What `deploy/bench` prints while it works.
pub fn say(what: impl std::fmt::Display) {
    eprintln!("==> {what}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_a_measured_value() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.0);
        assert_eq!(median(&[7.0]), 7.0);
        assert!(median(&[]).is_nan());
    }
}
