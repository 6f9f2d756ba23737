//! What the known-at bench asks, and how: oha, as the other benches'
//! saturation runs, here with `--rand-regex-url` so that every request
//! names a bank (or currency) and a past instant of its own, drawn
//! uniformly; and oha's open loop (`-q`, `--latency-correction`: each
//! request timed from when it was due) for the latency at a fixed rate.
//!
//! The other benches time their latency with tools/examples/paced.rs,
//! which asks one URL. oha's stall that made paced (its result queue
//! copied each time it doubles, docs/benchmarks.md) does not arise at
//! 200 requests/s: a 10 s run keeps 2,000 results.

use std::io::Write;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use chrono::{DateTime, Duration, DurationRound, SecondsFormat, Utc};

use super::super::load::Latency;
use super::super::Settings;

/// A request (or a family of them, as a `--rand-regex-url` pattern).
#[derive(Debug, Clone)]
pub struct Target {
    /// What oha's summaries are kept as: `oha-NAME.jsonl` in the bench
    /// directory, a line per run.
    pub name: &'static str,
    /// An exact URL, or a pattern (`random`).
    pub url: String,
    pub random: bool,
    pub headers: Vec<String>,
}

/// What one oha run saw: the rate, the latency, and answers that were not
/// 2xx (or not answered at all).
#[derive(Debug, Clone, Copy, Default)]
pub struct Run {
    pub rps: f64,
    pub latency: Latency,
    pub requests: u64,
    pub failed: u64,
}

/// `(a|b|c)`, each a literal: a pattern's uniform choice among them.
pub fn any_of<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = items.into_iter().map(|i| i.to_string()).collect();
    format!("({})", items.join("|"))
}

/// A pattern of instants with milliseconds uniformly spread over
/// `[from, to)`: whole days when the span holds at least three, else
/// whole minutes when it holds three, else whole seconds (every choice
/// spans as long, so each instant is as likely). The span is trimmed to those wholes; `None` when
/// nothing is left. Written for oha, which reads every `.` of a pattern
/// as a literal dot.
pub fn instants(from: DateTime<Utc>, to: DateTime<Utc>) -> Option<String> {
    let whole = |unit: Duration| -> Option<Vec<DateTime<Utc>>> {
        let start = from.duration_trunc(unit).ok()?;
        let start = if start < from { start + unit } else { start };
        let mut at = start;
        let mut all = Vec::new();
        while at + unit <= to {
            all.push(at);
            at += unit;
        }
        Some(all)
    };
    let days = whole(Duration::days(1))?;
    if days.len() >= 3 {
        let heads = days.iter().map(|d| d.format("%Y-%m-%d"));
        let hours = any_of((0..24).map(|h| format!("{h:02}")));
        return Some(format!(
            "{}T{hours}:[0-5][0-9]:[0-5][0-9].[0-9]{{3}}Z",
            any_of(heads)
        ));
    }
    let minutes = whole(Duration::minutes(1))?;
    if minutes.len() >= 3 {
        let heads = minutes.iter().map(|m| m.format("%Y-%m-%dT%H:%M"));
        return Some(format!("{}:[0-5][0-9].[0-9]{{3}}Z", any_of(heads)));
    }
    let seconds = whole(Duration::seconds(1))?;
    if seconds.is_empty() {
        return None;
    }
    let heads = seconds.iter().map(|s| s.format("%Y-%m-%dT%H:%M:%S"));
    Some(format!("{}.[0-9]{{3}}Z", any_of(heads)))
}

/// An instant as `asKnownAt` takes it, to the millisecond.
pub fn instant(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl Target {
    pub fn exact(name: &'static str, url: String, headers: &[String]) -> Self {
        Self {
            name,
            url,
            random: false,
            headers: headers.to_vec(),
        }
    }

    /// `pattern` is a URL whose `?` is written `\?`.
    pub fn random(name: &'static str, pattern: String, headers: &[String]) -> Self {
        Self {
            name,
            url: pattern,
            random: true,
            headers: headers.to_vec(),
        }
    }

    /// Closed loop at the settings' connections, for the settings' seconds.
    pub fn saturate(&self, settings: &Settings) -> anyhow::Result<Run> {
        self.oha(settings, settings.seconds, None)
    }

    /// Open loop at `rate` requests/s.
    pub fn paced(&self, settings: &Settings, rate: u64) -> anyhow::Result<Run> {
        self.oha(settings, settings.seconds, Some(rate))
    }

    /// A short run, not measured: caches and connections warm.
    pub fn warm(&self, settings: &Settings) -> anyhow::Result<()> {
        self.oha(settings, 2, None).map(|_| ())
    }

    /// A few of the URLs the pattern makes (oha's `--dump-urls`).
    pub fn samples(&self, settings: &Settings, count: usize) -> anyhow::Result<Vec<String>> {
        if !self.random {
            return Ok(vec![self.url.clone()]);
        }
        let output = Command::new(&settings.oha)
            .args(["--rand-regex-url", "--dump-urls", &count.to_string()])
            .arg(&self.url)
            .output()
            .context("running oha")?;
        Ok(String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_owned)
            .collect())
    }

    fn oha(&self, settings: &Settings, seconds: u64, rate: Option<u64>) -> anyhow::Result<Run> {
        let mut command = Command::new(&settings.oha);
        command.args(["--no-tui", "--output-format", "json", "-z"]);
        command
            .arg(format!("{seconds}s"))
            .arg("-c")
            .arg(settings.connections.to_string());
        if let Some(rate) = rate {
            command
                .args(["-q", &rate.to_string()])
                .arg("--latency-correction");
        }
        if self.random {
            command.arg("--rand-regex-url");
        }
        for header in &self.headers {
            command.arg("-H").arg(header);
        }
        let output = command
            .arg(&self.url)
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running oha ({})", settings.oha.display()))?;
        if !output.status.success() {
            bail!("oha failed against {}: {}", self.url, output.status);
        }
        let summary = String::from_utf8_lossy(&output.stdout);
        let kept = serde_json::json!({"rate": rate, "seconds": seconds,
            "summary": serde_json::from_str::<serde_json::Value>(&summary).ok()});
        let log = settings.dir().join(format!("oha-{}.jsonl", self.name));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        writeln!(file, "{kept}")?;
        read_run(&summary)
    }
}

/// oha's error for a request cut off at the end of a run.
const DEADLINE: &str = "aborted due to deadline";

/// oha's JSON summary as a [`Run`] (its latencies are in seconds).
fn read_run(json: &str) -> anyhow::Result<Run> {
    let summary: serde_json::Value = serde_json::from_str(json).context("oha's summary")?;
    let count = |field: &str, good: fn(&str) -> bool| -> u64 {
        summary[field]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| good(k))
                    .filter_map(|(_, v)| v.as_u64())
                    .sum()
            })
            .unwrap_or(0)
    };
    let ok = count("statusCodeDistribution", |k| k.starts_with('2'));
    // Requests still in flight when the run's time is up are cut off by
    // oha, not failed by the API.
    let failed = count("statusCodeDistribution", |k| !k.starts_with('2'))
        + count("errorDistribution", |k| k != DEADLINE);
    let ms = |p: &str| {
        summary["latencyPercentiles"][p]
            .as_f64()
            .unwrap_or(f64::NAN)
            * 1000.0
    };
    Ok(Run {
        rps: summary["summary"]["requestsPerSec"]
            .as_f64()
            .context("oha gave no rate")?,
        latency: Latency {
            p50: ms("p50"),
            p99: ms("p99"),
            p999: ms("p99.9"),
            max: summary["summary"]["slowest"].as_f64().unwrap_or(f64::NAN) * 1000.0,
        },
        requests: ok + failed,
        failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn instants_are_whole_minutes_inside_the_span_when_there_are_three() {
        let p = instants(at("2026-11-29T01:04:30.5Z"), at("2026-11-29T01:08:10Z")).unwrap();
        assert_eq!(
            p,
            "(2026-11-29T01:05|2026-11-29T01:06|2026-11-29T01:07):[0-5][0-9].[0-9]{3}Z"
        );
    }

    #[test]
    fn a_long_span_gives_whole_days_and_every_hour_alike() {
        let p = instants(at("2026-01-01T00:30:00Z"), at("2026-01-05T00:00:00Z")).unwrap();
        assert!(
            p.starts_with("(2026-01-02|2026-01-03|2026-01-04)T(00|01|02|"),
            "{p}"
        );
        assert!(
            p.ends_with("|22|23):[0-5][0-9]:[0-5][0-9].[0-9]{3}Z"),
            "{p}"
        );
    }

    #[test]
    fn a_short_span_gives_whole_seconds_and_an_empty_one_none() {
        let p = instants(at("2026-11-29T01:04:58.2Z"), at("2026-11-29T01:05:01Z")).unwrap();
        assert_eq!(p, "(2026-11-29T01:04:59|2026-11-29T01:05:00).[0-9]{3}Z");
        assert_eq!(
            instants(at("2026-11-29T01:04:58.2Z"), at("2026-11-29T01:04:59.1Z")),
            None
        );
    }

    #[test]
    fn a_run_counts_every_answer_that_is_not_2xx_as_failed() {
        let json = r#"{"summary":{"requestsPerSec":250.5,"slowest":0.04},
            "latencyPercentiles":{"p50":0.001,"p99":0.012,"p99.9":0.03},
            "statusCodeDistribution":{"200":990,"503":4},
            "errorDistribution":{"connection closed":6,"aborted due to deadline":32}}"#;
        let run = read_run(json).unwrap();
        assert_eq!((run.requests, run.failed), (1000, 10));
        assert_eq!(run.rps, 250.5);
        assert_eq!(
            (run.latency.p50, run.latency.p99, run.latency.p999),
            (1.0, 12.0, 30.0)
        );
        assert_eq!(run.latency.max, 40.0);
    }
}
