//! What the projector keeps of its bookkeeping, and for how long:
//! - applied event ids (`applied_events`) guard against an event reaching
//!   the log twice (a producer retry). A duplicate arrives within seconds
//!   of the original, so ids older than
//!   `RATEWIRE_APPLIED_EVENTS_RETENTION_DAYS` are forgotten; redelivery of
//!   already-consumed offsets is guarded by the stored positions, which
//!   are never purged, and a replay builds its own table from zero;
//! - dead letters an operator resolved (`ratewire-projector dead-letters
//!   resolve`) are kept `RATEWIRE_DEAD_LETTERS_RETENTION_DAYS`, then
//!   purged; unresolved ones are kept until someone acts on them;
//! - the raw history (board versions) is kept forever, or whole months
//!   are dropped once they ended `RATEWIRE_RAW_HISTORY_RETENTION` ago
//!   (`ratewire_readmodel::board_months`); each run also makes the months
//!   the fold is about to write to.
//!
//! Deletes go in slices so no purge holds locks the fold waits on for long.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::Utc;
use ratewire_readmodel::board_months::{self, Month};
use sqlx::PgPool;

use crate::error::Result;

/// Rows deleted per statement.
const SLICE: i64 = 10_000;

#[derive(Debug, Clone, Copy)]
pub struct RetentionPolicy {
    pub applied_events: Duration,
    pub resolved_dead_letters: Duration,
    pub raw_history: RawHistory,
}

/// How long the raw history is kept: `forever`, or `N months` (2 to
/// 1200): this month and the N before it are kept, older months dropped
/// whole. At least two, so that every 30-day window a reader or a view
/// keeps (the series, the best-rates series) lies in kept months.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawHistory {
    Forever,
    Months(u32),
}

impl RawHistory {
    /// The first month kept when `now` is this month.
    pub fn horizon(self, now: Month) -> Option<Month> {
        match self {
            RawHistory::Forever => None,
            RawHistory::Months(n) => Some(now.back(n)),
        }
    }
}

impl FromStr for RawHistory {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let text = text.trim();
        if text == "forever" {
            return Ok(RawHistory::Forever);
        }
        let months = match text.split_whitespace().collect::<Vec<_>>()[..] {
            [n, "months"] => n.parse::<u32>().ok(),
            _ => None,
        };
        match months {
            Some(n @ 2..=1200) => Ok(RawHistory::Months(n)),
            _ => Err(format!(
                "expected `forever` or `N months` with N from 2 to 1200, not `{text}`"
            )),
        }
    }
}

impl fmt::Display for RawHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawHistory::Forever => f.write_str("forever"),
            RawHistory::Months(n) => write!(f, "{n} months"),
        }
    }
}

/// What one purge removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Purged {
    pub applied_events: u64,
    pub dead_letters: u64,
    /// The raw history's months dropped.
    pub months: Vec<String>,
}

pub async fn purge(pool: &PgPool, policy: RetentionPolicy) -> Result<Purged> {
    let applied_events = in_slices(
        pool,
        "DELETE FROM applied_events WHERE event_id IN (
             SELECT event_id FROM applied_events WHERE applied_at < now() - $1::interval LIMIT $2)",
        policy.applied_events,
    )
    .await?;
    let dead_letters = in_slices(
        pool,
        "DELETE FROM dead_letters WHERE id IN (
             SELECT id FROM dead_letters WHERE resolved_at < now() - $1::interval LIMIT $2)",
        policy.resolved_dead_letters,
    )
    .await?;
    if applied_events + dead_letters > 0 {
        tracing::info!(applied_events, dead_letters, "old bookkeeping purged");
    }
    let now = Utc::now();
    board_months::prepare(pool, now).await?;
    let mut months = Vec::new();
    if let Some(horizon) = policy.raw_history.horizon(Month::of(now)) {
        let dropped = board_months::drop_before(pool, horizon).await?;
        if !dropped.kept.is_empty() {
            tracing::info!(kept = ?dropped.kept, %horizon, "raw history months kept past the horizon");
        }
        months = dropped.months;
    }
    Ok(Purged {
        applied_events,
        dead_letters,
        months,
    })
}

async fn in_slices(pool: &PgPool, statement: &str, older_than: Duration) -> Result<u64> {
    let interval = format!("{} seconds", older_than.as_secs());
    let mut deleted = 0;
    loop {
        let slice = sqlx::query(statement)
            .bind(&interval)
            .bind(SLICE)
            .execute(pool)
            .await?
            .rows_affected();
        deleted += slice;
        if slice < SLICE as u64 {
            return Ok(deleted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_history_is_kept_forever_or_for_whole_months() {
        assert_eq!("forever".parse(), Ok(RawHistory::Forever));
        assert_eq!("13 months".parse(), Ok(RawHistory::Months(13)));
        assert_eq!("2 months".parse(), Ok(RawHistory::Months(2)));
        for bad in ["", "1 month", "1201 months", "13", "13 days", "always"] {
            assert!(bad.parse::<RawHistory>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_horizon_keeps_the_last_n_months_and_this_one() {
        let now = Month::of("2026-03-15T10:00:00Z".parse().unwrap());
        let horizon = RawHistory::Months(3).horizon(now).unwrap();
        assert_eq!(horizon.to_string(), "2025-12");
        assert_eq!(RawHistory::Forever.horizon(now), None);
    }
}
