//! Allowance leased from Redis in slices, so a busy caller's requests are
//! mostly decided in this process.
//!
//! A caller this instance has seen at least `HOT` times in a minute, on a
//! plan large enough to slice, asks with its next round trip for a slice of
//! its minute's and month's allowance besides its own count: `INCRBY` takes
//! the slice in Redis, where it counts like requests already admitted, and
//! the next requests of the caller take from it here without asking Redis.
//!
//! Never more than the plan: a slice is granted only from counts Redis
//! handed out below the limits, as for any request (see `shared_trip`), so
//! the instances together admit at most the plan. The cost is the other
//! way: counts leased and not used are lost for the minute. At most one
//! slice per instance and caller is outstanding, and a slice is
//! `per_minute / (SLICES * instances)` (at most `LARGEST`), so a caller
//! busy on every instance is refused, in the worst case, up to
//! `per_minute / SLICES` requests (1/64 of its minute) early. The month's
//! unused slice stays in use for the next minutes; it is given back once
//! the caller has been quiet here for [`IDLE`] and at shutdown, so its
//! usage reads at most one slice per instance high while it is busy. It is
//! lost (counted as used, at most one slice) if the process dies or the
//! caller is forgotten among `CALLERS` busier ones.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::windows::Window;
use crate::access::plans::Limits;

/// Requests of a caller in one minute on this instance before it leases.
const HOT: u64 = 8;

/// A minute's allowance is cut in at least this many slices per instance.
const SLICES: u64 = 64;

/// The largest slice: a round trip per this many requests at most.
const LARGEST: u64 = 1_024;

/// How long a slice asked for is waited for before another may be asked.
const ASKING_AT_MOST: Duration = Duration::from_secs(1);

/// A caller quiet this long gives its month slice back.
pub const IDLE: Duration = Duration::from_secs(2);

/// Callers with leases kept at most (bounded whatever the traffic).
const CALLERS: u64 = 100_000;

#[derive(Debug, Default)]
struct Lease {
    minute: Window<Slice>,
    month: Window<Slice>,
    /// When a request last took from the slice.
    used_at: Option<Instant>,
    /// When a round trip asking for a slice was sent, while it is under way
    /// (a request given up on mid-trip never reports back: after
    /// [`ASKING_AT_MOST`] another may ask).
    asking: Option<Instant>,
}

/// A lease's slice of one window.
#[derive(Debug, Default)]
struct Slice {
    /// Requests of this window seen here, leased or not (counted for the
    /// minute only).
    seen: u64,
    left: u64,
    /// Redis's count when the slice was granted (the slice included).
    counted: u64,
}

impl Lease {
    fn enter(&mut self, minute: &str, month: &str) {
        self.minute.enter(minute);
        self.month.enter(month);
    }
}

/// Admitted from a lease: the numbers the request's headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FromLease {
    pub minute_used: u64,
    pub month_used: u64,
}

/// Every caller's lease, bounded.
pub struct Leases {
    callers: moka::sync::Cache<String, Arc<Mutex<Lease>>>,
}

impl Default for Leases {
    fn default() -> Self {
        Self {
            callers: moka::sync::Cache::builder().max_capacity(CALLERS).build(),
        }
    }
}

/// The slice a caller on `limits` asks for with `instances` alive.
pub fn slice(limits: Limits, instances: u64) -> u64 {
    (limits.per_minute / (SLICES * instances.max(1))).min(LARGEST)
}

impl Leases {
    fn of(&self, subject: &str) -> Arc<Mutex<Lease>> {
        self.callers
            .get_with_by_ref(subject, || Arc::new(Mutex::new(Lease::default())))
    }

    /// Admits one request of `subject` from its lease, if it holds one for
    /// these windows; otherwise says how large a slice its round trip
    /// should ask for (0: none), and notes that it asks.
    pub fn take(
        &self,
        subject: &str,
        minute: &str,
        month: &str,
        limits: Limits,
        count_month: bool,
        instances: u64,
    ) -> Result<FromLease, u64> {
        let lease = self.of(subject);
        let mut lease = lease.lock().expect("leases");
        lease.enter(minute, month);
        lease.minute.seen += 1;
        if lease.minute.left > 0 && (!count_month || lease.month.left > 0) {
            lease.minute.left -= 1;
            lease.month.left -= u64::from(count_month);
            lease.used_at = Some(Instant::now());
            return Ok(FromLease {
                minute_used: lease.minute.counted - lease.minute.left,
                month_used: lease.month.counted - lease.month.left,
            });
        }
        let slice = slice(limits, instances);
        // Only requests counted toward the month lease: a slice holds both.
        let asking = lease.asking.is_some_and(|at| at.elapsed() < ASKING_AT_MOST);
        if slice < 2 || !count_month || lease.minute.seen < HOT || asking {
            return Err(0);
        }
        lease.asking = Some(Instant::now());
        Err(slice)
    }

    /// The round trip of a request that asked for a slice ended: `granted`
    /// more counts are this instance's to admit, Redis having counted
    /// `minute_counted` and `month_counted` with them.
    pub fn granted(
        &self,
        subject: &str,
        minute: &str,
        month: &str,
        granted: u64,
        minute_counted: u64,
        month_counted: u64,
    ) {
        let lease = self.of(subject);
        let mut lease = lease.lock().expect("leases");
        lease.asking = None;
        if granted == 0 || lease.minute.name != minute || lease.month.name != month {
            return;
        }
        // What is left of an earlier month slice stays usable.
        lease.minute.left = granted;
        lease.minute.counted = minute_counted;
        lease.month.left += granted;
        lease.month.counted = month_counted;
        lease.used_at = Some(Instant::now());
    }

    /// The month's unused slices of callers that took nothing from them
    /// for `idle` (all of them with zero, at shutdown), by caller and month;
    /// taken, so they are given back once.
    pub fn take_unused(&self, idle: Duration) -> Vec<(String, String, u64)> {
        self.callers
            .iter()
            .filter_map(|(subject, lease)| {
                let mut lease = lease.lock().expect("leases");
                if lease.used_at.is_some_and(|at| at.elapsed() < idle) {
                    return None;
                }
                let unused = std::mem::take(&mut lease.month.left);
                lease.minute.left = 0;
                (unused > 0).then(|| (subject.as_ref().clone(), lease.month.name.clone(), unused))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: Limits = Limits {
        per_minute: 6_400,
        per_month: 1_000_000,
    };

    fn take(leases: &Leases, minute: &str) -> Result<FromLease, u64> {
        leases.take("key:a", minute, "202611", BIG, true, 1)
    }

    #[test]
    fn a_busy_caller_asks_once_for_a_slice_then_takes_from_it() {
        let leases = Leases::default();
        for _ in 1..HOT {
            assert_eq!(take(&leases, "m1"), Err(0), "not busy yet");
        }
        assert_eq!(take(&leases, "m1"), Err(100), "6400 / 64");
        assert_eq!(take(&leases, "m1"), Err(0), "one slice asked at a time");
        // Redis counted 9 requests and the slice: 109 in the minute.
        leases.granted("key:a", "m1", "202611", 100, 109, 509);
        let first = take(&leases, "m1").unwrap();
        assert_eq!(
            first,
            FromLease {
                minute_used: 10,
                month_used: 410
            }
        );
        for _ in 1..100 {
            assert!(take(&leases, "m1").is_ok());
        }
        assert_eq!(take(&leases, "m1"), Err(100), "spent: the next slice");
    }

    #[test]
    fn a_minute_slice_ends_with_its_minute_and_the_month_slice_carries_on() {
        let leases = Leases::default();
        for _ in 0..HOT {
            let _ = take(&leases, "m1");
        }
        leases.granted("key:a", "m1", "202611", 100, 100, 100);
        assert!(take(&leases, "m1").is_ok());
        assert_eq!(take(&leases, "m2"), Err(0), "a new minute: no slice");
        assert_eq!(
            leases.take_unused(Duration::from_secs(60)),
            Vec::new(),
            "in use"
        );
        assert_eq!(
            leases.take_unused(Duration::ZERO),
            vec![("key:a".to_owned(), "202611".to_owned(), 99)],
            "the month's rest"
        );
        assert!(
            leases.take_unused(Duration::ZERO).is_empty(),
            "given back once"
        );
    }

    #[test]
    fn small_plans_and_slices_of_an_old_window_never_lease() {
        let leases = Leases::default();
        let small = Limits {
            per_minute: 60,
            per_month: 1_000,
        };
        for _ in 0..100 {
            assert_eq!(leases.take("key:s", "m1", "202611", small, true, 1), Err(0));
        }
        for _ in 0..HOT {
            let _ = take(&leases, "m1");
        }
        let _ = take(&leases, "m2");
        leases.granted("key:a", "m1", "202611", 100, 100, 100);
        assert!(take(&leases, "m2").is_err(), "granted for a minute gone by");
        assert_eq!(slice(BIG, 4), 25);
        assert_eq!(
            slice(
                Limits {
                    per_minute: u64::MAX,
                    per_month: u64::MAX
                },
                1
            ),
            LARGEST
        );
    }
}
