//! What the projector keeps of its bookkeeping, and for how long:
//! - applied event ids (`applied_events`) guard against an event reaching
//!   the log twice (a producer retry). A duplicate arrives within seconds
//!   of the original, so ids older than
//!   `RATEWIRE_APPLIED_EVENTS_RETENTION_DAYS` are forgotten; redelivery of
//!   already-consumed offsets is guarded by the stored positions, which
//!   are never purged, and a replay builds its own table from zero;
//! - dead letters an operator resolved (`ratewire-projector dead-letters
//!   resolve`) are kept `RATEWIRE_DEAD_LETTERS_RETENTION_DAYS`, then
//!   purged; unresolved ones are kept until someone acts on them.
//!
//! Deletes go in slices so no purge holds locks the fold waits on for long.

use std::time::Duration;

use sqlx::PgPool;

use crate::error::Result;

/// Rows deleted per statement.
const SLICE: i64 = 10_000;

#[derive(Debug, Clone, Copy)]
pub struct RetentionPolicy {
    pub applied_events: Duration,
    pub resolved_dead_letters: Duration,
}

/// What one purge removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Purged {
    pub applied_events: u64,
    pub dead_letters: u64,
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
    Ok(Purged {
        applied_events,
        dead_letters,
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
