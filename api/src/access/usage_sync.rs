//! Keeps monthly counts in Postgres so they outlive Redis.
//!
//! Every `RATEWIRE_USAGE_SYNC_SECS` each API instance:
//! 1. restores: when this month's marker key is missing from Redis (a flush,
//!    a restart without persistence, a new Redis), it adds the counts saved
//!    in Postgres back onto Redis's counters, each with a marker of its own
//!    set in the same script (one key slot: a Redis Cluster runs it), so
//!    each count is restored once whichever instances try and however often,
//!    and then sets the month's marker;
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
use ratewire_readmodel::redis::Connection;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use ratewire_service::periodic::every;

use ratewire_readmodel::continuity::Continuity;

use crate::access::limits::{month_key, month_window, restored_key, MONTH_TTL_SECONDS};

/// Adds a saved count (`ARGV[2]`) onto its counter (`KEYS[2]`) unless its
/// marker (`KEYS[1]`) says it was added already; `ARGV[1]` the lifetime.
const RESTORE: &str = r#"
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
redis.call('INCRBY', KEYS[2], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
"#;

/// Raises a counter (`KEYS[1]`) to at least its saved count (`ARGV[2]`,
/// `ARGV[1]` the lifetime): after Redis went back in time its counters are
/// old, and adding the saved counts to them would count twice.
const RAISE: &str = r#"
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[1])
  return 1
end
return 0
"#;

/// Keys read with one `MGET` at most (a cluster splits it by slot).
const MGET_CHUNK: usize = 1_000;

pub struct UsageSync {
    pub pool: PgPool,
    pub redis: Connection,
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
        let marker = format!("{}rl:restored:{month}", self.prefix);
        let done: bool = redis::cmd("EXISTS")
            .arg(&marker)
            .query_async(&mut redis)
            .await?;
        if !done {
            let restored = self
                .per_counter(&mut redis, RESTORE, &saved, |subject| {
                    vec![
                        restored_key(&self.prefix, subject, &month),
                        self.counter(subject, &month),
                    ]
                })
                .await?;
            let _: () = redis::cmd("SET")
                .arg(&marker)
                .arg(1)
                .arg("EX")
                .arg(MONTH_TTL_SECONDS)
                .query_async(&mut redis)
                .await?;
            if restored > 0 {
                tracing::warn!(
                    subjects = restored,
                    month,
                    "monthly counts restored from postgres into redis"
                );
            }
        }
        if !self.continuity.check(&self.pool, redis.clone()).await? {
            let raised = self
                .per_counter(&mut redis, RAISE, &saved, |subject| {
                    vec![self.counter(subject, &month)]
                })
                .await?;
            tracing::warn!(
                subjects = raised,
                month,
                "redis lost data or went back in time; monthly counts raised to those saved in postgres"
            );
        }

        let keys = redis.scan_match(&self.counter("*", &month)).await?;
        if keys.is_empty() {
            return Ok(());
        }
        let mut values: Vec<Option<i64>> = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(MGET_CHUNK) {
            let part: Vec<Option<i64>> = redis::cmd("MGET")
                .arg(chunk)
                .query_async(&mut redis)
                .await?;
            values.extend(part);
        }
        let head = format!("{}rl:month:{{", self.prefix);
        let tail = format!("}}:{month}");
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

    /// Runs `script` once per saved count, with the keys `keys_of` names
    /// for its subject and the arguments (lifetime, count), in one pipeline
    /// (split by slot in a cluster); how many returned 1.
    async fn per_counter(
        &self,
        redis: &mut Connection,
        script: &str,
        saved: &[(String, i64)],
        keys_of: impl Fn(&str) -> Vec<String>,
    ) -> anyhow::Result<i64> {
        if saved.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for (subject, used) in saved {
            let keys = keys_of(subject);
            pipe.cmd("EVAL")
                .arg(script)
                .arg(keys.len())
                .arg(keys)
                .arg(MONTH_TTL_SECONDS)
                .arg(*used);
        }
        let done: Vec<i64> = pipe.query_async(redis).await?;
        Ok(done.iter().sum())
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
