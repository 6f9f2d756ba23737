//! The partitions' stored positions: the next offset to apply, kept in the
//! read model beside the rows they produced.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use crate::error::Result;

/// The stored next offset of each of `partitions` (0 when never consumed).
pub async fn positions(
    pool: &PgPool,
    topic: &str,
    partitions: &[i32],
) -> Result<BTreeMap<i32, i64>> {
    let rows: Vec<(i32, i64)> =
        sqlx::query_as("SELECT partition, next_offset FROM consumer_offsets WHERE topic = $1 AND partition = ANY($2)")
            .bind(topic)
            .bind(partitions)
            .fetch_all(pool)
            .await?;
    let mut map: BTreeMap<i32, i64> = partitions.iter().map(|p| (*p, 0)).collect();
    map.extend(rows);
    Ok(map)
}

/// Sets a partition's stored next offset (used only when the broker no
/// longer holds the events before `next_offset`).
pub async fn move_position(
    pool: &PgPool,
    topic: &str,
    partition: i32,
    next_offset: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO consumer_offsets (topic, partition, next_offset) VALUES ($1, $2, $3)
         ON CONFLICT (topic, partition) DO UPDATE SET next_offset = $3, updated_at = now()",
    )
    .bind(topic)
    .bind(partition)
    .bind(next_offset)
    .execute(pool)
    .await?;
    Ok(())
}

/// A partition's stored position: the next offset, and the known-at time
/// of the last event folded (see `known_at`).
type Stored = (i32, i64, Option<DateTime<Utc>>);

/// The stored positions of `partitions`, locked until the transaction
/// ends (offset 0 for a partition first seen, whose row is made). The rows
/// exist after a partition's first batch, so one statement usually does.
pub(super) async fn lock(
    tx: &mut PgConnection,
    topic: &str,
    partitions: &[i32],
) -> Result<(BTreeMap<i32, i64>, BTreeMap<i32, DateTime<Utc>>)> {
    let mut rows = lock_rows(tx, topic, partitions).await?;
    if rows.len() < partitions.len() {
        sqlx::query(
            "INSERT INTO consumer_offsets (topic, partition, next_offset)
             SELECT $1, p, 0 FROM UNNEST($2::int[]) AS p
             ON CONFLICT DO NOTHING",
        )
        .bind(topic)
        .bind(partitions)
        .execute(&mut *tx)
        .await?;
        rows = lock_rows(tx, topic, partitions).await?;
    }
    let known = rows
        .iter()
        .filter_map(|(p, _, k)| Some((*p, (*k)?)))
        .collect();
    Ok((rows.into_iter().map(|(p, n, _)| (p, n)).collect(), known))
}

async fn lock_rows(tx: &mut PgConnection, topic: &str, partitions: &[i32]) -> Result<Vec<Stored>> {
    Ok(sqlx::query_as(
        "SELECT partition, next_offset, known_at FROM consumer_offsets
         WHERE topic = $1 AND partition = ANY($2) FOR UPDATE",
    )
    .bind(topic)
    .bind(partitions)
    .fetch_all(tx)
    .await?)
}

/// Stores the partitions' next offsets and last known-at times after a
/// batch.
pub(super) async fn store(
    tx: &mut PgConnection,
    topic: &str,
    positions: &BTreeMap<i32, i64>,
    known: &BTreeMap<i32, DateTime<Utc>>,
) -> Result<()> {
    let (partitions, next_offsets): (Vec<i32>, Vec<i64>) =
        positions.iter().map(|(p, n)| (*p, *n)).unzip();
    let known: Vec<Option<DateTime<Utc>>> =
        partitions.iter().map(|p| known.get(p).copied()).collect();
    sqlx::query(
        "UPDATE consumer_offsets c SET next_offset = p.next_offset, updated_at = now(),
             known_at = COALESCE(p.known_at, c.known_at)
         FROM UNNEST($2::int[], $3::bigint[], $4::timestamptz[]) AS p (partition, next_offset, known_at)
         WHERE c.topic = $1 AND c.partition = p.partition",
    )
    .bind(topic)
    .bind(&partitions)
    .bind(&next_offsets)
    .bind(&known)
    .execute(tx)
    .await?;
    Ok(())
}

/// Marks the partitions the fold has read to the end of: each of `highs`
/// (the broker's next offset per partition, asked after `asked_at`) whose
/// stored position has reached it has folded every event appended before
/// `asked_at`, so it is settled until then less `skew` (the broker's clock
/// may run ahead of ours). Rows are made for partitions never written to,
/// so that an empty partition counts as settled too.
pub async fn settle(
    pool: &PgPool,
    topic: &str,
    highs: &BTreeMap<i32, i64>,
    asked_at: DateTime<Utc>,
    skew: chrono::Duration,
) -> Result<()> {
    if highs.is_empty() {
        return Ok(());
    }
    let (partitions, ends): (Vec<i32>, Vec<i64>) = highs.iter().map(|(p, h)| (*p, *h)).unzip();
    sqlx::query(
        "WITH made AS (
             INSERT INTO consumer_offsets (topic, partition, next_offset)
             SELECT $1, p, 0 FROM UNNEST($2::int[], $3::bigint[]) AS h (p, high) WHERE high = 0
             ON CONFLICT DO NOTHING
         )
         UPDATE consumer_offsets c SET settled_at = GREATEST(c.settled_at, $4)
         FROM UNNEST($2::int[], $3::bigint[]) AS h (partition, high)
         WHERE c.topic = $1 AND c.partition = h.partition AND c.next_offset >= h.high",
    )
    .bind(topic)
    .bind(&partitions)
    .bind(&ends)
    .bind(asked_at - skew)
    .execute(pool)
    .await?;
    Ok(())
}
