//! The partitions' stored positions: the next offset to apply, kept in the
//! read model beside the rows they produced.

use std::collections::BTreeMap;

use sqlx::{PgPool, Postgres, Transaction};

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

/// The stored positions of `partitions`, locked until the transaction ends.
pub(super) async fn lock_positions(
    tx: &mut Transaction<'_, Postgres>,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<(i32, i64)>> {
    Ok(sqlx::query_as(
        "SELECT partition, next_offset FROM consumer_offsets
         WHERE topic = $1 AND partition = ANY($2) FOR UPDATE",
    )
    .bind(topic)
    .bind(partitions)
    .fetch_all(&mut **tx)
    .await?)
}
