//! A webhook's deliveries as its owner debugs them: the attempts made
//! (newest first, a page at a time), and a message sent again now.

use chrono::{DateTime, Utc};
use ratewire_readmodel::views::millis;
use serde::Serialize;
use sqlx::FromRow;
use uuid::Uuid;

use super::webhooks::{Queued, WEBHOOK_NOT_FOUND};
use super::Registry;
use crate::error::{Error, Result};

/// Attempts on one page, about: a page ends between two milliseconds,
/// so it also holds every other attempt of its oldest one's.
pub const ATTEMPTS_PER_PAGE: i64 = 100;

/// One attempt at a message, as its owner sees it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// The message's `webhook-id`.
    pub message_id: String,
    /// The message's event type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Which attempt at the message this was (1 for the first).
    pub attempt: i32,
    #[serde(serialize_with = "millis::one")]
    pub attempted_at: DateTime<Utc>,
    pub duration_ms: i32,
    /// Whether the endpoint took it (answered 2xx in time).
    pub delivered: bool,
    /// The answer's status; `None` when none came.
    pub status: Option<i32>,
    /// Why it failed; `None` when delivered.
    pub error: Option<String>,
}

/// An attempt's row, with its message's type.
#[derive(FromRow)]
struct Row {
    message_id: String,
    kind: String,
    number: i32,
    started_at: DateTime<Utc>,
    duration_ms: i32,
    status: Option<i32>,
    error: Option<String>,
}

impl From<Row> for Attempt {
    fn from(row: Row) -> Self {
        Attempt {
            message_id: row.message_id,
            kind: row.kind,
            attempt: row.number,
            attempted_at: row.started_at,
            duration_ms: row.duration_ms,
            // A failed attempt is recorded with why.
            delivered: row.error.is_none(),
            status: row.status,
            error: row.error,
        }
    }
}

/// A page of a webhook's attempts.
#[derive(Debug)]
pub struct Attempts {
    pub attempts: Vec<Attempt>,
    /// When older attempts exist: the time the next page is before (this
    /// page's oldest attempt's).
    pub older: Option<DateTime<Utc>>,
}

/// A page's attempts: those before `$2` of webhook `$1`, newest first, the
/// first `$3` and every other one in the millisecond of the last.
const PAGE: &str = "WITH page AS (
        SELECT started_at FROM attempts WHERE webhook_id = $1 AND started_at < $2
        ORDER BY started_at DESC LIMIT $3)
    SELECT a.message_id, d.type AS kind, a.number, a.started_at, a.duration_ms, a.status,
           a.error
    FROM attempts a JOIN deliveries d ON d.id = a.message_id
    WHERE a.webhook_id = $1 AND a.started_at < $2
      AND a.started_at >= (SELECT min(started_at) FROM page)
    ORDER BY a.started_at DESC, a.message_id, a.number DESC";

impl Registry {
    /// The attempts at `owner`'s webhook `id`'s messages made before
    /// `before`, newest first, a page of about [`ATTEMPTS_PER_PAGE`]. They
    /// are kept as long as their messages: once delivered or given up, a
    /// message goes when it is a week old.
    pub async fn attempts(&self, owner: &str, id: Uuid, before: DateTime<Utc>) -> Result<Attempts> {
        self.owned_webhook(owner, id).await?;
        let rows: Vec<Row> = sqlx::query_as(PAGE)
            .bind(id)
            .bind(before)
            .bind(ATTEMPTS_PER_PAGE)
            .fetch_all(&self.pool)
            .await?;
        let attempts: Vec<Attempt> = rows.into_iter().map(Attempt::from).collect();
        let oldest = attempts.last().map(|a| a.attempted_at);
        let older: bool = match oldest {
            Some(oldest) => sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM attempts WHERE webhook_id = $1 AND started_at < $2)",
            )
            .bind(id)
            .bind(oldest)
            .fetch_one(&self.pool)
            .await?,
            None => false,
        };
        Ok(Attempts {
            attempts,
            older: oldest.filter(|_| older),
        })
    }

    /// Sends `owner`'s message `message` of webhook `id` now: one waiting
    /// for its next attempt, or one given up (it gets this attempt; failed,
    /// it is given up again). A disabled webhook is enabled again for it,
    /// as for a test. A delivered message is not sent again.
    pub async fn retry(&self, owner: &str, id: Uuid, message: &str) -> Result<Queued> {
        self.owned_webhook(owner, id).await?;
        let mut tx = self.pool.begin().await?;
        // The message is locked first, then its webhook changed: the order
        // the deliverer records attempts in, so neither waits on the other.
        let delivered_at: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(
            "SELECT delivered_at FROM deliveries WHERE id = $1 AND webhook_id = $2 FOR UPDATE",
        )
        .bind(message)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        match delivered_at {
            None => return Err(Error::NotFound("Message not found")),
            Some(Some(_)) => return Err(Error::Conflict("Message already delivered")),
            Some(None) => {}
        }
        sqlx::query(
            "UPDATE deliveries SET failed_at = NULL, next_attempt_at = now() WHERE id = $1",
        )
        .bind(message)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE webhooks SET disabled_at = NULL WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Queued {
            message_id: message.to_owned(),
        })
    }

    /// Whether `id` is one of `owner`'s webhooks (not found otherwise).
    async fn owned_webhook(&self, owner: &str, id: Uuid) -> Result<()> {
        let owned: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM webhooks WHERE id = $1 AND owner = $2)",
        )
        .bind(id)
        .bind(owner)
        .fetch_one(&self.pool)
        .await?;
        if owned {
            Ok(())
        } else {
            Err(Error::NotFound(WEBHOOK_NOT_FOUND))
        }
    }
}
