//! The load generators: oha for closed-loop saturation, the tools' own
//! `paced` (open loop, latency from each request's due time, no
//! coordinated omission) for latency at a fixed rate, wrk for the limits
//! comparison, and `redis-benchmark` for the bare Redis baseline.

use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use serde::Deserialize;

use super::procs::Procs;
use super::Settings;

/// Latencies of a paced run, in ms.
#[derive(Debug, Clone, Copy, Default)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Latency {
    /// The element-wise median of rounds.
    pub fn median(rounds: &[Latency]) -> Latency {
        let of = |f: fn(&Latency) -> f64| super::median(&rounds.iter().map(f).collect::<Vec<_>>());
        Latency {
            p50: of(|l| l.p50),
            p99: of(|l| l.p99),
            p999: of(|l| l.p999),
            max: of(|l| l.max),
        }
    }
}

/// A request's headers, as `name: value`.
pub type Headers<'a> = &'a [String];

/// Requests per second of `url`, closed loop at `connections`, over the
/// settings' seconds; every answer must be 2xx.
pub fn saturate(settings: &Settings, url: &str, headers: Headers) -> anyhow::Result<f64> {
    let out = oha(
        settings,
        url,
        headers,
        settings.seconds,
        settings.connections,
    )?;
    let summary: serde_json::Value = serde_json::from_str(&out).context("oha's summary")?;
    if let Some(codes) = summary["statusCodeDistribution"].as_object() {
        let bad: Vec<_> = codes.iter().filter(|(k, _)| !k.starts_with('2')).collect();
        if !bad.is_empty() {
            bail!("non-2xx answers from {url}: {bad:?}");
        }
    }
    summary["summary"]["requestsPerSec"]
        .as_f64()
        .context("oha gave no rate")
}

/// A short unmeasured run, so the first measured one meets warm caches.
pub fn warm(
    settings: &Settings,
    url: &str,
    headers: Headers,
    connections: u64,
) -> anyhow::Result<()> {
    oha(settings, url, headers, 2, connections).map(|_| ())
}

fn oha(
    settings: &Settings,
    url: &str,
    headers: Headers,
    seconds: u64,
    connections: u64,
) -> anyhow::Result<String> {
    let mut command = Command::new(&settings.oha);
    command.args(["--no-tui", "--output-format", "json", "-z"]);
    command
        .arg(format!("{seconds}s"))
        .arg("-c")
        .arg(connections.to_string());
    for header in headers {
        command.arg("-H").arg(header);
    }
    let output = command
        .arg(url)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running oha ({})", settings.oha.display()))?;
    if !output.status.success() {
        bail!("oha failed against {url}: {}", output.status);
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[derive(Deserialize)]
struct PacedSummary {
    statuses: std::collections::BTreeMap<String, u64>,
    failed: u64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
}

/// Latency of `url` at `rate` requests/s, open loop, on `connections`;
/// the slowest request of each 100 ms goes to `latency-NAME.jsonl` in the
/// bench directory, to tell a stall from a steady queue. Every answer
/// must be 2xx.
pub fn paced(
    procs: &Procs,
    name: &str,
    url: &str,
    rate: u64,
    connections: u64,
    headers: Headers,
) -> anyhow::Result<Latency> {
    let timeline = std::fs::File::create(procs.dir.join(format!("latency-{name}.jsonl")))?;
    let mut command = Command::new(procs.settings.example("paced"));
    command
        .arg("--rate")
        .arg(rate.max(1).to_string())
        .arg("--seconds")
        .arg(procs.settings.seconds.to_string())
        .arg("--connections")
        .arg(connections.to_string())
        .arg("--timeline");
    for header in headers {
        command.arg("-H").arg(header);
    }
    let output = command
        .arg(url)
        .stderr(timeline)
        .output()
        .context("running paced")?;
    if !output.status.success() {
        bail!("paced failed against {url}: {}", output.status);
    }
    let summary: PacedSummary =
        serde_json::from_slice(&output.stdout).context("paced's summary")?;
    let bad: Vec<_> = summary
        .statuses
        .iter()
        .filter(|(k, _)| !k.starts_with('2'))
        .collect();
    if !bad.is_empty() || summary.failed > 0 {
        bail!(
            "non-2xx answers from {url}: {bad:?}, failed requests: {}",
            summary.failed
        );
    }
    Ok(Latency {
        p50: summary.p50_ms,
        p99: summary.p99_ms,
        p999: summary.p999_ms,
        max: summary.max_ms,
    })
}

/// GETs of `key` per second from `redis-benchmark` (-c `connections`).
pub fn redis_get(connections: u64, key: &str) -> anyhow::Result<f64> {
    let output = Command::new("redis-benchmark")
        .args([
            "-q",
            "-c",
            &connections.to_string(),
            "-n",
            "300000",
            "GET",
            key,
        ])
        .output()
        .context("redis-benchmark is needed (Debian package redis-tools)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.split(|c: char| c.is_whitespace() || c == ',')
        .find_map(|word| word.parse::<f64>().ok())
        .context("redis-benchmark gave no rate")
}

/// wrk's closed-loop run of `url`: requests/s, p50 and p99 in ms.
pub fn wrk(
    settings: &Settings,
    url: &str,
    header: &str,
    seconds: u64,
) -> anyhow::Result<(f64, f64, f64)> {
    let output = Command::new("wrk")
        .args([
            "-t2",
            &format!("-c{}", settings.connections),
            &format!("-d{seconds}s"),
            "--latency",
            "-H",
            header,
            url,
        ])
        .output()
        .context("wrk is needed: apt-get install wrk")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if let Some(line) = text.lines().find(|l| l.contains("Non-2xx")) {
        bail!("wrk saw non-2xx answers: {line}");
    }
    let field = |prefix: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
    };
    let rps = field("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .context("wrk gave no rate")?;
    let p50 = field("50%")
        .map(|v| wrk_ms(&v))
        .context("wrk gave no p50")?;
    let p99 = field("99%")
        .map(|v| wrk_ms(&v))
        .context("wrk gave no p99")?;
    Ok((rps, p50, p99))
}

/// wrk prints 812.00us, 1.23ms or 1.02s.
fn wrk_ms(value: &str) -> f64 {
    let number = |s: &str| s.parse::<f64>().unwrap_or(f64::NAN);
    if let Some(us) = value.strip_suffix("us") {
        number(us) / 1000.0
    } else if let Some(ms) = value.strip_suffix("ms") {
        number(ms)
    } else if let Some(s) = value.strip_suffix('s') {
        number(s) * 1000.0
    } else {
        number(value)
    }
}

/// The `name value` lines `ratewire-feed load` and the bench's clients
/// print, as a lookup.
pub struct Figures(std::collections::BTreeMap<String, String>);

impl Figures {
    pub fn parse(text: &str) -> Self {
        Self(
            text.lines()
                .filter_map(|l| {
                    let mut words = l.split_whitespace();
                    Some((words.next()?.to_owned(), words.next()?.to_owned()))
                })
                .collect(),
        )
    }

    /// The figure `name` as printed ("?" when missing).
    pub fn get(&self, name: &str) -> &str {
        self.0.get(name).map_or("?", String::as_str)
    }

    pub fn number(&self, name: &str) -> f64 {
        self.get(name).parse().unwrap_or(f64::NAN)
    }
}

/// A backlog is a load like the others, so it is written here, beside
/// the generators, as a method of the stack it loads: the processes'
/// module knows nothing of loads.
impl Procs {
    /// A backlog of `entries` rate entries (boards of 30 currencies for
    /// 50 banks) published as fast as 32 publishers can; the load's figures.
    pub fn backlog(&self, entries: u64) -> anyhow::Result<Figures> {
        self.boards(entries.div_ceil(30), 1.0)
    }

    /// `boards` boards of 30 currencies for 50 banks, published as fast as
    /// 32 publishers can, each currency repriced from a bank's board to its
    /// next with the chance `moves`; the load's figures.
    pub fn boards(&self, boards: u64, moves: f64) -> anyhow::Result<Figures> {
        let out = self.run(
            &self.settings.bin("ratewire-feed"),
            &[
                "load",
                "--banks",
                "50",
                "--currencies",
                "30",
                "--rate",
                "0",
                "--concurrency",
                "32",
                "--boards",
                &boards.to_string(),
                "--duration",
                "3600s",
                "--moves",
                &moves.to_string(),
            ],
            "feed.log",
        )?;
        Ok(Figures::parse(&out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_times_read_as_milliseconds() {
        assert_eq!(wrk_ms("812.00us"), 0.812);
        assert_eq!(wrk_ms("1.23ms"), 1.23);
        assert_eq!(wrk_ms("1.02s"), 1020.0);
    }

    #[test]
    fn the_median_of_latencies_is_taken_per_percentile() {
        let l = |p50, p99| Latency {
            p50,
            p99,
            p999: p99,
            max: p99,
        };
        let m = Latency::median(&[l(1.0, 9.0), l(3.0, 5.0), l(2.0, 7.0)]);
        assert_eq!((m.p50, m.p99), (2.0, 7.0));
    }

    #[test]
    fn figures_read_name_value_lines() {
        let f = Figures::parse("accepted 12\nack_p99_ms 3.5\n");
        assert_eq!(f.get("accepted"), "12");
        assert_eq!(f.number("ack_p99_ms"), 3.5);
        assert_eq!(f.get("missing"), "?");
    }
}
