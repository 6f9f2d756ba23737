//! Noticing that Redis lost its data or went back in time.
//!
//! A Redis restarted without persistence comes back empty, and one restored
//! from an older snapshot comes back with old views, old counters and old
//! markers (such as "usage restored this month") that hide the loss. Each
//! process that relies on Redis (projectors for the views, API instances
//! for the usage counters) writes a mark to Redis every so often, taken
//! from a Postgres sequence, so marks only grow, across processes and
//! restarts. Redis keeps the largest. When a process finds in Redis less
//! than the last mark it wrote itself, Redis has lost what it had since:
//! the caller rebuilds what it keeps there.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::redis::Connection;
use sqlx::PgPool;

use crate::error::Result;

/// Keeps the larger of the stored mark and the new one; returns the stored.
const KEEP_LARGER: &str = r#"
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if stored < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return stored
"#;

pub struct Continuity {
    key: String,
    sequence: String,
    /// The last mark this process wrote (0: none yet).
    last: AtomicI64,
    script: redis::Script,
}

impl Continuity {
    /// Marks under `{redis_prefix}continuity`, from the sequence
    /// `{control}.redis_continuity` (a checked identifier).
    pub fn new(redis_prefix: &str, control: &str) -> Self {
        Self {
            key: format!("{redis_prefix}continuity"),
            sequence: format!("{control}.redis_continuity"),
            last: AtomicI64::new(0),
            script: redis::Script::new(KEEP_LARGER),
        }
    }

    /// Creates the sequence if needed (at start).
    pub async fn prepare(&self, pool: &PgPool) -> Result<()> {
        let schema = self.sequence.split('.').next().unwrap_or_default();
        ratewire_service::postgres::create_schema(pool, schema).await?;
        let created = sqlx::query(&format!("CREATE SEQUENCE IF NOT EXISTS {}", self.sequence))
            .execute(pool)
            .await;
        match created {
            Ok(_) => Ok(()),
            // Two processes creating it at once: the loser finds it made.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes a new mark; false when Redis no longer held the last one this
    /// process wrote (it lost data or went back in time since).
    pub async fn check(&self, pool: &PgPool, mut redis: Connection) -> Result<bool> {
        let mark: i64 = sqlx::query_scalar(&format!("SELECT nextval('{}')", self.sequence))
            .fetch_one(pool)
            .await?;
        let stored: i64 = self
            .script
            .key(&self.key)
            .arg(mark)
            .invoke_async(&mut redis)
            .await?;
        let last = self.last.swap(mark, Ordering::AcqRel);
        Ok(last == 0 || stored >= last)
    }
}
