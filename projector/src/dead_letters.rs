//! Dead letters for operators: what could not be applied, and marking what
//! was dealt with (resolved ones are purged after a while, see
//! [`crate::retention`]).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::error::Result;

/// A dead letter without its payload.
#[derive(Debug, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetter {
    pub id: i64,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub event_id: Option<Uuid>,
    pub error: String,
    pub recorded_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
}

/// Dead letters in the order they were recorded; unresolved ones only
/// unless `all`.
pub async fn list(pool: &PgPool, all: bool) -> Result<Vec<DeadLetter>> {
    Ok(sqlx::query_as(
        r#"SELECT id, topic, partition, "offset", event_id, error, recorded_at, resolved_at
           FROM dead_letters WHERE $1 OR resolved_at IS NULL ORDER BY id"#,
    )
    .bind(all)
    .fetch_all(pool)
    .await?)
}

/// Marks dead letters resolved; returns how many were unresolved.
pub async fn resolve(pool: &PgPool, ids: &[i64]) -> Result<u64> {
    Ok(sqlx::query(
        "UPDATE dead_letters SET resolved_at = now() WHERE id = ANY($1) AND resolved_at IS NULL",
    )
    .bind(ids)
    .execute(pool)
    .await?
    .rows_affected())
}
