//! Bank changes reach the log through an outbox: the change and its event
//! are committed in one transaction, and the event is published afterwards
//! (at once, and again by a task beside the server until the broker has
//! it). So ingest's record and the log never disagree: a failed publish no
//! longer loses a committed change, and a failed commit publishes nothing.
//!
//! One drainer at a time (a Postgres advisory lock across instances)
//! publishes in commit order and deletes what the broker acknowledged. A
//! crash between the two publishes an event again: same event id, which the
//! projector applies once. A board of a bank with events still waiting is
//! published only after them, so no board overtakes its bank's
//! registration.

use std::time::Duration;

use ratewire_proto::{decode, encode, BankId, Decoded, Envelope};
use sqlx::{PgConnection, PgPool};

use crate::error::{Error, Result};
use crate::publisher::Publisher;

/// The advisory lock that makes one drainer at a time.
const DRAIN_LOCK: i64 = 0x7261_7465_6f75_7462; // "rateoutb"
/// Events published per drain, at most.
const DRAIN_BATCH: i64 = 100;
/// How often the background task drains.
pub const DRAIN_EVERY: Duration = Duration::from_secs(1);

/// Adds `envelope` to the outbox, inside the change's transaction.
pub async fn add(tx: &mut PgConnection, envelope: &Envelope) -> Result<()> {
    sqlx::query("INSERT INTO outbox (bank_id, envelope) VALUES ($1, $2)")
        .bind(envelope.bank_id.get())
        .bind(String::from_utf8(encode(envelope)).expect("the envelope is JSON"))
        .execute(tx)
        .await?;
    Ok(())
}

/// Publishes waiting events in commit order until the outbox is empty;
/// returns how many. Another instance draining meanwhile makes this a
/// no-op (it will publish them).
pub async fn drain(pool: &PgPool, publisher: &Publisher) -> Result<usize> {
    let mut published = 0;
    loop {
        let mut tx = pool.begin().await?;
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
            .bind(DRAIN_LOCK)
            .fetch_one(&mut *tx)
            .await?;
        if !locked {
            return Ok(published);
        }
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT id, envelope FROM outbox ORDER BY id LIMIT $1")
                .bind(DRAIN_BATCH)
                .fetch_all(&mut *tx)
                .await?;
        if rows.is_empty() {
            return Ok(published);
        }
        let mut done = Vec::new();
        let mut failure = None;
        for (id, text) in &rows {
            let envelope = match decode(text.as_bytes()) {
                Ok(Decoded::Event(envelope)) => envelope,
                // Written by this build from a valid envelope.
                other => {
                    tracing::error!(id, ?other, "an outbox row does not decode; dropping it");
                    done.push(*id);
                    continue;
                }
            };
            match publisher.publish(&envelope).await {
                Ok(_) => done.push(*id),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        sqlx::query("DELETE FROM outbox WHERE id = ANY($1)")
            .bind(&done)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        published += done.len();
        if let Some(e) = failure {
            return Err(e);
        }
    }
}

/// Whether events of `bank` still wait for the broker.
pub async fn pending_for(pool: &PgPool, bank: BankId) -> Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM outbox WHERE bank_id = $1)")
            .bind(bank.get())
            .fetch_one(pool)
            .await?,
    )
}

/// Before a board of `bank` is published: its waiting events go first.
/// 503 when they cannot (the broker is unavailable).
pub async fn before_board(pool: &PgPool, publisher: &Publisher, bank: BankId) -> Result<()> {
    let waiting = pending_for(pool, bank).await?;
    before_board_known(pool, publisher, bank, waiting).await
}

/// [`before_board`] where the caller has read whether `bank` has events
/// `waiting` (authentication reads it with the token).
pub async fn before_board_known(
    pool: &PgPool,
    publisher: &Publisher,
    bank: BankId,
    waiting: bool,
) -> Result<()> {
    if !waiting {
        return Ok(());
    }
    drain(pool, publisher).await?;
    if pending_for(pool, bank).await? {
        return Err(Error::Unavailable {
            what: "broker",
            cause: format!("bank {bank}'s earlier changes are not on the log yet"),
        });
    }
    Ok(())
}
