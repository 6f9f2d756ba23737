//! API keys: created by operators, stored as hashes, looked up per request
//! through a Redis cache shared by every API instance.
//!
//! Revocation writes a short-lived "revoked" marker over the cache entry, and
//! lookups fill the cache only with SET NX, so a lookup racing a revocation
//! can never re-cache the revoked key. Each instance also trusts its own
//! answers for a second (no round trip for a busy key): a revoked key stops
//! working at once on the instance that revoked it, within a second elsewhere.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ratewire_service::secret;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use sqlx::{FromRow, PgPool};

use crate::access::key_directory::{Entry, KeyDirectory};
use crate::access::key_records::{CreatedKey, KEY_KIND};
use crate::error::{Error, Result};
use crate::redis_guard::RedisGuard;
use ratewire_service::postgres::unavailable as postgres_unavailable;

/// The header callers send their API key in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// How long a positive lookup stays cached.
const CACHE_TTL_SECS: u64 = 300;
const REVOKED: &str = "revoked";

/// Who is calling, as far as limits and logs need to know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, FromRow)]
pub struct Caller {
    pub prefix: String,
    pub name: String,
    pub plan: String,
    /// `None` for the anonymous caller.
    #[serde(rename = "createdAt")]
    pub created_at: Option<DateTime<Utc>>,
}

impl Caller {
    /// Who is counted for the key's requests.
    pub fn subject(&self) -> String {
        format!("key:{}", self.prefix)
    }
}

#[derive(Clone)]
pub struct KeyStore {
    pool: PgPool,
    redis: RedisGuard,
    cache_prefix: String,
    /// This process's answers: a valid key's for a second (most requests of
    /// a busy key need no round trip; a revocation reaches other instances
    /// when their entry expires), an unknown key's for a minute (a
    /// repeated bad key costs no query). Bounded, so a flood of made-up
    /// keys cannot grow it. Concurrent lookups of one key share one answer.
    answers: moka::future::Cache<String, Option<Arc<Known>>>,
    /// Keys Postgres said were valid in the last few minutes: they are
    /// checked again whenever needed, outside any client's allowance, so a
    /// real key keeps working while the shared cache is unavailable.
    seen_valid: moka::sync::Cache<String, ()>,
    cache_unless_revoked: redis::Script,
    /// This store among others in the process (see [`Recent`]).
    id: u64,
    /// Revocations made through this instance (see [`Recent`]).
    revocations: Arc<AtomicU64>,
    /// Every live key's prefix and hash (see [`KeyDirectory`]).
    directory: KeyDirectory,
}

/// How long this process trusts that a key is valid.
pub const LOCAL_TTL: Duration = Duration::from_secs(1);
/// How long this process remembers a key as unknown (a key is created
/// before it is ever used, so this delays nothing real).
const INVALID_TTL: Duration = Duration::from_secs(60);
/// Answers kept at most.
const LOCAL_MAX: u64 = 100_000;

/// Valid answers live [`LOCAL_TTL`], invalid ones [`INVALID_TTL`].
struct AnswerLifetime;

impl moka::Expiry<String, Option<Arc<Known>>> for AnswerLifetime {
    fn expire_after_create(
        &self,
        _: &String,
        answer: &Option<Arc<Known>>,
        _: std::time::Instant,
    ) -> Option<Duration> {
        Some(if answer.is_some() {
            LOCAL_TTL
        } else {
            INVALID_TTL
        })
    }
}

/// A key known valid here, with who its requests are counted as.
#[derive(Debug)]
pub struct Known {
    pub caller: Caller,
    /// [`Caller::subject`], made once.
    pub subject: Arc<str>,
    /// When this process learnt it: it is trusted [`LOCAL_TTL`] from then.
    learnt: Instant,
}

impl Known {
    fn new(caller: Caller) -> Arc<Self> {
        Arc::new(Self {
            subject: Arc::from(caller.subject()),
            caller,
            learnt: Instant::now(),
        })
    }

    fn current(&self) -> bool {
        self.learnt.elapsed() < LOCAL_TTL
    }
}

type Digest = [u8; 32];

/// Valid answers a worker thread has just used, by the key's [`tag`] (not
/// the key), with its SHA-256 for the directory's check: the busiest keys
/// cost neither a SHA-256 on every request, nor the hex form, nor the
/// shared answer cache. Each is the process's own answer,
/// trusted no longer than it ([`Known::current`]); a revocation voids them
/// at once on this instance, and on every other within milliseconds (the
/// directory is checked each time).
#[derive(Default)]
struct Recent {
    /// By store and tag: the key's digest, the revocations seen when
    /// taken, and the answer.
    answers: HashMap<(u64, u64), (Digest, u64, Arc<Known>)>,
}

/// Answers a thread holds at most (then it forgets them all).
const RECENT_MAX: usize = 1_024;

impl Recent {
    fn get(&self, store: u64, tag: u64, revocations: u64) -> Option<(Digest, Arc<Known>)> {
        let (digest, seen, known) = self.answers.get(&(store, tag))?;
        (*seen == revocations && known.current()).then(|| (*digest, Arc::clone(known)))
    }

    fn put(&mut self, store: u64, tag: u64, digest: Digest, revocations: u64, known: Arc<Known>) {
        if self.answers.len() >= RECENT_MAX {
            self.answers.clear();
        }
        self.answers
            .insert((store, tag), (digest, revocations, known));
    }
}

/// A key's tag in [`Recent`]: its SipHash under keys this process drew at
/// random. Nobody who does not know them can make two keys share a tag, so
/// a tag names one key as surely as its SHA-256, at a fraction of the cost.
fn tag(key: &str) -> u64 {
    static TAGS: LazyLock<RandomState> = LazyLock::new(RandomState::new);
    TAGS.hash_one(key)
}

thread_local! {
    static RECENT: RefCell<Recent> = RefCell::new(Recent::default());
}

/// Tells key stores apart in [`RECENT`] (tests run several in a process).
static STORES: AtomicU64 = AtomicU64::new(0);

/// What a key lookup found.
#[derive(Debug, Clone)]
pub enum Lookup {
    Valid(Arc<Known>),
    /// Unknown, malformed or revoked.
    Invalid,
    /// Not in any cache, and Postgres was not asked (the directory of live
    /// keys is not current and the client is over its allowance): neither
    /// valid nor known invalid, so answered 503.
    NotChecked,
}

impl From<sqlx::Error> for Unanswered {
    fn from(e: sqlx::Error) -> Self {
        Unanswered::Postgres {
            unavailable: postgres_unavailable(&e),
            message: e.to_string(),
        }
    }
}

/// What the shared Redis cache says of a key.
enum Shared {
    Revoked,
    /// Valid, and checked against Postgres within the last second.
    Fresh(Caller),
    /// Valid when last checked, longer ago than a second.
    Stale(Caller),
    Missing,
}

/// A valid key in the shared cache, and when Postgres last said so.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CachedKey {
    caller: Caller,
    checked_at: i64,
}

fn never() -> bool {
    false
}

fn now_millis() -> i64 {
    Utc::now().timestamp_millis()
}

/// Writes a valid key's cache entry, unless a revocation's marker is there.
const CACHE_UNLESS_REVOKED: &str = r#"
if redis.call('GET', KEYS[1]) == 'revoked' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
"#;

/// What revoking did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// The key is revoked (now, or it already was).
    Revoked,
    NotFound,
}

/// Why a lookup has no answer to remember (shared by the requests that
/// waited for it).
#[derive(Debug)]
enum Unanswered {
    NotChecked,
    Postgres { unavailable: bool, message: String },
}

impl KeyStore {
    pub fn new(pool: PgPool, redis: RedisGuard, redis_prefix: &str) -> Self {
        Self {
            pool,
            redis,
            cache_prefix: format!("{redis_prefix}apikey:"),
            answers: moka::future::Cache::builder()
                .max_capacity(LOCAL_MAX)
                .expire_after(AnswerLifetime)
                .build(),
            seen_valid: moka::sync::Cache::builder()
                .max_capacity(LOCAL_MAX)
                .time_to_live(Duration::from_secs(CACHE_TTL_SECS))
                .build(),
            cache_unless_revoked: redis::Script::new(CACHE_UNLESS_REVOKED),
            id: STORES.fetch_add(1, Ordering::Relaxed),
            revocations: Arc::default(),
            // Never current until given one that follows the changes.
            directory: KeyDirectory::new("", 0),
        }
    }

    /// Keeps the directory of live keys current from Postgres's
    /// notifications, until `shutdown`.
    pub fn follow_changes(&self, pool: PgPool, shutdown: tokio_util::sync::CancellationToken) {
        self.directory.spawn(pool, shutdown);
    }

    /// Makes a key created through this instance known here at once, ahead
    /// of its notification.
    pub fn created(&self, key: &CreatedKey) {
        self.directory
            .set(&key.info.prefix, &secret::hash(&key.key), true);
    }

    /// This store with `directory` (which the caller keeps current).
    pub fn with_directory(mut self, directory: KeyDirectory) -> Self {
        self.directory = directory;
        self
    }

    /// Who a key belongs to. A key the directory of live keys does not
    /// hold is invalid at once, at no cost. A live one is read from this
    /// process's memory, the shared Redis cache, or Postgres.
    ///
    /// Only while the directory is not current does a key no cache knows
    /// need `may_ask_postgres` (the client's allowance of lookups); it is
    /// asked once per key (concurrent requests with one key wait for one
    /// answer), so a flood of made-up keys costs at most the allowance.
    pub async fn lookup(
        &self,
        key: &str,
        may_ask_postgres: impl FnOnce() -> bool,
    ) -> Result<Lookup> {
        let Some(prefix) = secret::prefix_of(KEY_KIND, key) else {
            return Ok(Lookup::Invalid);
        };
        // Most requests: a key this thread has just found valid.
        let revocations = self.revocations.load(Ordering::Acquire);
        let tag = tag(key);
        let recent = RECENT.with_borrow(|recent| recent.get(self.id, tag, revocations));
        if let Some((digest, known)) = recent {
            // Revoked anywhere: gone from the directory within milliseconds.
            if known.caller.prefix == prefix
                && self.directory.entry(prefix, &digest) != Entry::Unknown
            {
                return Ok(Lookup::Valid(known));
            }
        }
        let digest = secret::digest(key);
        let entry = self.directory.entry(prefix, &digest);
        if entry == Entry::Unknown {
            return Ok(Lookup::Invalid);
        }
        let hash = hex::encode(digest);
        let find = self.find(&hash, prefix, &digest, entry, may_ask_postgres);
        let mut answer = self.answers.try_get_with_by_ref(&hash, find).await;
        if entry == Entry::Live && matches!(answer, Ok(None)) {
            // Answered invalid before the directory knew of the key.
            self.answers.invalidate(&hash).await;
            let find = self.find(&hash, prefix, &digest, entry, never);
            answer = self.answers.try_get_with_by_ref(&hash, find).await;
        }
        match answer {
            Ok(Some(known)) => {
                RECENT.with_borrow_mut(|recent| {
                    recent.put(self.id, tag, digest, revocations, Arc::clone(&known));
                });
                Ok(Lookup::Valid(known))
            }
            Ok(None) => Ok(Lookup::Invalid),
            Err(unanswered) => match &*unanswered {
                Unanswered::NotChecked => Ok(Lookup::NotChecked),
                Unanswered::Postgres {
                    unavailable,
                    message,
                } => Err(Error::Shared {
                    what: "key lookup",
                    unavailable: *unavailable,
                    message: message.clone(),
                }),
            },
        }
    }

    /// The answer to keep for a key no answer of this process holds.
    async fn find(
        &self,
        hash: &str,
        prefix: &str,
        digest: &Digest,
        entry: Entry,
        may_ask_postgres: impl FnOnce() -> bool,
    ) -> Result<Option<Arc<Known>>, Unanswered> {
        let found = match self.lookup_shared(hash).await {
            Shared::Revoked => Ok(None),
            Shared::Fresh(caller) => Ok(Some(caller)),
            // A key the shared cache or this process knew valid is checked
            // again outside the client's allowance. While Postgres is
            // unreachable no key can be revoked, so the cached answer stands.
            Shared::Stale(cached) => match self.lookup_postgres(hash).await {
                Err(e) if postgres_unavailable(&e) => Ok(Some(cached)),
                found => found.map_err(Unanswered::from),
            },
            Shared::Missing
                if entry == Entry::Live
                    || self.seen_valid.contains_key(hash)
                    || may_ask_postgres() =>
            {
                match self.lookup_postgres(hash).await {
                    // Nor can one be created: a key the directory did not
                    // hold when last current is invalid.
                    Err(e)
                        if postgres_unavailable(&e)
                            && self.directory.last_known(prefix, digest) == Some(false) =>
                    {
                        Ok(None)
                    }
                    found => found.map_err(Unanswered::from),
                }
            }
            Shared::Missing => Err(Unanswered::NotChecked),
        };
        found.map(|caller| caller.map(Known::new))
    }

    /// What the shared cache says of a key.
    async fn lookup_shared(&self, hash: &str) -> Shared {
        let cache_key = format!("{}{hash}", self.cache_prefix);
        let cached = self
            .redis
            .call("reading the key cache", |mut conn| async move {
                conn.get::<_, Option<String>>(&cache_key).await
            })
            .await;
        // Unavailable: keys this process knows are checked in Postgres.
        let Ok(cached) = cached else {
            return Shared::Missing;
        };
        let Some(cached) = cached else {
            return Shared::Missing;
        };
        if cached == REVOKED {
            return Shared::Revoked;
        }
        match serde_json::from_str::<CachedKey>(&cached) {
            Ok(entry) if entry.checked_at + LOCAL_TTL.as_millis() as i64 >= now_millis() => {
                Shared::Fresh(entry.caller)
            }
            // Checked too long ago: a revocation whose marker never
            // reached Redis must still stop the key within a second.
            Ok(entry) => Shared::Stale(entry.caller),
            // Written by an older build: never trusted without Postgres.
            Err(_) => Shared::Missing,
        }
    }

    /// Postgres's answer, which then fills the shared cache (unless a
    /// revocation's marker is there).
    async fn lookup_postgres(&self, hash: &str) -> Result<Option<Caller>, sqlx::Error> {
        metrics::counter!("ratewire_api_key_lookups_postgres_total").increment(1);
        let caller: Option<Caller> = sqlx::query_as(
            "SELECT prefix, name, plan, created_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        if let Some(caller) = &caller {
            self.seen_valid.insert(hash.to_owned(), ());
            let entry = CachedKey {
                caller: caller.clone(),
                checked_at: now_millis(),
            };
            let value = serde_json::to_string(&entry).expect("a cached key serializes");
            let key = format!("{}{hash}", self.cache_prefix);
            let script = &self.cache_unless_revoked;
            let set = self
                .redis
                .call("caching a key", |mut conn| async move {
                    script
                        .key(key)
                        .arg(value)
                        .arg(CACHE_TTL_SECS)
                        .invoke_async::<i64>(&mut conn)
                        .await
                })
                .await;
            if let Err(e) = set {
                tracing::debug!(error = %e, "could not cache a key lookup");
            }
        }
        Ok(caller)
    }

    /// Revokes the key named by `prefix`. Revoking a revoked key again
    /// answers the same; `NotFound` only when no key has that prefix.
    ///
    /// Postgres decides: once it has committed, the key stops at once on
    /// this instance and within a second on every other, whether or not the
    /// revocation's marker reaches Redis (entries are re-checked against
    /// Postgres when older than a second).
    pub async fn revoke(&self, prefix: &str) -> Result<Revocation> {
        if !secret::is_prefix(prefix) {
            return Ok(Revocation::NotFound);
        }
        let hash: Option<String> = sqlx::query_scalar(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE prefix = $1 RETURNING key_hash",
        )
        .bind(prefix)
        .fetch_optional(&self.pool)
        .await?;
        let Some(hash) = hash else {
            return Ok(Revocation::NotFound);
        };
        self.directory.set(prefix, &hash, false);
        self.answers.invalidate(&hash).await;
        self.seen_valid.invalidate(&hash);
        self.revocations.fetch_add(1, Ordering::AcqRel);
        // The marker lets other instances stop at once instead of within a
        // second; it outlives any cached entry.
        // Off the request path: the usual response timeout, not the budget.
        let mut redis = self.redis.conn();
        let marked: redis::RedisResult<()> = redis
            .set_ex(
                format!("{}{hash}", self.cache_prefix),
                REVOKED,
                CACHE_TTL_SECS * 2,
            )
            .await;
        if let Err(e) = marked {
            tracing::warn!(key_prefix = prefix, error = %e,
                "api key revoked, but its marker did not reach redis; other instances stop it within a second");
        }
        tracing::info!(key_prefix = prefix, "api key revoked");
        Ok(Revocation::Revoked)
    }
}
