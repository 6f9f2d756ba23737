//! What one API instance knows and counts of each subject, so it can
//! decide without Redis and never let a plan be exceeded by doing so.
//!
//! For each subject and window an instance keeps:
//! - `known`: the highest count Redis reported to it (answers reach their
//!   requests in any order, so the highest is the latest);
//! - `in_flight`: requests sent to Redis and not answered yet, each of
//!   which Redis may still admit;
//! - `local`: requests it admitted itself while Redis could not be asked,
//!   that no Redis answer has counted yet; and of those, `unsent`, the
//!   ones not yet added to Redis.
//!
//! Deciding alone, an instance admits at most its share of what may be
//! left, `(limit - known - in_flight) / n` with `n` the live instances.
//! Its own admissions reach Redis before Redis decides anything else for
//! the subject: the round-trip task (the only writer of counts) adds a
//! subject's unsent counts to the `INCRBY` of the next trip that carries
//! one of its requests, and adds everyone else's in one pipeline when the
//! breaker closes. Taking them when a trip is built, in that one task,
//! and not when a request is queued, is what keeps the order: a trip built
//! after an admission carries it, a trip built before is in flight and
//! already limits it.
//!
//! A trip whose answer never came may still have been counted by Redis;
//! what it carried is then added again. Requests so count twice, never
//! zero times: an outage can refuse a little early, never admit more.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ratewire_readmodel::redis::Connection;

use super::windows::{minute_key, month_key, Window, MINUTE_TTL_SECONDS, MONTH_TTL_SECONDS};
use super::Verdict;
use crate::access::plans::Limits;

/// Subjects kept at most: whatever an attacker sends, memory stays
/// bounded, the least used going first.
const SUBJECTS: u64 = 100_000;

/// The longest the task waits for the pipeline adding local counts.
const ADD_TIMEOUT: Duration = Duration::from_secs(2);

/// One subject's windows, as this instance knows and counts them.
#[derive(Debug, Default)]
pub(crate) struct Local {
    minute: Window<Counts>,
    month: Window<Counts>,
}

/// What this instance knows and counts of one subject in one window.
#[derive(Debug, Default)]
struct Counts {
    /// The highest count Redis reported.
    known: u64,
    /// Admitted and on their way to Redis.
    in_flight: u64,
    /// Admitted here while Redis could not be asked.
    local: u64,
    /// Of those, not yet added to Redis.
    unsent: u64,
}

impl Local {
    /// Starts the windows `minute` and `month` when they are not this
    /// entry's: what was known of earlier ones limits nothing now.
    fn enter(&mut self, minute: &str, month: &str) {
        self.minute.enter(minute);
        self.month.enter(month);
    }

    /// The rule while Redis cannot be asked: this instance's share of what
    /// may be left (see the module docs). A subject whose share of the
    /// month is spent is told to retry in a minute, unless the whole
    /// allowance is. Returns the verdict and the minute's and month's use.
    fn decide(&mut self, limits: Limits, count_month: bool, instances: u64) -> (Verdict, u64, u64) {
        let instances = instances.max(1);
        let minute_used = self.minute.known + self.minute.local;
        let month_used = self.month.known + self.month.local;
        let minute_share = limits
            .per_minute
            .saturating_sub(self.minute.known + self.minute.in_flight)
            / instances;
        let month_share = limits
            .per_month
            .saturating_sub(self.month.known + self.month.in_flight)
            / instances;
        if self.minute.local >= minute_share {
            return (Verdict::RateLimited, minute_used, month_used);
        }
        if count_month && self.month.local >= month_share {
            let verdict = if month_used >= limits.per_month {
                Verdict::QuotaExceeded
            } else {
                Verdict::RateLimited
            };
            return (verdict, minute_used, month_used);
        }
        self.minute.local += 1;
        self.minute.unsent += 1;
        if count_month {
            self.month.local += 1;
            self.month.unsent += 1;
        }
        (
            Verdict::Allowed,
            minute_used + 1,
            month_used + u64::from(count_month),
        )
    }
}

/// Counts admitted here that a trip adds to Redis with a request.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Carry {
    pub minute: u64,
    pub month: u64,
}

/// A request on its way to Redis: its subject's entry, the windows it
/// counts in, and what its trip carried for the subject.
pub(crate) struct Sent {
    local: Arc<Mutex<Local>>,
    minute_window: String,
    month_window: String,
    pub count_month: bool,
    pub carry: Carry,
}

impl Sent {
    /// A request whose outcome no subject entry keeps (tests of the trip).
    #[cfg(test)]
    pub(crate) fn detached(count_month: bool) -> Self {
        Self {
            local: Default::default(),
            minute_window: String::new(),
            month_window: String::new(),
            count_month,
            carry: Carry::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Local> {
        self.local.lock().expect("limiter counters")
    }

    /// Takes the subject's counts not yet added to Redis in this request's
    /// windows, for its trip to add: called by the round-trip task while
    /// building the trip.
    pub(crate) fn take_unsent(&mut self) {
        let mut local = self.local.lock().expect("limiter counters");
        if local.minute.name == self.minute_window {
            self.carry.minute += std::mem::take(&mut local.minute.unsent);
        }
        if local.month.name == self.month_window {
            self.carry.month += std::mem::take(&mut local.month.unsent);
        }
    }

    /// Redis answered: its counts are now what Redis reports. Called by
    /// the round-trip task before the request hears of it, so a request
    /// decided here next counts it.
    pub(crate) fn answered(&self, minute_used: u64, month_used: u64) {
        let mut local = self.lock();
        if local.minute.name == self.minute_window {
            local.minute.in_flight = local.minute.in_flight.saturating_sub(1);
            local.minute.known = local.minute.known.max(minute_used);
            local.minute.local = local.minute.local.saturating_sub(self.carry.minute);
        }
        if local.month.name == self.month_window {
            local.month.in_flight = local
                .month
                .in_flight
                .saturating_sub(u64::from(self.count_month));
            local.month.known = local.month.known.max(month_used);
            local.month.local = local.month.local.saturating_sub(self.carry.month);
        }
    }

    /// Redis did not answer: the request was admitted nowhere, and what it
    /// carried waits for the next trip.
    pub(crate) fn unanswered(&self) {
        let mut local = self.lock();
        if local.minute.name == self.minute_window {
            local.minute.in_flight = local.minute.in_flight.saturating_sub(1);
            local.minute.unsent += self.carry.minute;
        }
        if local.month.name == self.month_window {
            local.month.in_flight = local
                .month
                .in_flight
                .saturating_sub(u64::from(self.count_month));
            local.month.unsent += self.carry.month;
        }
    }
}

/// One subject's counts taken for the pipeline that adds them to Redis.
struct Pending {
    subject: String,
    minute_window: String,
    minute: u64,
    month_window: String,
    month: u64,
    counts: Arc<Mutex<Local>>,
}

/// Every subject's [`Local`], bounded.
pub(crate) struct LocalCounts {
    subjects: moka::sync::Cache<String, Arc<Mutex<Local>>>,
    prefix: String,
}

impl LocalCounts {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            subjects: moka::sync::Cache::builder().max_capacity(SUBJECTS).build(),
            prefix: prefix.to_owned(),
        }
    }

    fn of(&self, subject: &str) -> Arc<Mutex<Local>> {
        self.subjects
            .get_with_by_ref(subject, || Arc::new(Mutex::new(Local::default())))
    }

    /// A request of `subject` goes to Redis: it is in flight until its trip
    /// ends.
    pub(crate) fn send(&self, subject: &str, minute: &str, month: &str, count_month: bool) -> Sent {
        let local = self.of(subject);
        {
            let mut counts = local.lock().expect("limiter counters");
            counts.enter(minute, month);
            counts.minute.in_flight += 1;
            counts.month.in_flight += u64::from(count_month);
        }
        Sent {
            local,
            minute_window: minute.to_owned(),
            month_window: month.to_owned(),
            count_month,
            carry: Carry::default(),
        }
    }

    /// Decides one request of `subject` in this process (see
    /// [`Local::decide`]).
    pub(crate) fn decide(
        &self,
        subject: &str,
        minute: &str,
        month: &str,
        limits: Limits,
        count_month: bool,
        instances: u64,
    ) -> (Verdict, u64, u64) {
        let local = self.of(subject);
        let mut counts = local.lock().expect("limiter counters");
        counts.enter(minute, month);
        counts.decide(limits, count_month, instances)
    }

    /// Adds every subject's unsent counts to Redis in one pipeline (the
    /// month's, and this minute's while it lasts), so quotas, /usage and
    /// the rest of the minute are right again. Run by the round-trip task
    /// only, between trips. Returns how many subjects had counts.
    pub(crate) async fn add_unsent(
        &self,
        conn: &mut Connection,
        this_minute: &str,
    ) -> redis::RedisResult<usize> {
        let pending: Vec<Pending> = self
            .subjects
            .iter()
            .filter_map(|(subject, counts)| {
                let mut local = counts.lock().expect("limiter counters");
                // A past minute's count no longer limits anything.
                let minute = if local.minute.name == this_minute {
                    std::mem::take(&mut local.minute.unsent)
                } else {
                    0
                };
                let month = std::mem::take(&mut local.month.unsent);
                (month > 0 || minute > 0).then(|| Pending {
                    subject: subject.as_ref().clone(),
                    minute_window: local.minute.name.clone(),
                    minute,
                    month_window: local.month.name.clone(),
                    month,
                    counts: Arc::clone(&counts),
                })
            })
            .collect();
        if pending.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for p in &pending {
            for (key, count, ttl) in [
                (
                    minute_key(&self.prefix, &p.subject, &p.minute_window),
                    p.minute,
                    MINUTE_TTL_SECONDS,
                ),
                (
                    month_key(&self.prefix, &p.subject, &p.month_window),
                    p.month,
                    MONTH_TTL_SECONDS,
                ),
            ] {
                if count > 0 {
                    pipe.incr(&key, count)
                        .ignore()
                        .cmd("EXPIRE")
                        .arg(&key)
                        .arg(ttl)
                        .arg("NX")
                        .ignore();
                }
            }
        }
        let added = match tokio::time::timeout(ADD_TIMEOUT, pipe.query_async::<()>(conn)).await {
            Ok(added) => added,
            Err(_) => Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "no answer while adding local counts",
            ))),
        };
        for p in &pending {
            let mut local = p.counts.lock().expect("limiter counters");
            let same_minute = local.minute.name == p.minute_window;
            let same_month = local.month.name == p.month_window;
            if added.is_ok() {
                // Now part of what Redis counts.
                if same_minute {
                    local.minute.local = local.minute.local.saturating_sub(p.minute);
                    local.minute.known += p.minute;
                }
                if same_month {
                    local.month.local = local.month.local.saturating_sub(p.month);
                    local.month.known += p.month;
                }
            } else {
                // Perhaps added after all: then counted twice, never zero times.
                if same_minute {
                    local.minute.unsent += p.minute;
                }
                if same_month {
                    local.month.unsent += p.month;
                }
            }
        }
        added.map(|()| pending.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIXTY: Limits = Limits {
        per_minute: 60,
        per_month: 1000,
    };
    const MINUTE: &str = "202611230800";
    const MONTH: &str = "202611";

    fn decide(counts: &LocalCounts) -> Verdict {
        counts.decide("key:a", MINUTE, MONTH, SIXTY, true, 1).0
    }

    fn send(counts: &LocalCounts) -> Sent {
        counts.send("key:a", MINUTE, MONTH, true)
    }

    #[test]
    fn an_outage_starts_from_the_highest_count_redis_reported() {
        let counts = LocalCounts::new("t:");
        let sent: Vec<Sent> = (0..4).map(|_| send(&counts)).collect();
        // One round trip's answers, told in any order.
        for (sent, used) in sent.iter().zip([58, 60, 59, 12]) {
            sent.answered(used, used);
        }
        assert_eq!(
            decide(&counts),
            Verdict::RateLimited,
            "redis already counted the whole minute"
        );
    }

    #[test]
    fn requests_redis_may_still_admit_count_against_the_local_share() {
        let counts = LocalCounts::new("t:");
        send(&counts).answered(50, 50);
        let in_flight: Vec<Sent> = (0..10).map(|_| send(&counts)).collect();
        assert_eq!(
            decide(&counts),
            Verdict::RateLimited,
            "50 counted and 10 that redis may admit"
        );
        for sent in &in_flight {
            sent.unanswered();
        }
        assert_eq!(
            decide(&counts),
            Verdict::Allowed,
            "none of them admitted after all"
        );
    }

    #[test]
    fn a_trip_built_after_a_local_admission_carries_it_and_only_once() {
        let counts = LocalCounts::new("t:");
        let mut queued_before = send(&counts);
        assert_eq!(decide(&counts), Verdict::Allowed);
        assert_eq!(decide(&counts), Verdict::Allowed);
        // Queued before the admissions, built after: it carries them.
        queued_before.take_unsent();
        assert_eq!(
            queued_before.carry,
            Carry {
                minute: 2,
                month: 2
            }
        );
        let mut next = send(&counts);
        next.take_unsent();
        assert_eq!(next.carry, Carry::default(), "carried once");
        // The trip failed: the next one carries them again.
        queued_before.unanswered();
        next.unanswered();
        let mut retry = send(&counts);
        retry.take_unsent();
        assert_eq!(retry.carry.minute, 2);
        // Answered: Redis's count includes them, and they limit no more
        // than once.
        retry.answered(3, 3);
        for _ in 0..57 {
            assert_eq!(decide(&counts), Verdict::Allowed);
        }
        assert_eq!(decide(&counts), Verdict::RateLimited);
    }

    #[test]
    fn each_instance_takes_its_share_of_what_is_left() {
        let counts = LocalCounts::new("t:");
        send(&counts).answered(20, 20);
        let admitted = (0..60)
            .filter(|_| counts.decide("key:a", MINUTE, MONTH, SIXTY, true, 4).0 == Verdict::Allowed)
            .count();
        assert_eq!(admitted, 10, "(60 - 20) / 4");
    }

    #[test]
    fn a_new_minute_forgets_the_last_ones_counts_but_not_the_months() {
        let counts = LocalCounts::new("t:");
        send(&counts).answered(60, 990);
        assert_eq!(decide(&counts), Verdict::RateLimited);
        let (verdict, minute_used, month_used) =
            counts.decide("key:a", "202611230801", MONTH, SIXTY, true, 1);
        assert_eq!(
            (verdict, minute_used, month_used),
            (Verdict::Allowed, 1, 991)
        );
    }
}
