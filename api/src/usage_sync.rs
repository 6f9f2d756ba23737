//! Keeps monthly counts in Postgres so they outlive Redis.
//!
//! Every `RATEWIRE_USAGE_SYNC_SECS` each API instance:
//! 1. restores: when this month's marker key is missing from Redis (a flush,
//!    a restart without persistence, a new Redis), it adds the counts saved
//!    in Postgres back onto Redis's counters and sets the marker, in one
//!    script, so exactly one instance restores;
//! 2. saves: copies this month's counters into Postgres, keeping the larger
//!    value, so instances may save in any order.
//!
//! Requests counted in Redis after the last save and before a flush are the
//! only ones lost: at most one interval's worth. A Redis restored from an
//! older snapshot brings back the month's marker with old counts; the
//! continuity marks ([`Continuity`]) notice it, and each counter is raised
//! to at least what Postgres saved.

use std::time::Duration;

use chrono::Utc;
use redis::aio::ConnectionManager;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use ratewire_service::periodic::every;

use ratewire_readmodel::continuity::Continuity;

use crate::limits::{month_key, month_window, MONTH_TTL_SECONDS};

const RESTORE: &str = r#"
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
for i = 2, #KEYS do
  redis.call('INCRBY', KEYS[i], ARGV[i])
  redis.call('EXPIRE', KEYS[i], ARGV[1])
end
return #KEYS - 1
"#;

/// Raises each counter (`KEYS`) to at least its saved count (`ARGV[i + 1]`,
/// `ARGV[1]` the lifetime): after Redis went back in time its counters are
/// old, and adding the saved counts to them would count twice.
const RAISE: &str = r#"
local raised = 0
for i = 1, #KEYS do
  local current = tonumber(redis.call('GET', KEYS[i]) or '0')
  local saved = tonumber(ARGV[i + 1])
  if current < saved then
    redis.call('SET', KEYS[i], saved, 'EX', ARGV[1])
    raised = raised + 1
  end
end
return raised
"#;

pub struct UsageSync {
    pub pool: PgPool,
    pub redis: ConnectionManager,
    pub prefix: String,
    pub timezone: chrono_tz::Tz,
    pub interval: Duration,
    /// Notices a Redis that went back in time (an old snapshot restored),
    /// which brings its "restored" marker back with old counts.
    pub continuity: Continuity,
}

impl UsageSync {
    fn month(&self) -> String {
        month_window(Utc::now(), self.timezone)
    }

    fn counter(&self, subject: &str, month: &str) -> String {
        month_key(&self.prefix, subject, month)
    }

    /// One restore-then-save pass.
    pub async fn run_once(&self) -> anyhow::Result<()> {
        let month = self.month();
        let mut redis = self.redis.clone();

        let saved: Vec<(String, i64)> =
            sqlx::query_as("SELECT subject, used FROM usage_months WHERE month = $1")
                .bind(&month)
                .fetch_all(&self.pool)
                .await?;
        let script = redis::Script::new(RESTORE);
        let mut restore = script.prepare_invoke();
        restore
            .key(format!("{}rl:restored:{month}", self.prefix))
            .arg(MONTH_TTL_SECONDS);
        for (subject, used) in &saved {
            restore.key(self.counter(subject, &month)).arg(*used);
        }
        let restored: i64 = restore.invoke_async(&mut redis).await?;
        if restored > 0 {
            tracing::warn!(
                subjects = restored,
                month,
                "monthly counts restored from postgres into redis"
            );
        }
        if !self.continuity.check(&self.pool, redis.clone()).await? {
            let script = redis::Script::new(RAISE);
            let mut raise = script.prepare_invoke();
            raise.arg(MONTH_TTL_SECONDS);
            for (subject, used) in &saved {
                raise.key(self.counter(subject, &month)).arg(*used);
            }
            let raised: i64 = raise.invoke_async(&mut redis).await?;
            tracing::warn!(
                subjects = raised,
                month,
                "redis lost data or went back in time; monthly counts raised to those saved in postgres"
            );
        }

        let pattern = self.counter("*", &month);
        let mut keys: Vec<String> = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut redis)
                .await?;
            keys.extend(batch);
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        let values: Vec<Option<i64>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut redis)
            .await?;
        let head = format!("{}rl:month:", self.prefix);
        let tail = format!(":{month}");
        let (subjects, counts): (Vec<String>, Vec<i64>) = keys
            .iter()
            .zip(values)
            .filter_map(|(key, value)| {
                let subject = key.strip_prefix(&head)?.strip_suffix(&tail)?;
                Some((subject.to_owned(), value?))
            })
            .unzip();
        sqlx::query(
            "INSERT INTO usage_months (subject, month, used)
             SELECT subject, $1, used FROM UNNEST($2::text[], $3::bigint[]) AS u (subject, used)
             ON CONFLICT (subject, month)
             DO UPDATE SET used = GREATEST(usage_months.used, EXCLUDED.used), updated_at = now()",
        )
        .bind(&month)
        .bind(&subjects)
        .bind(&counts)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Runs until `shutdown`, then saves once more.
    pub async fn run(self, shutdown: CancellationToken) {
        every("reconciling monthly usage", self.interval, shutdown, || {
            self.run_once()
        })
        .await;
        if let Err(e) = self.run_once().await {
            tracing::warn!(error = %e, "final usage reconciliation failed");
        }
    }
}
