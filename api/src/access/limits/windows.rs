//! The windows counts belong to: fixed calendar minutes (UTC) and calendar
//! months in the service time zone, their Redis keys and lifetimes, and
//! the counts of one window, started afresh when the window changes.

use std::cell::RefCell;

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};

/// What is counted in one window (a minute or a month), started afresh
/// when the window changes: what was counted in an earlier one limits
/// nothing now.
#[derive(Debug, Default)]
pub struct Window<T> {
    /// The window, as its keys name it.
    pub name: String,
    counts: T,
}

impl<T: Default> Window<T> {
    /// Moves to the window `name`, dropping the counts of another.
    pub fn enter(&mut self, name: &str) {
        if self.name != name {
            self.name = name.to_owned();
            self.counts = T::default();
        }
    }
}

impl<T> std::ops::Deref for Window<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.counts
    }
}

impl<T> std::ops::DerefMut for Window<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.counts
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

/// The Redis key of `subject`'s count in the minute window `minute`. The
/// subject is a hash tag: in a Redis Cluster a subject's counters share a
/// slot, and the subjects spread over the cluster.
pub fn minute_key(prefix: &str, subject: &str, minute: &str) -> String {
    format!("{prefix}rl:minute:{{{subject}}}:{minute}")
}

/// How long a minute's counter is kept (two windows: a request near the
/// boundary still finds it).
pub const MINUTE_TTL_SECONDS: u64 = 120;

/// The Redis key of `subject`'s count in `month` (`*` as subject makes a
/// scan pattern); the usage sync saves and restores these same keys.
pub fn month_key(prefix: &str, subject: &str, month: &str) -> String {
    format!("{prefix}rl:month:{{{subject}}}:{month}")
}

/// The marker that `subject`'s saved monthly count was restored into Redis
/// (in the subject's slot, beside its counter).
pub fn restored_key(prefix: &str, subject: &str, month: &str) -> String {
    format!("{prefix}rl:restored:{{{subject}}}:{month}")
}

/// Seconds from `now` to the next minute boundary (1..=60).
pub fn seconds_to_next_minute(now: DateTime<Utc>) -> u64 {
    60 - u64::from(now.second())
}

/// Seconds from `now` to the first instant of next month in `tz`. Requests
/// take it from [`Windows`]; the tests work it out afresh to check them.
#[cfg(test)]
pub(crate) fn seconds_to_next_month(now: DateTime<Utc>, tz: chrono_tz::Tz) -> u64 {
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

pub(crate) fn seconds_until(then: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    (then - now).num_seconds().max(1) as u64
}

/// This minute (UTC) and this month (service time zone) as key parts, and
/// when the month ends. They change once a minute, and working them out
/// (integer formatting, time zone lookups) for every request showed in
/// profiles; each worker thread keeps the current minute's.
pub(crate) struct Windows {
    pub(crate) timezone: chrono_tz::Tz,
    /// Minutes since the epoch.
    pub(crate) index: i64,
    pub(crate) minute: String,
    pub(crate) month: String,
    pub(crate) next_month: DateTime<Utc>,
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
    pub(crate) fn with<R>(
        now: DateTime<Utc>,
        timezone: chrono_tz::Tz,
        f: impl FnOnce(&Windows) -> R,
    ) -> R {
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
