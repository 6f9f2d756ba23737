//! `Idempotency-Key` for board pushes.
//!
//! The first push with a key records its board's fingerprint (the board
//! as parsed: `board::Push::fingerprint`, so the same board written with
//! other whitespace, field order or entry order is the same push) and the
//! event id it will publish, before publishing. A retry with the same key
//! and board reuses that event id: answered from the record once the
//! broker acknowledged it, published again (same id, applied once by the
//! projector) if the first attempt never got its acknowledgement. The same
//! key with another board is refused with 422. Records are kept for
//! `RETENTION` and then purged.

use chrono::{DateTime, Duration, Utc};
use ratewire_proto::BankId;
use sqlx::PgPool;
use uuid::Uuid;

use crate::error::{Error, Result};

/// How long a key is remembered (at least the 24 hours promised).
pub const RETENTION: Duration = Duration::hours(25);
/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 200;

/// What to do with a push that carries a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Publish this event id (first attempt, or a retry of an unacknowledged one).
    Publish(Uuid),
    /// Already acknowledged: answer with this event id (and known-at
    /// time, when the broker gave one), publish nothing.
    Replay(Uuid, Option<DateTime<Utc>>),
}

pub fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::validation(
            "Idempotency-Key",
            format!("must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
        ));
    }
    Ok(())
}

/// Claims `key` for a board with `body_hash` (its fingerprint), proposing
/// `event_id`.
pub async fn claim(
    pool: &PgPool,
    bank: BankId,
    key: &str,
    body_hash: &str,
    event_id: Uuid,
) -> Result<Claim> {
    // Forget expired keys of this bank first, so an old key can be reused.
    sqlx::query("DELETE FROM idempotency_keys WHERE bank_id = $1 AND key = $2 AND created_at < now() - $3::interval")
        .bind(bank.get())
        .bind(key)
        .bind(format!("{} seconds", RETENTION.num_seconds()))
        .execute(pool)
        .await?;
    sqlx::query(
        "INSERT INTO idempotency_keys (bank_id, key, body_hash, event_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT (bank_id, key) DO NOTHING",
    )
    .bind(bank.get())
    .bind(key)
    .bind(body_hash)
    .bind(event_id)
    .execute(pool)
    .await?;
    let (stored_hash, stored_event, accepted, known_at): (String, Uuid, bool, Option<DateTime<Utc>>) = sqlx::query_as(
        "SELECT body_hash, event_id, accepted_at IS NOT NULL, known_at FROM idempotency_keys WHERE bank_id = $1 AND key = $2",
    )
    .bind(bank.get())
    .bind(key)
    .fetch_one(pool)
    .await?;
    if stored_hash != body_hash {
        return Err(Error::Unprocessable(
            "Idempotency-Key was already used with a different board".into(),
        ));
    }
    Ok(if accepted {
        Claim::Replay(stored_event, known_at)
    } else {
        Claim::Publish(stored_event)
    })
}

/// Records that the broker acknowledged the key's event (at `known_at`,
/// its log-append time, when it said).
pub async fn accepted(
    pool: &PgPool,
    bank: BankId,
    key: &str,
    known_at: Option<DateTime<Utc>>,
) -> Result<()> {
    sqlx::query(
        "UPDATE idempotency_keys SET accepted_at = now(), known_at = $3 WHERE bank_id = $1 AND key = $2",
    )
        .bind(bank.get())
        .bind(key)
        .bind(known_at)
        .execute(pool)
        .await?;
    Ok(())
}

/// Removes keys older than the retention.
pub async fn purge(pool: &PgPool) -> Result<u64> {
    Ok(
        sqlx::query("DELETE FROM idempotency_keys WHERE created_at < now() - $1::interval")
            .bind(format!("{} seconds", RETENTION.num_seconds()))
            .execute(pool)
            .await?
            .rows_affected(),
    )
}
