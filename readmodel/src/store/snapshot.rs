//! Where a read stands in Postgres's commit order, so that views written
//! from different snapshots (two projectors, a rebuild racing the fold)
//! can be ordered: an older snapshot must never overwrite what a newer one
//! wrote.
//!
//! A snapshot sees every transaction that committed before it was taken.
//! Its `xmax` (the next transaction id to be assigned) never decreases from
//! one snapshot to a later one, and at an equal `xmax` a later snapshot has
//! fewer transactions in progress, never more. So `(xmax, -in_progress)`
//! orders snapshots by what they see: a greater version sees at least as
//! much, and two equal versions see the same transactions.

use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use crate::error::Result;

/// A snapshot's place in commit order (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub xmax: i64,
    /// Transactions in progress when the snapshot was taken, negated.
    pub settled: i64,
}

impl Version {
    /// The version of the transaction snapshot `db` reads in (call it
    /// inside the REPEATABLE READ transaction whose reads it describes).
    pub async fn of(db: &mut PgConnection) -> Result<Self> {
        let (xmax, in_progress): (i64, i64) = sqlx::query_as(
            "SELECT pg_snapshot_xmax(s)::text::bigint,
                    (SELECT count(*) FROM pg_snapshot_xip(s))
             FROM pg_current_snapshot() AS s",
        )
        .fetch_one(db)
        .await?;
        Ok(Self {
            xmax,
            settled: -in_progress,
        })
    }
}

/// A read-only transaction that reads one snapshot throughout, begun in one
/// statement: a round trip fewer than `SET TRANSACTION` after `BEGIN`.
pub async fn begin_snapshot(pool: &PgPool) -> Result<Transaction<'static, Postgres>> {
    Ok(pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await?)
}
