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

use sqlx::{PgConnection, PgPool, Postgres, Row, Transaction};

use crate::error::Result;

/// A snapshot's place in commit order (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub xmax: i64,
    /// Transactions in progress when the snapshot was taken, negated.
    pub settled: i64,
}

/// The version of the snapshot the statement reads in, as one row of
/// `snapshot_xmax` and `snapshot_in_progress` ([`Version::from_row`]).
pub(super) const SNAPSHOT_VERSION: &str =
    "SELECT pg_snapshot_xmax(s)::text::bigint AS snapshot_xmax,
            (SELECT count(*) FROM pg_snapshot_xip(s)) AS snapshot_in_progress
     FROM pg_current_snapshot() AS s";

impl Version {
    /// The version of the transaction snapshot `db` reads in (call it
    /// inside the REPEATABLE READ transaction whose reads it describes).
    pub async fn of(db: &mut PgConnection) -> Result<Self> {
        Self::from_row(&sqlx::query(SNAPSHOT_VERSION).fetch_one(db).await?)
    }

    /// The version in a row read with [`SNAPSHOT_VERSION`]'s columns.
    pub(super) fn from_row(row: &sqlx::postgres::PgRow) -> Result<Self> {
        Ok(Self {
            xmax: row.try_get("snapshot_xmax")?,
            settled: -row.try_get::<i64, _>("snapshot_in_progress")?,
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
