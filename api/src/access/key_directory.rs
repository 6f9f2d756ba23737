//! Every live API key's prefix and hash, held in memory: a key no one
//! issued is refused without a query, so a client sending made-up keys
//! costs Postgres nothing and cannot use up anyone's allowance of lookups.
//!
//! Loaded from Postgres when the listener connects, and kept current by the
//! notifications a trigger on `api_keys` sends for every change, whoever
//! makes it (an instance, the CLI, SQL by hand): a key created or revoked
//! anywhere is known everywhere within milliseconds. While the listener is
//! not connected (Postgres away, or the directory over its bound), the
//! directory says it does not know, and lookups fall back to asking.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::Deserialize;
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The channel `api_keys`' trigger notifies (migration 0003).
const CHANNEL: &str = "ratewire_api_keys";

type Digest = [u8; 32];

/// What the directory says of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Issued, not revoked, and the secret matches.
    Live,
    /// No live key has this prefix and secret.
    Unknown,
    /// The directory is not current: ask the key store.
    Unsure,
}

#[derive(Clone)]
pub struct KeyDirectory {
    inner: Arc<Inner>,
}

struct Inner {
    /// Live keys by prefix: their hash.
    keys: RwLock<HashMap<String, Digest>>,
    /// Loaded, and every change since has arrived.
    current: AtomicBool,
    /// Loaded once at least: what it holds is how things stood when the
    /// listener was last connected.
    loaded: AtomicBool,
    schema: String,
    /// Keys held at most; past it the directory stands aside (lookups ask).
    max: usize,
}

/// One key's change, as the trigger sends it.
#[derive(Deserialize)]
struct Change {
    schema: String,
    prefix: String,
    hash: String,
    live: bool,
}

impl KeyDirectory {
    /// An empty directory, not current until [`KeyDirectory::spawn`] has
    /// loaded it.
    pub fn new(schema: &str, max: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                keys: RwLock::default(),
                current: AtomicBool::new(false),
                loaded: AtomicBool::new(false),
                schema: schema.to_owned(),
                max,
            }),
        }
    }

    /// Whether `prefix` names a live key whose hash is `digest`.
    pub fn entry(&self, prefix: &str, digest: &Digest) -> Entry {
        if !self.current() {
            return Entry::Unsure;
        }
        let keys = self.inner.keys.read().expect("key directory lock");
        match keys.get(prefix) {
            Some(hash) if hash == digest => Entry::Live,
            _ => Entry::Unknown,
        }
    }

    /// Whether `prefix` and `digest` named a live key when the directory
    /// was last current; `None` if it never was. For when Postgres cannot
    /// be asked: no key can be created or revoked without it.
    pub fn last_known(&self, prefix: &str, digest: &Digest) -> Option<bool> {
        if !self.inner.loaded.load(Ordering::Acquire) {
            return None;
        }
        let keys = self.inner.keys.read().expect("key directory lock");
        Some(keys.get(prefix) == Some(digest))
    }

    pub fn current(&self) -> bool {
        self.inner.current.load(Ordering::Acquire)
    }

    /// Records a key this instance just created or revoked, ahead of its
    /// notification.
    pub fn set(&self, prefix: &str, hash: &str, live: bool) {
        let Some(digest) = parse(hash) else {
            return;
        };
        let mut keys = self.inner.keys.write().expect("key directory lock");
        if live {
            if keys.len() >= self.inner.max && !keys.contains_key(prefix) {
                self.stand_aside(&mut keys);
                return;
            }
            keys.insert(prefix.to_owned(), digest);
        } else {
            keys.remove(prefix);
        }
    }

    /// Over its bound: holds nothing, and says it does not know.
    fn stand_aside(&self, keys: &mut HashMap<String, Digest>) {
        let count = keys.len();
        *keys = HashMap::new();
        self.inner.loaded.store(false, Ordering::Release);
        if self.inner.current.swap(false, Ordering::AcqRel) {
            warn!(
                keys = count,
                max = self.inner.max,
                "more live API keys than the directory holds; unknown keys are looked up instead (raise RATEWIRE_API_KEY_DIRECTORY_MAX)"
            );
        }
    }

    /// Listens for key changes on `pool`'s database until `shutdown`,
    /// loading every live key each time the listener (re)connects.
    pub fn spawn(&self, pool: PgPool, shutdown: CancellationToken) {
        let directory = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = directory.follow(&pool) => {}
            }
        });
    }

    async fn follow(&self, pool: &PgPool) {
        let mut failures = 0u32;
        loop {
            match self.listen(pool).await {
                Ok(()) => failures = 0,
                Err(e) => {
                    if failures == 0 {
                        warn!(error = %e, "API key directory not current; unknown keys are looked up until it is");
                    }
                    failures = failures.saturating_add(1);
                }
            }
            self.inner.current.store(false, Ordering::Release);
            tokio::time::sleep(Duration::from_millis(500 * u64::from(failures.min(10)))).await;
        }
    }

    /// One connection's worth: listen, load, then apply changes until the
    /// connection is lost.
    async fn listen(&self, pool: &PgPool) -> sqlx::Result<()> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(CHANNEL).await?;
        // Loaded after listening: a change made meanwhile is both in the
        // load and notified, and applying it twice is harmless.
        self.load(pool).await?;
        loop {
            // `None`: the connection was lost and made again, and changes
            // may have been missed.
            let Some(notice) = listener.try_recv().await? else {
                self.inner.current.store(false, Ordering::Release);
                self.load(pool).await?;
                continue;
            };
            match serde_json::from_str::<Change>(notice.payload()) {
                Ok(change) if change.schema == self.inner.schema => {
                    self.set(&change.prefix, &change.hash, change.live);
                }
                Ok(_) => {}
                Err(e) => warn!(error = %e, "unreadable API key notification"),
            }
        }
    }

    async fn load(&self, pool: &PgPool) -> sqlx::Result<()> {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT prefix, key_hash FROM api_keys WHERE revoked_at IS NULL")
                .fetch_all(pool)
                .await?;
        let count = rows.len();
        let keys: HashMap<String, Digest> = rows
            .into_iter()
            .filter_map(|(prefix, hash)| parse(&hash).map(|digest| (prefix, digest)))
            .collect();
        let mut held = self.inner.keys.write().expect("key directory lock");
        if count > self.inner.max {
            self.stand_aside(&mut held);
        } else {
            *held = keys;
            self.inner.loaded.store(true, Ordering::Release);
            self.inner.current.store(true, Ordering::Release);
            info!(keys = count, "API key directory loaded");
        }
        Ok(())
    }
}

fn parse(hash: &str) -> Option<Digest> {
    let mut digest = [0u8; 32];
    hex::decode_to_slice(hash, &mut digest).ok()?;
    Some(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded() -> KeyDirectory {
        let directory = KeyDirectory::new("api", 2);
        directory.inner.current.store(true, Ordering::Release);
        directory
    }

    #[test]
    fn a_key_is_live_only_with_its_own_secret() {
        let directory = loaded();
        let key = "rwk_abcdefgh_0123456789abcdef0123456789abcdef";
        directory.set("abcdefgh", &ratewire_service::secret::hash(key), true);
        let digest = ratewire_service::secret::digest(key);
        assert_eq!(directory.entry("abcdefgh", &digest), Entry::Live);
        let forged = ratewire_service::secret::digest("rwk_abcdefgh_ffff");
        assert_eq!(directory.entry("abcdefgh", &forged), Entry::Unknown);
        assert_eq!(directory.entry("zzzzzzzz", &digest), Entry::Unknown);
        directory.set("abcdefgh", &ratewire_service::secret::hash(key), false);
        assert_eq!(directory.entry("abcdefgh", &digest), Entry::Unknown);
    }

    #[test]
    fn not_loaded_or_over_its_bound_it_is_unsure() {
        let directory = KeyDirectory::new("api", 2);
        assert_eq!(directory.entry("abcdefgh", &[0; 32]), Entry::Unsure);
        let directory = loaded();
        for prefix in ["aaaaaaaa", "bbbbbbbb", "cccccccc"] {
            directory.set(prefix, &"00".repeat(32), true);
        }
        assert_eq!(directory.entry("aaaaaaaa", &[0; 32]), Entry::Unsure);
    }
}
