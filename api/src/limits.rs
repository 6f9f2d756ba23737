//! Per-minute windows and monthly allowances, counted in Redis so every API
//! instance shares them.
//!
//! A request is counted in a pipelined round trip that increments both
//! counters (each increment hands out distinct counts, so concurrent
//! requests can never over-admit) and reads the request's ready view (see
//! `routes::view_key`); requests arriving together share one trip
//! (`shared_trip`). A refused request's counts are given back, so
//! refusals use up nothing.
//! Windows are fixed calendar minutes (UTC) and calendar months in the
//! service time zone.
//!
//! When Redis cannot be reached the API keeps serving under a per-process
//! limiter with the same limits (each instance then admits up to the limit
//! on its own), logs a warning and counts every such decision; nothing
//! waits on Redis longer than its response timeout.

mod shared_trip;

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::plans::Limits;
use crate::redis_guard::{RedisGuard, Unavailable};
use shared_trip::{Ask, Counted, Failed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// The per-minute window is spent.
    RateLimited,
    /// The monthly allowance is spent.
    QuotaExceeded,
}

impl Verdict {
    /// The `decision` label of `ratewire_api_limiter_decisions_total`.
    fn label(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::RateLimited => "rate_limited",
            Verdict::QuotaExceeded => "quota_exceeded",
        }
    }
}

/// One request's decision and the numbers its headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub limits: Limits,
    /// Requests counted in this minute, this one included when allowed.
    pub minute_used: u64,
    pub month_used: u64,
    /// Seconds until the minute window resets (1..=60).
    pub minute_reset: u64,
    /// Seconds until the month resets in the service time zone.
    pub month_reset: u64,
}

impl Decision {
    /// An admission that counted nothing (limits switched off).
    pub fn uncounted(limits: Limits, now: DateTime<Utc>) -> Self {
        Decision {
            verdict: Verdict::Allowed,
            limits,
            minute_used: 0,
            month_used: 0,
            minute_reset: seconds_to_next_minute(now),
            month_reset: 0,
        }
    }

    pub fn minute_remaining(&self) -> u64 {
        self.limits.per_minute.saturating_sub(self.minute_used)
    }

    pub fn month_remaining(&self) -> u64 {
        self.limits.per_month.saturating_sub(self.month_used)
    }

    /// Whole seconds to wait before a retry can succeed.
    pub fn retry_after(&self) -> Option<u64> {
        match self.verdict {
            Verdict::Allowed => None,
            Verdict::RateLimited => Some(self.minute_reset),
            Verdict::QuotaExceeded => Some(self.month_reset),
        }
    }
}

/// The month a count belongs to: `YYYYMM` in the service time zone.
pub fn month_window(now: DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    let local = now.with_timezone(&tz);
    format!("{:04}{:02}", local.year(), local.month())
}

/// How long a monthly counter outlives its month (the usage sync restores
/// counters with the same lifetime).
pub const MONTH_TTL_SECONDS: u64 = 40 * 86_400;

/// The Redis key of `subject`'s count in `month` (`*` as subject makes a
/// scan pattern); the usage sync saves and restores these same keys.
pub fn month_key(prefix: &str, subject: &str, month: &str) -> String {
    format!("{prefix}rl:month:{subject}:{month}")
}

/// Seconds from `now` to the next minute boundary (1..=60).
pub fn seconds_to_next_minute(now: DateTime<Utc>) -> u64 {
    60 - u64::from(now.second())
}

/// Seconds from `now` to the first instant of next month in `tz`. Requests
/// take it from [`Windows`]; the tests work it out afresh to check them.
#[cfg(test)]
fn seconds_to_next_month(now: DateTime<Utc>, tz: chrono_tz::Tz) -> u64 {
    seconds_until(next_month(now, tz), now)
}

/// The first instant of the month after `now`'s in `tz`.
fn next_month(now: DateTime<Utc>, tz: chrono_tz::Tz) -> DateTime<Utc> {
    let local = now.with_timezone(&tz);
    let (year, month) = if local.month() == 12 {
        (local.year() + 1, 1)
    } else {
        (local.year(), local.month() + 1)
    };
    tz.with_ymd_and_hms(year, month, 1, 0, 0, 0)
        .earliest()
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(now)
}

fn seconds_until(then: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    (then - now).num_seconds().max(1) as u64
}

/// This minute (UTC) and this month (service time zone) as key parts, and
/// when the month ends. They change once a minute, and working them out
/// (integer formatting, time zone lookups) for every request showed in
/// profiles; each worker thread keeps the current minute's.
struct Windows {
    timezone: chrono_tz::Tz,
    /// Minutes since the epoch.
    index: i64,
    minute: String,
    month: String,
    next_month: DateTime<Utc>,
}

thread_local! {
    static WINDOWS: RefCell<Option<Windows>> = const { RefCell::new(None) };
}

impl Windows {
    fn at(now: DateTime<Utc>, timezone: chrono_tz::Tz) -> Self {
        Self {
            timezone,
            index: now.timestamp().div_euclid(60),
            minute: format!(
                "{:04}{:02}{:02}{:02}{:02}",
                now.year(),
                now.month(),
                now.day(),
                now.hour(),
                now.minute()
            ),
            month: month_window(now, timezone),
            // Months begin on a whole minute in every zone in use, so the
            // minute's value holds for all of it.
            next_month: next_month(now, timezone),
        }
    }

    /// Runs `f` on the windows of `now`'s minute.
    fn with<R>(now: DateTime<Utc>, timezone: chrono_tz::Tz, f: impl FnOnce(&Windows) -> R) -> R {
        WINDOWS.with_borrow_mut(|cached| {
            let index = now.timestamp().div_euclid(60);
            let windows = match cached {
                Some(w) if w.index == index && w.timezone == timezone => w,
                _ => cached.insert(Windows::at(now, timezone)),
            };
            f(windows)
        })
    }
}

/// What this process knows and counts of a subject, for when Redis
/// cannot be asked.
#[derive(Debug, Default)]
struct Local {
    minute_window: String,
    /// The subject's count this minute as Redis last reported it.
    minute_known: u64,
    /// Requests admitted here, without Redis, in this minute.
    minute: u64,
    month_window: String,
    /// The subject's count this month as Redis last reported it.
    month_known: u64,
    /// Requests counted here since, not yet added to Redis.
    month_local: u64,
}

/// Subjects the per-process fallback counts at most.
const LOCAL_SUBJECTS: u64 = 100_000;
/// How often an instance announces itself and counts the live ones.
const INSTANCES_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// An instance not heard from for this long is gone.
const INSTANCE_GONE_MS: i64 = 15_000;

pub struct Limiter {
    trips: mpsc::Sender<Ask>,
    redis: RedisGuard,
    prefix: String,
    timezone: chrono_tz::Tz,
    /// Per-subject knowledge and counts for when Redis cannot be asked.
    /// Bounded: whatever an attacker sends, at most `LOCAL_SUBJECTS`
    /// subjects are kept, the least used going first.
    local: moka::sync::Cache<String, Arc<Mutex<Local>>>,
    /// API instances alive when Redis last said (at least 1): each admits
    /// its share of an allowance while Redis cannot be asked.
    instances: AtomicU64,
    /// This instance's name among them.
    instance: String,
    /// Decisions taken without Redis since start.
    pub local_decisions: AtomicU64,
}

impl Limiter {
    /// Starts the task that makes the Redis round trips, so it must be
    /// called inside the runtime.
    pub fn new(redis: RedisGuard, prefix: &str, timezone: chrono_tz::Tz) -> Self {
        Self {
            trips: shared_trip::start(redis.clone()),
            redis,
            prefix: prefix.to_owned(),
            timezone,
            local: moka::sync::Cache::builder()
                .max_capacity(LOCAL_SUBJECTS)
                .build(),
            instances: AtomicU64::new(1),
            instance: uuid::Uuid::new_v4().simple().to_string(),
            local_decisions: AtomicU64::new(0),
        }
    }

    /// API instances alive when Redis last said.
    pub fn instances(&self) -> u64 {
        self.instances.load(Ordering::Relaxed).max(1)
    }

    /// The Redis keys of `subject`'s counts in this minute and this month.
    fn keys(&self, subject: &str, now: DateTime<Utc>) -> (String, String) {
        Windows::with(now, self.timezone, |windows| {
            (
                format!("{}rl:minute:{subject}:{}", self.prefix, windows.minute),
                month_key(&self.prefix, subject, &windows.month),
            )
        })
    }

    /// Checks and, when allowed, counts one request of `subject`.
    /// `count_month` is false for requests that only count per minute.
    pub async fn check(
        &self,
        subject: &str,
        limits: Limits,
        count_month: bool,
        now: DateTime<Utc>,
    ) -> Decision {
        self.check_and_read(subject, limits, count_month, now, None)
            .await
            .0
    }

    /// [`Limiter::check`], and when the request is allowed also the value
    /// of `view` (`Some(None)`: the key is missing). No value is read when
    /// refused, without `view`, or when Redis is unavailable.
    pub async fn check_and_read(
        &self,
        subject: &str,
        limits: Limits,
        count_month: bool,
        now: DateTime<Utc>,
        view: Option<&str>,
    ) -> (Decision, Option<Option<Bytes>>) {
        let result = self
            .count_in_redis(subject, limits, count_month, now, view)
            .await;
        let ((verdict, minute_used, month_used), read, counted) = match result {
            Ok(counted) => {
                self.remember(subject, counted.minute_used, counted.month_used, now);
                (
                    (counted.verdict, counted.minute_used, counted.month_used),
                    counted.view,
                    "redis",
                )
            }
            Err(e) => {
                self.local_decisions.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("ratewire_api_redis_errors_total").increment(1);
                // The guard logs each change of Redis's state once.
                tracing::debug!(error = %e, subject, "limiting in this process");
                (
                    self.check_locally(subject, limits, count_month, now),
                    None,
                    "local",
                )
            }
        };
        metrics::counter!("ratewire_api_limiter_decisions_total",
            "decision" => verdict.label(), "counted" => counted)
        .increment(1);
        let decision = Decision {
            verdict,
            limits,
            minute_used,
            month_used,
            minute_reset: seconds_to_next_minute(now),
            month_reset: Windows::with(now, self.timezone, |windows| {
                seconds_until(windows.next_month, now)
            }),
        };
        (decision, read)
    }

    /// Counts the request in the next shared round trip (see
    /// `shared_trip`): at most the limit's worth of requests ever see a
    /// count within it, across any number of instances. Plain pipelined
    /// commands, not a script: Redis spent about 25 us a request on the
    /// Lua version and 9 us on separate commands (docs/benchmarks.md).
    async fn count_in_redis(
        &self,
        subject: &str,
        limits: Limits,
        count_month: bool,
        now: DateTime<Utc>,
        view: Option<&str>,
    ) -> Result<Counted, Failed> {
        if self.redis.is_open() {
            return Err(Failed::Redis(Unavailable::Open));
        }
        let (minute_key, month_key) = self.keys(subject, now);
        let (reply, answer) = oneshot::channel();
        self.trips
            .try_send(Ask {
                minute_key,
                month_key,
                count_month,
                limits,
                view: view.map(str::to_owned),
                reply,
            })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => Failed::Busy,
                mpsc::error::TrySendError::Closed(_) => Failed::Stopped,
            })?;
        // The trip itself has the budget; this bounds the wait before it.
        match tokio::time::timeout(self.redis.budget() * 2, answer).await {
            Ok(answer) => answer.map_err(|_| Failed::Stopped)?,
            Err(_) => Err(Failed::TimedOut),
        }
    }

    /// Keeps what a Redis reply said of `subject`'s minute and month, for
    /// when Redis cannot be asked.
    fn remember(&self, subject: &str, minute_used: u64, month_used: u64, now: DateTime<Utc>) {
        let (minute, month) = Windows::with(now, self.timezone, |windows| {
            (windows.minute.clone(), windows.month.clone())
        });
        let counts = self
            .local
            .get_with_by_ref(subject, || Arc::new(Mutex::new(Local::default())));
        let mut local = counts.lock().expect("limiter counters");
        if local.minute_window != minute {
            local.minute_window = minute;
            local.minute = 0;
        }
        local.minute_known = minute_used;
        if local.month_window != month {
            local.month_window = month;
            local.month_local = 0;
        }
        local.month_known = month_used;
    }

    /// The rule while Redis cannot be asked, on this process's counts.
    ///
    /// Each of the `n` live instances (as Redis last said) admits at most
    /// its share of what is left: `(per_minute - known) / n` requests this
    /// minute and `(per_month - known) / n` this month, where `known` is the
    /// subject's count in Redis's last reply to this instance (0 for a
    /// subject it never saw, and for the minute in a later minute). So all
    /// instances together never admit more than the plan allows, whatever
    /// Redis did. A subject whose share of the month is spent is told to
    /// retry in a minute, unless its whole allowance is.
    fn check_locally(
        &self,
        subject: &str,
        limits: Limits,
        count_month: bool,
        now: DateTime<Utc>,
    ) -> (Verdict, u64, u64) {
        let (minute_window, month_window) = Windows::with(now, self.timezone, |windows| {
            (windows.minute.clone(), windows.month.clone())
        });
        let instances = self.instances();
        let counts = self
            .local
            .get_with_by_ref(subject, || Arc::new(Mutex::new(Local::default())));
        let mut local = counts.lock().expect("limiter counters");
        if local.minute_window != minute_window {
            local.minute_window = minute_window;
            local.minute_known = 0;
            local.minute = 0;
        }
        if local.month_window != month_window {
            local.month_window = month_window;
            local.month_known = 0;
            local.month_local = 0;
        }
        let month_used = local.month_known + local.month_local;
        let minute_used = local.minute_known + local.minute;
        let minute_share = limits.per_minute.saturating_sub(local.minute_known) / instances;
        let month_share = limits.per_month.saturating_sub(local.month_known) / instances;
        if local.minute >= minute_share {
            return (Verdict::RateLimited, minute_used, month_used);
        }
        if count_month && local.month_local >= month_share {
            let verdict = if month_used >= limits.per_month {
                Verdict::QuotaExceeded
            } else {
                Verdict::RateLimited
            };
            return (verdict, minute_used, month_used);
        }
        local.minute += 1;
        if count_month {
            local.month_local += 1;
        }
        (
            Verdict::Allowed,
            minute_used + 1,
            month_used + u64::from(count_month),
        )
    }

    /// Adds the monthly counts taken here while Redis could not be asked
    /// to Redis, so quotas and /usage are right again; runs each time the
    /// breaker closes, until shutdown.
    pub async fn reconcile_after_outages(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.redis.closed() => {}
            }
            match self.add_local_counts().await {
                Ok(0) => {}
                Ok(subjects) => {
                    tracing::info!(subjects, "monthly counts taken without redis added to it")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "adding local counts to redis failed; they stay local")
                }
            }
        }
    }

    async fn add_local_counts(&self) -> redis::RedisResult<usize> {
        let pending: Vec<(String, String, u64, Arc<Mutex<Local>>)> = self
            .local
            .iter()
            .filter_map(|(subject, counts)| {
                let local = counts.lock().expect("limiter counters");
                (local.month_local > 0).then(|| {
                    (
                        subject.as_ref().clone(),
                        local.month_window.clone(),
                        local.month_local,
                        Arc::clone(&counts),
                    )
                })
            })
            .collect();
        if pending.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for (subject, month, count, _) in &pending {
            let key = month_key(&self.prefix, subject, month);
            pipe.incr(&key, *count)
                .ignore()
                .cmd("EXPIRE")
                .arg(&key)
                .arg(MONTH_TTL_SECONDS)
                .arg("NX")
                .ignore();
        }
        let mut conn = self.redis.conn();
        pipe.query_async::<()>(&mut conn).await?;
        for (_, _, count, counts) in &pending {
            let mut local = counts.lock().expect("limiter counters");
            local.month_local = local.month_local.saturating_sub(*count);
        }
        Ok(pending.len())
    }

    /// Announces this instance in Redis every few seconds and keeps how
    /// many are alive, until shutdown.
    pub async fn track_instances(self: Arc<Self>, shutdown: CancellationToken) {
        let key = format!("{}api:instances", self.prefix);
        let mut tick = tokio::time::interval(INSTANCES_EVERY);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = Utc::now().timestamp_millis();
            let (key, instance) = (key.clone(), self.instance.clone());
            let counted = self
                .redis
                .call("counting api instances", |mut conn| async move {
                    redis::pipe()
                        .zadd(&key, &instance, now)
                        .ignore()
                        .zrembyscore(&key, "-inf", now - INSTANCE_GONE_MS)
                        .ignore()
                        .pexpire(&key, INSTANCE_GONE_MS * 4)
                        .ignore()
                        .zcard(&key)
                        .query_async::<(u64,)>(&mut conn)
                        .await
                })
                .await;
            if let Ok((live,)) = counted {
                let before = self.instances.swap(live.max(1), Ordering::Relaxed);
                if before != live.max(1) {
                    tracing::info!(instances = live, "api instances alive");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_redis_the_process_limits_on_its_own_and_counts_it() {
        // Nothing listens on port 1: every Redis call fails fast.
        let redis = ratewire_readmodel::redis::connect("redis://127.0.0.1:1/0").unwrap();
        let limiter = Limiter::new(
            RedisGuard::new(redis, std::time::Duration::from_millis(50)),
            "t:",
            chrono_tz::UTC,
        );
        let limits = Limits {
            per_minute: 3,
            per_month: 100,
        };
        let now: DateTime<Utc> = "2026-11-23T08:00:10Z".parse().unwrap();
        let started = std::time::Instant::now();
        let mut verdicts = vec![];
        for _ in 0..4 {
            verdicts.push(limiter.check("key:a", limits, true, now).await.verdict);
        }
        assert_eq!(
            verdicts,
            [
                Verdict::Allowed,
                Verdict::Allowed,
                Verdict::Allowed,
                Verdict::RateLimited
            ]
        );
        assert_eq!(
            limiter.check("key:b", limits, true, now).await.verdict,
            Verdict::Allowed,
            "per subject"
        );
        assert_eq!(limiter.local_decisions.load(Ordering::Relaxed), 5);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "never hangs: {:?}",
            started.elapsed()
        );
        let next_minute = now + chrono::Duration::seconds(60);
        assert_eq!(
            limiter
                .check("key:a", limits, true, next_minute)
                .await
                .verdict,
            Verdict::Allowed,
            "a new window"
        );
    }

    #[tokio::test]
    async fn without_redis_the_monthly_allowance_still_holds() {
        let redis = ratewire_readmodel::redis::connect("redis://127.0.0.1:1/0").unwrap();
        let limiter = Limiter::new(
            RedisGuard::new(redis, std::time::Duration::from_millis(50)),
            "t:",
            chrono_tz::UTC,
        );
        let limits = Limits {
            per_minute: 100,
            per_month: 2,
        };
        let now: DateTime<Utc> = "2026-11-23T08:00:10Z".parse().unwrap();
        assert_eq!(
            limiter.check("key:a", limits, false, now).await.verdict,
            Verdict::Allowed,
            "not counted monthly"
        );
        assert_eq!(
            limiter.check("key:a", limits, true, now).await.verdict,
            Verdict::Allowed
        );
        assert_eq!(
            limiter.check("key:a", limits, true, now).await.verdict,
            Verdict::Allowed
        );
        let refused = limiter.check("key:a", limits, true, now).await;
        assert_eq!(refused.verdict, Verdict::QuotaExceeded);
        assert_eq!(
            refused.retry_after(),
            Some(seconds_to_next_month(now, chrono_tz::UTC))
        );
    }

    #[test]
    fn windows_kept_for_a_minute_agree_with_working_them_out() {
        // Addis Ababa is UTC+3: its January starts at 21:00 UTC on Dec 31.
        let zones = [chrono_tz::Africa::Addis_Ababa, chrono_tz::UTC];
        for at in [
            "2026-12-31T20:59:00Z",
            "2026-12-31T20:59:59Z",
            "2026-12-31T21:00:00Z",
            "2026-12-31T21:00:30Z",
            "2026-12-31T23:59:59Z",
            "2027-01-01T00:00:00Z",
        ] {
            let now: DateTime<Utc> = at.parse().unwrap();
            for tz in zones {
                Windows::with(now, tz, |windows| {
                    assert_eq!(windows.month, month_window(now, tz), "{at} {tz}");
                    assert_eq!(
                        seconds_until(windows.next_month, now),
                        seconds_to_next_month(now, tz),
                        "{at} {tz}"
                    );
                    assert_eq!(windows.minute, now.format("%Y%m%d%H%M").to_string());
                });
            }
        }
    }

    #[test]
    fn the_minute_resets_at_the_next_boundary() {
        let t: DateTime<Utc> = "2026-11-23T08:00:45Z".parse().unwrap();
        assert_eq!(seconds_to_next_minute(t), 15);
        let t: DateTime<Utc> = "2026-11-23T08:00:00Z".parse().unwrap();
        assert_eq!(seconds_to_next_minute(t), 60);
    }

    #[test]
    fn the_month_resets_at_local_midnight_of_the_first() {
        let t: DateTime<Utc> = "2026-12-31T23:00:00Z".parse().unwrap();
        assert_eq!(seconds_to_next_month(t, chrono_tz::UTC), 3_600);
        // Addis Ababa is UTC+3: its January starts at 21:00 UTC on Dec 31.
        let t: DateTime<Utc> = "2026-12-31T20:00:00Z".parse().unwrap();
        assert_eq!(
            seconds_to_next_month(t, chrono_tz::Africa::Addis_Ababa),
            3_600
        );
    }
}
