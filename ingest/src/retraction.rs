//! Corrections: a board withdrawn by a `BoardRetracted` event.
//!
//! Every board is recorded here before it is published, so a retraction
//! can be checked against what this bank really published: an id that is
//! not one of the bank's boards (or older than the retraction window) is
//! 404, never a no-op event on the log. The record is locked while the
//! retraction is published, so retracting one board twice, even at once,
//! publishes one event: the second answer carries the first one's id.
//!
//! A board recorded whose publish then failed may be retracted too; the
//! projector ignores a retraction of a board it never applied.

use chrono::{Duration, Utc};
use ratewire_proto::{BankId, BoardRetracted, Envelope, Event};
use sqlx::PgPool;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::outbox;
use crate::publisher::Publisher;

/// Publishes the retraction of `bank`'s board `board_event_id`, or finds
/// the one already published; returns the retraction's event id.
pub async fn retract(
    pool: &PgPool,
    publisher: &Publisher,
    window: Duration,
    bank: BankId,
    board_event_id: Uuid,
    reason: Option<String>,
) -> Result<Uuid> {
    let retraction = BoardRetracted {
        board_event_id,
        reason: reason.filter(|r| !r.trim().is_empty()),
    };
    retraction
        .check()
        .map_err(|v| Error::validation(&v.field, v.message))?;
    crate::banks::agrees_with_log(pool, bank).await?;
    let mut tx = pool.begin().await?;
    let found: Option<Option<Uuid>> = sqlx::query_scalar(
        "SELECT retracted_by FROM published_boards
         WHERE event_id = $1 AND bank_id = $2 AND created_at > now() - $3::interval
         FOR UPDATE",
    )
    .bind(board_event_id)
    .bind(bank.get())
    .bind(format!("{} seconds", window.num_seconds()))
    .fetch_optional(&mut *tx)
    .await?;
    let Some(retracted_by) = found else {
        return Err(Error::NotFound("Board not found".into()));
    };
    if let Some(earlier) = retracted_by {
        return Ok(earlier);
    }
    // The bank's own changes waiting in the outbox go first, as for boards.
    outbox::before_board(pool, publisher, bank).await?;
    let envelope = Envelope::new(bank, Utc::now(), Event::BoardRetracted(retraction));
    publisher.publish(&envelope).await?;
    sqlx::query("UPDATE published_boards SET retracted_by = $2 WHERE event_id = $1")
        .bind(board_event_id)
        .bind(envelope.event_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!(%bank, board = %board_event_id, retraction = %envelope.event_id, "board retracted");
    Ok(envelope.event_id)
}

/// Forgets boards older than the retraction window; returns how many.
pub async fn purge(pool: &PgPool, window: Duration) -> Result<u64> {
    Ok(
        sqlx::query("DELETE FROM published_boards WHERE created_at < now() - $1::interval")
            .bind(format!("{} seconds", window.num_seconds()))
            .execute(pool)
            .await?
            .rows_affected(),
    )
}
