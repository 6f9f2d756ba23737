//! Dates relative to today, free ports, and polling with a deadline (tests
//! never sleep to synchronise).

use std::net::TcpListener;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

/// A free loopback port below the kernel's ephemeral range (32768 and up),
/// so that no outgoing connection (clients reconnect constantly) can take it
/// between this check and the process binding it. Never the same port twice
/// in one test process: stacks of tests running in parallel pick their ports
/// before their processes bind them, and two picks of one free port made a
/// process fail with "address in use" while the test talked to another
/// stack's process on it.
pub fn free_port() -> u16 {
    use rand::Rng;
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut rng = rand::thread_rng();
    loop {
        let port = rng.gen_range(20_000..32_000);
        let mut given = GIVEN.lock().expect("ports given");
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
}

/// The date `days` days before today (UTC), as `YYYY-MM-DD`.
pub fn day(days: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::days(days))
        .format("%Y-%m-%d")
        .to_string()
}

/// `hour` o'clock (UTC) on [`day`]`(days)`, as RFC 3339.
pub fn at(days: i64, hour: u32) -> String {
    format!("{}T{hour:02}:00:00Z", day(days))
}

/// An RFC 3339 time `days` days and `hours` hours before now, at whole
/// seconds: boards in tests must not be in the future, and the best-rates
/// series only reaches 30 days back.
pub fn ago(days: i64, hours: i64) -> String {
    let t = chrono::Utc::now() - chrono::Duration::days(days) - chrono::Duration::hours(hours);
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// An RFC 3339 time up to an hour before now, but on today's date in UTC
/// (the stack's service time zone): a board that is today's whatever the
/// hour the test runs at (an hour before 00:30 is yesterday, and a daily
/// series would then carry it over two days).
pub fn earlier_today() -> String {
    let now = chrono::Utc::now();
    let midnight = now
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .expect("midnight exists")
        .and_utc();
    let back = chrono::Duration::hours(1).min((now - midnight) / 2);
    (now - back).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `count` RFC 3339 times an hour apart, the last an hour before now, all in
/// one UTC month: boards that the read model may store against a base
/// whatever the day the test runs on. In a month's first hours they fall
/// at the end of the month before.
pub fn hours_apart_in_one_month(count: i64) -> Vec<String> {
    use chrono::Datelike;
    let now = chrono::Utc::now();
    let month = now
        .date_naive()
        .with_day(1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .expect("a month's first midnight exists")
        .and_utc();
    let end = if now - month > chrono::Duration::hours(count + 1) {
        now
    } else {
        month - chrono::Duration::minutes(1)
    };
    (0..count)
        .map(|k| end - chrono::Duration::hours(count - k))
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .collect()
}

/// An RFC 3339 time `minutes` minutes before now, to the millisecond: a
/// board's as-of time, for sequences of boards within the hour.
pub fn minutes_ago(minutes: i64) -> String {
    use chrono::SubsecRound;
    let t = (chrono::Utc::now() - chrono::Duration::minutes(minutes)).trunc_subsecs(3);
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Waits until at least `needed` seconds are left in the current minute, so
/// that requests a test counts fall into one fixed rate-limit window.
pub async fn room_in_this_minute(needed: u32) {
    use chrono::Timelike;
    while 60 - chrono::Utc::now().second() < needed {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How long a test waits for the projector to show what it published.
pub const VISIBLE_WITHIN: Duration = Duration::from_secs(10);

/// Polls `check` until it yields a value or `timeout` passes.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The sample of `series` (a metric name with its labels, if any, as
/// Prometheus writes them) in a `/metrics` text; 0 when it is absent.
pub fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A well-formed API key nobody was given.
pub fn made_up_key() -> String {
    use rand::distributions::Alphanumeric;
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let mut part = |n| -> String {
        (&mut rng)
            .sample_iter(Alphanumeric)
            .take(n)
            .map(char::from)
            .collect()
    };
    format!("rwk_{}_{}", part(8), part(32))
}

/// An answer without what each rendering stamps with its own time (the
/// best rates' `timestamp` in each entry of `data`), so two renderings of
/// the same data compare equal.
pub fn without_computed_time(mut body: serde_json::Value) -> serde_json::Value {
    if let Some(data) = body["data"].as_object_mut() {
        for entry in data.values_mut() {
            if let Some(entry) = entry.as_object_mut() {
                entry.remove("timestamp");
            }
        }
    }
    body
}
