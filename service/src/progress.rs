//! How far a long command-line job (a backfill, a replay, a benchmark) has
//! come: a bar on a terminal, a log line every few seconds otherwise (a CI
//! log or a container's output is no place for redrawn lines).

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often the progress goes to the log when there is no terminal.
const LOG_EVERY: Duration = Duration::from_secs(2);

pub struct Progress {
    what: &'static str,
    bar: Option<ProgressBar>,
    total: Option<u64>,
    logged: Mutex<Option<Instant>>,
}

impl Progress {
    /// Progress of `what` towards `total` units (unknown: `None`).
    pub fn new(what: &'static str, total: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(total) => ProgressBar::new(total).with_style(
                    ProgressStyle::with_template(
                        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, {eta} left) {msg}",
                    )
                    .expect("a valid template"),
                ),
                None => ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("{prefix} [{elapsed_precise}] {pos} ({per_sec}) {msg}")
                        .expect("a valid template"),
                ),
            };
            bar.set_prefix(what);
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self {
            what,
            bar,
            total,
            logged: Mutex::new(None),
        }
    }

    /// `done` units so far; `detail` says more (counts of kinds of result).
    pub fn set(&self, done: u64, detail: &str) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            bar.set_message(detail.to_owned());
            return;
        }
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged.is_some_and(|at| at.elapsed() < LOG_EVERY) {
            return;
        }
        *logged = Some(Instant::now());
        match self.total {
            Some(total) => tracing::info!(done, total, detail, "{}", self.what),
            None => tracing::info!(done, detail, "{}", self.what),
        }
    }

    /// The job is over: the bar stays as it ended.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
