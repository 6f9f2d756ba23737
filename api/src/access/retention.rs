//! What the API keeps of its callers, and for how long:
//! - a key's monthly usage (`usage_months`, subject `key:...`) for
//!   `RATEWIRE_USAGE_RETENTION_MONTHS` months, this one included;
//! - an anonymous client's monthly usage (subject `ip:...`, an address:
//!   personal data) only for the current month, which is all the monthly
//!   quota needs. Its Redis counters expire by themselves
//!   (`limits::MONTH_TTL_SECONDS`).

use chrono::{DateTime, Months, Utc};
use sqlx::PgPool;

use crate::access::limits::month_window;
use crate::error::Result;

/// What one purge removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Purged {
    pub keys: u64,
    pub anonymous: u64,
}

/// Deletes the usage rows the policy no longer keeps, as of `now`.
pub async fn purge(
    pool: &PgPool,
    timezone: chrono_tz::Tz,
    keep_months: u32,
    now: DateTime<Utc>,
) -> Result<Purged> {
    let current = month_window(now, timezone);
    // Months are `YYYYMM`: text order is time order.
    let oldest_kept = now
        .checked_sub_months(Months::new(keep_months.saturating_sub(1)))
        .map_or_else(|| "000000".to_owned(), |t| month_window(t, timezone));
    let keys = sqlx::query("DELETE FROM usage_months WHERE subject LIKE 'key:%' AND month < $1")
        .bind(&oldest_kept)
        .execute(pool)
        .await?
        .rows_affected();
    let anonymous =
        sqlx::query("DELETE FROM usage_months WHERE subject NOT LIKE 'key:%' AND month < $1")
            .bind(&current)
            .execute(pool)
            .await?
            .rows_affected();
    if keys + anonymous > 0 {
        tracing::info!(keys, anonymous, "old usage purged");
    }
    Ok(Purged { keys, anonymous })
}
