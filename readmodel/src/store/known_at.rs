//! Reading the model as it was known at an instant (`asKnownAt`).
//!
//! The tables are bitemporal and the views under the old names show the
//! rows in force at `ratewire_known_at()` (migration 0008): every reader's
//! SQL reads the past once its transaction has set `ratewire.known_at`.
//! Such a read is one REPEATABLE READ snapshot, so the finality of the
//! instant ([`known_at_final`]) and the rows read agree.
//!
//! An answer as known at `T` is final when the fold of every partition has
//! passed `T`: it folded an event known after `T` (known-at times are
//! monotonic per partition), or it saw itself caught up with the broker at
//! or after `T` (`settled_at`, already reduced by the clock-skew
//! allowance). Nothing known at or before `T` can then still arrive.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool, Postgres, Transaction};

use super::begin_snapshot;
use crate::error::Result;

/// A read-only snapshot of the model as known at `at`: every read through
/// it sees only the rows known then.
pub async fn begin_known_at(
    pool: &PgPool,
    at: DateTime<Utc>,
) -> Result<Transaction<'static, Postgres>> {
    let mut tx = begin_snapshot(pool).await?;
    // `true`: the setting ends with the transaction, so the pooled
    // connection goes back reading the present. Written as Postgres writes
    // the instant, so that it reads it back whatever it is (RFC 3339's
    // year 0000 is 1 BC to Postgres).
    sqlx::query("SELECT set_config('ratewire.known_at', $1::timestamptz::text, true)")
        .bind(at)
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

/// Where one partition's fold stands: the known-at time of the last event
/// it folded, and the last time it saw itself caught up with the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct FoldPosition {
    pub known_at: Option<DateTime<Utc>>,
    pub settled_at: Option<DateTime<Utc>>,
}

impl FoldPosition {
    /// Whether nothing known at or before `at` can still reach this
    /// partition's fold.
    pub fn has_passed(&self, at: DateTime<Utc>) -> bool {
        self.known_at.is_some_and(|known| known > at)
            || self.settled_at.is_some_and(|settled| settled >= at)
    }
}

/// Whether an answer as known at `at` is final, given every partition's
/// position: at least one partition, and each has passed `at`.
pub fn is_final(positions: &[FoldPosition], at: DateTime<Utc>) -> bool {
    !positions.is_empty() && positions.iter().all(|p| p.has_passed(at))
}

/// Every partition's position, as `db` sees them (read it in the snapshot
/// of the answer it judges).
pub async fn fold_positions<'e>(db: impl PgExecutor<'e>) -> Result<Vec<FoldPosition>> {
    Ok(
        sqlx::query_as("SELECT known_at, settled_at FROM consumer_offsets")
            .fetch_all(db)
            .await?,
    )
}

/// Whether the model as `db` sees it holds the final answer as known at
/// `at` (see the module docs).
pub async fn known_at_final<'e>(db: impl PgExecutor<'e>, at: DateTime<Utc>) -> Result<bool> {
    Ok(is_final(&fold_positions(db).await?, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn position(known_at: Option<&str>, settled_at: Option<&str>) -> FoldPosition {
        FoldPosition {
            known_at: known_at.map(at),
            settled_at: settled_at.map(at),
        }
    }

    #[test]
    fn an_instant_is_final_once_every_partition_has_passed_it() {
        let t = at("2026-11-23T08:00:00Z");
        let later = Some("2026-11-23T08:00:00.001Z");
        let same = Some("2026-11-23T08:00:00Z");
        let earlier = Some("2026-11-23T07:59:59.999Z");
        assert!(
            is_final(&[position(later, None)], t),
            "folded a later event"
        );
        assert!(
            !is_final(&[position(same, None)], t),
            "another event of the same millisecond may follow"
        );
        assert!(is_final(&[position(earlier, same)], t), "caught up at t");
        assert!(!is_final(&[position(earlier, earlier)], t));
        assert!(
            !is_final(&[position(later, None), position(earlier, None)], t),
            "every partition"
        );
        assert!(!is_final(&[position(None, None)], t), "never folded");
        assert!(!is_final(&[], t), "no partition known yet");
    }
}
