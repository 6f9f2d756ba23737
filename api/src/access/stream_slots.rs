//! How many live streams a caller holds at once, across every API
//! instance: each stream takes a slot in a Redis sorted set of its caller
//! (member: the stream, score: when the slot lapses), taken in one script
//! that first drops lapsed slots, so a crashed instance's streams free
//! their slots within a minute. Each instance renews its slots while their
//! streams last and gives each back when its stream ends.
//!
//! While Redis cannot be asked, each instance admits at most its share of
//! the plan's streams (at least one when the plan allows any), counted in
//! this process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::redis_guard::RedisGuard;

/// How long a slot lasts without renewal.
const LAPSES_AFTER: Duration = Duration::from_secs(60);
/// How often an instance renews its slots.
const RENEW_EVERY: Duration = Duration::from_secs(20);

const TAKE: &str = r#"
local key, now, lapses, limit, member = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) >= limit then return 0 end
redis.call('ZADD', key, lapses, member)
redis.call('PEXPIRE', key, ARGV[5])
return 1
"#;

pub struct StreamSlots {
    redis: RedisGuard,
    prefix: String,
    take: redis::Script,
    /// Slots held here: member to (subject, counted in Redis).
    held: Mutex<HashMap<String, (String, bool)>>,
}

/// A held slot; dropping it gives it back.
pub struct Slot {
    slots: Arc<StreamSlots>,
    member: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let slots = Arc::clone(&self.slots);
        let member = std::mem::take(&mut self.member);
        let Some((subject, shared)) = slots.held.lock().expect("stream slots").remove(&member)
        else {
            return;
        };
        metrics::gauge!("ratewire_api_streams_open").decrement(1.0);
        if shared {
            tokio::spawn(async move {
                let key = slots.key(&subject);
                let _ = slots
                    .redis
                    .call("giving a stream slot back", |mut conn| async move {
                        redis::cmd("ZREM")
                            .arg(&key)
                            .arg(&member)
                            .query_async::<()>(&mut conn)
                            .await
                    })
                    .await;
            });
        }
    }
}

impl StreamSlots {
    pub fn new(redis: RedisGuard, prefix: &str) -> Self {
        Self {
            redis,
            prefix: prefix.to_owned(),
            take: redis::Script::new(TAKE),
            held: Mutex::new(HashMap::new()),
        }
    }

    fn key(&self, subject: &str) -> String {
        format!("{}streams:{subject}", self.prefix)
    }

    /// A slot for `subject` if it holds fewer than `limit` streams across
    /// instances (`instances` live, for the share taken without Redis).
    pub async fn take(self: &Arc<Self>, subject: &str, limit: u64, instances: u64) -> Option<Slot> {
        if limit == 0 {
            return None;
        }
        let member = uuid::Uuid::new_v4().simple().to_string();
        let now = chrono::Utc::now().timestamp_millis();
        let lapses = now + LAPSES_AFTER.as_millis() as i64;
        let key = self.key(subject);
        let taken = self
            .redis
            .call("taking a stream slot", |mut conn| {
                let mut invocation = self.take.prepare_invoke();
                invocation
                    .key(&key)
                    .arg(now)
                    .arg(lapses)
                    .arg(limit)
                    .arg(&member)
                    .arg(LAPSES_AFTER.as_millis() as u64 * 2);
                async move { invocation.invoke_async::<i64>(&mut conn).await }
            })
            .await;
        let shared = match taken {
            Ok(1) => true,
            Ok(_) => return None,
            Err(_) => {
                let here = self
                    .held
                    .lock()
                    .expect("stream slots")
                    .values()
                    .filter(|(s, _)| s == subject)
                    .count() as u64;
                let share = (limit / instances.max(1)).max(1);
                if here >= share {
                    return None;
                }
                false
            }
        };
        self.held
            .lock()
            .expect("stream slots")
            .insert(member.clone(), (subject.to_owned(), shared));
        metrics::gauge!("ratewire_api_streams_open").increment(1.0);
        Some(Slot {
            slots: Arc::clone(self),
            member,
        })
    }

    /// Renews the slots held here until shutdown.
    pub async fn renew(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(RENEW_EVERY);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let held: Vec<(String, String)> = self
                .held
                .lock()
                .expect("stream slots")
                .iter()
                .filter(|(_, (_, shared))| *shared)
                .map(|(member, (subject, _))| (self.key(subject), member.clone()))
                .collect();
            if held.is_empty() {
                continue;
            }
            let lapses = chrono::Utc::now().timestamp_millis() + LAPSES_AFTER.as_millis() as i64;
            let mut pipe = redis::pipe();
            for (key, member) in &held {
                pipe.cmd("ZADD")
                    .arg(key)
                    .arg("XX")
                    .arg(lapses)
                    .arg(member)
                    .ignore();
                pipe.pexpire(key, LAPSES_AFTER.as_millis() as i64 * 2)
                    .ignore();
            }
            let mut conn = self.redis.conn();
            if let Err(e) = pipe.query_async::<()>(&mut conn).await {
                tracing::debug!(error = %e, "renewing stream slots failed; will retry");
            }
        }
    }
}
