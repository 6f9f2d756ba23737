//! Per-minute windows and monthly allowances, counted in Redis so every API
//! instance shares them.
//!
//! A request is counted in a pipelined round trip that increments both
//! counters (each increment hands out distinct counts, so concurrent
//! requests can never over-admit) and reads the request's ready view (see
//! [`crate::views::requests`]); requests arriving together share one trip
//! (`shared_trip`). A refused request's counts are given back, so
//! refusals use up nothing.
//! Windows are fixed calendar minutes (UTC) and calendar months in the
//! service time zone.
//!
//! When Redis cannot be asked (down, hung, slower than its budget: see
//! `redis_guard`) each instance decides on its own, admitting at most its
//! share of what Redis may have left, and adds what it admitted to Redis
//! before Redis decides again (`local`). Nothing waits on Redis longer
//! than twice the budget.

pub mod lease;
pub(crate) mod local;
mod shared_trip;
pub mod windows;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_util::sync::CancellationToken;

use crate::access::plans::Limits;
use crate::redis_guard::{RedisGuard, Unavailable};
use crate::views::requests::{Stored, ViewRef};
use lease::Leases;
use local::LocalCounts;
use shared_trip::{Ask, Counted, Failed};
pub use windows::{
    minute_key, month_key, month_window, restored_key, seconds_to_next_minute, Window,
    MINUTE_TTL_SECONDS, MONTH_TTL_SECONDS,
};
use windows::{seconds_until, Windows};

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

/// How often an instance announces itself and counts the live ones.
const INSTANCES_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// An instance not heard from for this long is gone.
const INSTANCE_GONE_MS: i64 = 15_000;

pub struct Limiter {
    trips: mpsc::Sender<Ask>,
    redis: RedisGuard,
    prefix: String,
    timezone: chrono_tz::Tz,
    /// Per-subject knowledge and counts for when Redis cannot be asked
    /// (bounded: see [`local`]).
    local: Arc<LocalCounts>,
    /// Tells the round-trip task to add the counts taken here to Redis.
    add_local: Arc<Notify>,
    /// API instances alive when Redis last said (at least 1): each admits
    /// its share of an allowance while Redis cannot be asked.
    instances: AtomicU64,
    /// This instance's name among them.
    instance: String,
    /// Decisions taken without Redis since start.
    pub local_decisions: AtomicU64,
    /// Slices of busy callers' allowances held here.
    leases: Leases,
}

/// A request's counters: the windows and their Redis keys.
struct Counters {
    minute_window: String,
    month_window: String,
    minute_key: String,
    month_key: String,
}

impl Limiter {
    /// Starts the task that makes the Redis round trips, so it must be
    /// called inside the runtime.
    pub fn new(redis: RedisGuard, prefix: &str, timezone: chrono_tz::Tz) -> Self {
        let local = Arc::new(LocalCounts::new(prefix));
        let add_local = Arc::new(Notify::new());
        Self {
            trips: shared_trip::start(
                redis.clone(),
                Arc::clone(&local),
                Arc::clone(&add_local),
                timezone,
            ),
            redis,
            prefix: prefix.to_owned(),
            timezone,
            local,
            add_local,
            instances: AtomicU64::new(1),
            instance: uuid::Uuid::new_v4().simple().to_string(),
            local_decisions: AtomicU64::new(0),
            leases: Leases::default(),
        }
    }

    /// API instances alive when Redis last said.
    pub fn instances(&self) -> u64 {
        self.instances.load(Ordering::Relaxed).max(1)
    }

    /// `subject`'s counters in this minute and this month.
    fn counters(&self, subject: &str, now: DateTime<Utc>) -> Counters {
        Windows::with(now, self.timezone, |windows| Counters {
            minute_key: minute_key(&self.prefix, subject, &windows.minute),
            month_key: month_key(&self.prefix, subject, &windows.month),
            minute_window: windows.minute.clone(),
            month_window: windows.month.clone(),
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
        view: Option<&ViewRef>,
    ) -> (Decision, Option<Option<Stored>>) {
        let instances = self.instances();
        // Most requests of a busy caller end here, so its counters' key
        // names are made only when Redis is asked.
        let lease = Windows::with(now, self.timezone, |windows| {
            self.leases.take(
                subject,
                &windows.minute,
                &windows.month,
                limits,
                count_month,
                instances,
            )
        });
        let slice = match lease {
            Ok(from_lease) => {
                let decision = self.decided(
                    (
                        Verdict::Allowed,
                        from_lease.minute_used,
                        from_lease.month_used,
                    ),
                    "lease",
                    limits,
                    now,
                );
                return (decision, None);
            }
            Err(slice) => slice,
        };
        let counters = self.counters(subject, now);
        let result = self
            .count_in_redis(subject, &counters, limits, count_month, view, slice)
            .await;
        if slice > 0 {
            let (granted, minute, month) = match &result {
                Ok(c) => (c.leased, c.minute_used + c.leased, c.month_used + c.leased),
                Err(_) => (0, 0, 0),
            };
            self.leases.granted(
                subject,
                &counters.minute_window,
                &counters.month_window,
                granted,
                minute,
                month,
            );
        }
        let ((verdict, minute_used, month_used), read, counted) = match result {
            Ok(counted) => (
                (counted.verdict, counted.minute_used, counted.month_used),
                counted.view,
                "redis",
            ),
            Err(e) => {
                self.local_decisions.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("ratewire_api_redis_errors_total").increment(1);
                // The guard logs each change of Redis's state once.
                tracing::debug!(error = %e, subject, "limiting in this process");
                let decided = self.local.decide(
                    subject,
                    &counters.minute_window,
                    &counters.month_window,
                    limits,
                    count_month,
                    self.instances(),
                );
                (decided, None, "local")
            }
        };
        let decision = self.decided((verdict, minute_used, month_used), counted, limits, now);
        (decision, read)
    }

    /// The decision on `(verdict, minute used, month used)`, counted in
    /// `ratewire_api_limiter_decisions_total` as decided by `counted`.
    fn decided(
        &self,
        (verdict, minute_used, month_used): (Verdict, u64, u64),
        counted: &'static str,
        limits: Limits,
        now: DateTime<Utc>,
    ) -> Decision {
        crate::hot_metrics::increment(
            "ratewire_api_limiter_decisions_total",
            [("decision", verdict.label()), ("counted", counted)],
        );
        Decision {
            verdict,
            limits,
            minute_used,
            month_used,
            minute_reset: seconds_to_next_minute(now),
            month_reset: Windows::with(now, self.timezone, |windows| {
                seconds_until(windows.next_month, now)
            }),
        }
    }

    /// Counts the request in the next shared round trip (see
    /// `shared_trip`): at most the limit's worth of requests ever see a
    /// count within it, across any number of instances. Plain pipelined
    /// commands, not a script: Redis spends far less on them than on a Lua
    /// version (docs/benchmarks.md).
    async fn count_in_redis(
        &self,
        subject: &str,
        counters: &Counters,
        limits: Limits,
        count_month: bool,
        view: Option<&ViewRef>,
        lease: u64,
    ) -> Result<Counted, Failed> {
        if self.redis.is_open() {
            return Err(Failed::Redis(Unavailable::Open));
        }
        let sent = self.local.send(
            subject,
            &counters.minute_window,
            &counters.month_window,
            count_month,
        );
        let (reply, answer) = oneshot::channel();
        self.trips
            .try_send(Ask {
                minute_key: counters.minute_key.clone(),
                month_key: counters.month_key.clone(),
                limits,
                view: view.cloned(),
                lease,
                sent,
                reply,
            })
            .map_err(|e| {
                let (failed, ask) = match e {
                    mpsc::error::TrySendError::Full(ask) => (Failed::Busy, ask),
                    mpsc::error::TrySendError::Closed(ask) => (Failed::Stopped, ask),
                };
                ask.sent.unanswered();
                failed
            })?;
        // The trip itself has the budget; this bounds the wait before it.
        // Given up on, the request stays in flight until its trip ends.
        match tokio::time::timeout(self.redis.budget() * 2, answer).await {
            Ok(answer) => answer.map_err(|_| Failed::Stopped)?,
            Err(_) => Err(Failed::TimedOut),
        }
    }

    /// Gives back to Redis the unused month slices of callers quiet for
    /// `idle` (all of them with zero, at shutdown): they would otherwise
    /// count as used.
    pub async fn give_back_leases(&self, idle: std::time::Duration) {
        let unused = self.leases.take_unused(idle);
        if unused.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        for (subject, month, count) in &unused {
            pipe.decr(month_key(&self.prefix, subject, month), *count)
                .ignore();
        }
        let given = self
            .redis
            .call("giving leased counts back", |mut conn| async move {
                pipe.query_async::<()>(&mut conn).await
            })
            .await;
        match given {
            Ok(()) => tracing::debug!(callers = unused.len(), "unused leased counts given back"),
            Err(e) => {
                tracing::warn!(error = %e, callers = unused.len(), "giving unused leased counts back failed; they count as used")
            }
        }
    }

    /// Gives quiet callers' unused month slices back every second, until
    /// shutdown.
    pub async fn return_idle_leases(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => self.give_back_leases(lease::IDLE).await,
            }
        }
    }

    /// Each time the breaker closes, until shutdown, has the round-trip
    /// task add the counts taken here meanwhile to Redis (see `local`).
    pub async fn reconcile_after_outages(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.redis.closed() => self.add_local.notify_one(),
            }
        }
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
    use super::windows::seconds_to_next_month;
    use super::*;

    /// A limiter whose Redis refuses every call: nothing listens on port 1.
    fn without_redis() -> Limiter {
        let redis = ratewire_readmodel::redis::connect("redis://127.0.0.1:1/0").unwrap();
        Limiter::new(
            RedisGuard::new(redis, std::time::Duration::from_millis(50)),
            "t:",
            chrono_tz::UTC,
        )
    }

    #[tokio::test]
    async fn without_redis_the_process_limits_on_its_own_and_counts_it() {
        let limiter = without_redis();
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
        let limiter = without_redis();
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
