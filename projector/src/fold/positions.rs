//! The partitions' stored positions: the next offset to apply, kept in the
//! read model beside the rows they produced.

use std::collections::BTreeMap;

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

/// The stored next offsets of `partitions`, locked until the transaction
/// ends (0 for a partition first seen, whose row is made). The rows exist
/// after a partition's first batch, so one statement usually does.
pub(super) async fn lock(
    tx: &mut PgConnection,
    topic: &str,
    partitions: &[i32],
) -> Result<BTreeMap<i32, i64>> {
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
    Ok(rows.into_iter().collect())
}

async fn lock_rows(
    tx: &mut PgConnection,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<(i32, i64)>> {
    Ok(sqlx::query_as(
        "SELECT partition, next_offset FROM consumer_offsets
         WHERE topic = $1 AND partition = ANY($2) FOR UPDATE",
    )
    .bind(topic)
    .bind(partitions)
    .fetch_all(tx)
    .await?)
}

/// Stores the partitions' next offsets after a batch.
pub(super) async fn store(
    tx: &mut PgConnection,
    topic: &str,
    positions: &BTreeMap<i32, i64>,
) -> Result<()> {
    let (partitions, next_offsets): (Vec<i32>, Vec<i64>) =
        positions.iter().map(|(p, n)| (*p, *n)).unzip();
    sqlx::query(
        "UPDATE consumer_offsets c SET next_offset = p.next_offset, updated_at = now()
         FROM UNNEST($2::int[], $3::bigint[]) AS p (partition, next_offset)
         WHERE c.topic = $1 AND c.partition = p.partition",
    )
    .bind(topic)
    .bind(&partitions)
    .bind(&next_offsets)
    .execute(tx)
    .await?;
    Ok(())
}
