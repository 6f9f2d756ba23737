//! Instants a query names: a time given as an instant or as a day in the
//! service time zone ([`When`]), and the instant an answer reads the model
//! as known at ([`KnownAt`]).

use chrono::NaiveDate;

/// The first instant of `date` in `tz` (an hour later inside a gap).
pub fn start_of_day(date: NaiveDate, tz: chrono_tz::Tz) -> chrono::DateTime<chrono::Utc> {
    use chrono::TimeZone;
    let midnight = date.and_hms_opt(0, 0, 0).expect("midnight exists");
    tz.from_local_datetime(&midnight)
        .earliest()
        .or_else(|| {
            tz.from_local_datetime(&(midnight + chrono::Duration::hours(1)))
                .earliest()
        })
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or_else(|| chrono::Utc.from_utc_datetime(&midnight))
}

/// A time given as an instant, or as a calendar day in the service time
/// zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    At(chrono::DateTime<chrono::Utc>),
    Day(NaiveDate),
}

impl When {
    /// The instant, or the start of the day in `tz`.
    pub fn start(self, tz: chrono_tz::Tz) -> chrono::DateTime<chrono::Utc> {
        match self {
            When::At(at) => at,
            When::Day(date) => start_of_day(date, tz),
        }
    }

    /// The instant, or the end of the day in `tz` (the next one's start).
    pub fn end(self, tz: chrono_tz::Tz) -> chrono::DateTime<chrono::Utc> {
        match self {
            When::At(at) => at,
            When::Day(date) => start_of_day(date.succ_opt().unwrap_or(date), tz),
        }
    }
}

/// An instant the answer reads the model as known at (`asKnownAt`), to the
/// millisecond: known-at times are stored and shown to the millisecond, so
/// two requests naming the same millisecond get the same answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KnownAt(chrono::DateTime<chrono::Utc>);

impl KnownAt {
    /// `at` without its fraction of a millisecond.
    pub fn truncated(at: chrono::DateTime<chrono::Utc>) -> Self {
        Self(chrono::DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at))
    }

    pub fn instant(self) -> chrono::DateTime<chrono::Utc> {
        self.0
    }
}

/// As the envelope shows it: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
impl std::fmt::Display for KnownAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&ratewire_readmodel::views::timestamp(self.0))
    }
}
