//! Ready-made views kept in this process between their changes.
//!
//! Redis stays the shared source: a view is taken from it the first time
//! and kept here until the projector changes it. The projector adds an
//! entry to the changes stream in the same script that writes a view
//! (`projector::redis_views`); the task that follows that stream for the
//! live stream (`live::Relay::follow`) drops the views an entry
//! names before anything else reads it. A served view is therefore never
//! older than the last entry this instance has read, a millisecond or two
//! behind Redis.
//!
//! Three rules keep it from serving anything older:
//! - A view read from Redis is kept only if no entry was handled between
//!   the moment the read was sent and the moment it is kept (a
//!   [`Ticket`] taken before the read; checked under the lock every drop
//!   takes). Otherwise the read may hold what an entry has just replaced.
//! - While the follower cannot read the stream (Redis down, a generation
//!   switch), nothing is kept or served from here: entries may be missed.
//! - Each kept view is served for at most `max_age`, so a write that came
//!   with no entry (none is known) would show after that long anyway.
//!
//! A view asked for in the last quarter of its age is read again in the
//! background (`Kept::due`), once: a busy view never runs out, so the
//! requests behind it never all fall to Redis at the same moment (for a
//! large list, every connection's read of it at once is a stall).
//!
//! Bounded: at most `max_bytes` of bodies; a view larger than a quarter of
//! that is never kept.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;

use crate::views::requests::Stored;

/// `head + body + tail`, gzip-encoded.
fn encode(head: &[u8], body: &[u8], tail: &[u8]) -> Bytes {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let gzip = encoder
        .write_all(head)
        .and_then(|()| encoder.write_all(body))
        .and_then(|()| encoder.write_all(tail))
        .and_then(|()| encoder.finish())
        .expect("gzip into memory");
    Bytes::from(gzip)
}

/// Smaller bodies are never compressed: the encoding costs more than the
/// bytes it saves.
const SMALLEST_COMPRESSED: usize = 1024;

/// A view as kept: what Redis held and, once a client asked for it, the
/// gzip encoding of the whole response body.
#[derive(Clone)]
struct Kept {
    stored: Stored,
    at: Instant,
    gzip: Arc<Encoding>,
    /// Whether a read of it again was asked for.
    refreshing: Arc<AtomicBool>,
}

impl Kept {
    /// Whether it is time to read it again (the last quarter of its age),
    /// for the first to ask.
    fn due(&self, max_age: Duration) -> bool {
        self.at.elapsed() >= max_age - max_age / 4 && !self.refreshing.swap(true, Ordering::AcqRel)
    }
}

/// A kept view, and whether its caller is to read it again (see the
/// module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub stored: Stored,
    pub read_again: bool,
}

/// The gzip encoding of a kept view: made once, off the request path.
#[derive(Default)]
struct Encoding {
    made: OnceLock<Bytes>,
    started: AtomicBool,
}

#[derive(Default)]
struct Entries {
    views: HashMap<String, Kept>,
    bytes: usize,
}

/// What a view read from Redis needs in order to be kept: the cache's state
/// when the read was sent.
#[derive(Debug, Clone, Copy)]
pub struct Ticket(u64);

pub struct ViewCache {
    entries: RwLock<Entries>,
    /// Changed, under the write lock, by every drop, suspension and
    /// resumption: a ticket of an earlier value keeps nothing.
    epoch: AtomicU64,
    /// Whether the changes stream is followed (see the module docs).
    live: AtomicBool,
    max_age: Duration,
    max_bytes: usize,
}

impl ViewCache {
    /// A cache serving views for at most `max_age` (zero: keeps nothing)
    /// within `max_bytes`; it serves nothing until [`ViewCache::resume`].
    pub fn new(max_age: Duration, max_bytes: usize) -> Self {
        Self {
            entries: RwLock::default(),
            epoch: AtomicU64::new(0),
            live: AtomicBool::new(false),
            max_age,
            max_bytes,
        }
    }

    /// Whether views are kept: a maximum age is set and the changes
    /// stream is followed.
    pub fn enabled(&self) -> bool {
        !self.max_age.is_zero() && self.live.load(Ordering::Acquire)
    }

    /// `take` of the kept view of `key`, if any is current.
    fn current<T>(&self, key: &str, take: impl FnOnce(&Kept) -> T) -> Option<T> {
        if !self.enabled() {
            return None;
        }
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        let kept = entries.views.get(key)?;
        (kept.at.elapsed() < self.max_age).then(|| take(kept))
    }

    /// The kept view of `key`, if any is current.
    pub fn get(&self, key: &str) -> Option<Served> {
        self.current(key, |kept| {
            crate::hot_metrics::increment(
                "ratewire_api_views_kept_served_total",
                [crate::hot_metrics::NONE; 2],
            );
            Served {
                stored: kept.stored.clone(),
                read_again: kept.due(self.max_age),
            }
        })
    }

    /// The kept view of `key`, if any is current, as a part of another
    /// (a list's element: see [`crate::views::lists`]): neither counted as served
    /// nor read again ahead of its age.
    pub fn peek(&self, key: &str) -> Option<Stored> {
        self.current(key, |kept| kept.stored.clone())
    }

    /// Taken before reading a view from Redis, to keep what it reads.
    pub fn ticket(&self) -> Option<Ticket> {
        self.enabled()
            .then(|| Ticket(self.epoch.load(Ordering::Acquire)))
    }

    /// Keeps `stored` as `key`'s view, unless something was dropped since
    /// `ticket` was taken (the read may be older than that change).
    pub fn keep(&self, ticket: Option<Ticket>, key: &str, stored: &Stored) {
        let Some(Ticket(epoch)) = ticket else { return };
        let size = stored.body.len();
        if size > self.max_bytes / 4 {
            return;
        }
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if self.epoch.load(Ordering::Acquire) != epoch || !self.live.load(Ordering::Acquire) {
            return;
        }
        if entries.bytes + size > self.max_bytes {
            let max_age = self.max_age;
            entries.views.retain(|_, kept| kept.at.elapsed() < max_age);
            entries.bytes = entries.views.values().map(|k| k.stored.body.len()).sum();
            if entries.bytes + size > self.max_bytes {
                entries.views.clear();
                entries.bytes = 0;
            }
        }
        // The same view read again (its age ran out) keeps its encoding.
        let gzip = entries
            .views
            .get(key)
            .filter(|kept| kept.stored == *stored)
            .map_or_else(Arc::default, |kept| Arc::clone(&kept.gzip));
        let kept = Kept {
            stored: stored.clone(),
            at: Instant::now(),
            gzip,
            refreshing: Arc::default(),
        };
        if let Some(old) = entries.views.insert(key.to_owned(), kept) {
            entries.bytes -= old.stored.body.len();
        }
        entries.bytes += size;
    }

    /// The gzip encoding of `key`'s kept view as the response body
    /// `head + body + tail`, once it is made: the first request that asks
    /// has it made on a blocking thread and is answered plain, as are the
    /// requests until it is done (a large list takes long enough to encode
    /// that a request path waiting on it would hold up every request
    /// behind it). `None` too when the view is not kept as `stored` (it
    /// changed meanwhile) or too small to gain.
    pub fn gzip(
        &self,
        key: &str,
        stored: &Stored,
        head: &'static [u8],
        tail: &'static [u8],
    ) -> Option<Bytes> {
        if stored.body.len() < SMALLEST_COMPRESSED || !self.enabled() {
            return None;
        }
        let encoding = {
            let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
            let kept = entries.views.get(key)?;
            if kept.stored != *stored {
                return None;
            }
            Arc::clone(&kept.gzip)
        };
        if let Some(made) = encoding.made.get() {
            return Some(made.clone());
        }
        if encoding.started.swap(true, Ordering::AcqRel) {
            return None;
        }
        let body = stored.body.clone();
        let encode = move || {
            let started = Instant::now();
            let made = encode(head, &body, tail);
            metrics::histogram!("ratewire_api_view_gzip_seconds")
                .record(started.elapsed().as_secs_f64());
            let _ = encoding.made.set(made.clone());
            made
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(encode);
                None
            }
            // Outside a runtime (tests): made here.
            Err(_) => Some(encode()),
        }
    }

    /// Drops the kept views of `keys` (they changed).
    pub fn drop_views<'k>(&self, keys: impl IntoIterator<Item = &'k str>) {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        self.epoch.fetch_add(1, Ordering::AcqRel);
        for key in keys {
            if let Some(old) = entries.views.remove(key) {
                entries.bytes -= old.stored.body.len();
            }
        }
    }

    /// Stops serving and keeping views: changes may be missed from now on.
    pub fn suspend(&self) {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        self.live.store(false, Ordering::Release);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        entries.views.clear();
        entries.bytes = 0;
    }

    /// Serves and keeps views again: every change from now on will be seen.
    pub fn resume(&self) {
        let _entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if !self.live.load(Ordering::Acquire) {
            self.epoch.fetch_add(1, Ordering::AcqRel);
            self.live.store(true, Ordering::Release);
        }
    }

    /// Bytes of bodies kept now.
    pub fn bytes(&self) -> usize {
        self.entries.read().unwrap_or_else(|e| e.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(body: &str) -> Stored {
        Stored {
            body: Bytes::from(body.to_owned()),
            etag: Some(format!("tag-{body}")),
        }
    }

    fn live_cache() -> ViewCache {
        let cache = ViewCache::new(Duration::from_secs(60), 1 << 20);
        cache.resume();
        cache
    }

    #[test]
    fn a_view_read_is_served_until_its_change_is_seen() {
        let cache = live_cache();
        let ticket = cache.ticket();
        cache.keep(ticket, "k", &stored("a"));
        assert_eq!(cache.get("k").map(|s| s.stored), Some(stored("a")));
        cache.drop_views(["k"]);
        assert_eq!(cache.get("k"), None);
    }

    #[test]
    fn a_read_that_a_change_overtook_is_not_kept() {
        let cache = live_cache();
        // The read is sent; the projector writes a newer view and its entry
        // is handled before the read's answer is kept.
        let ticket = cache.ticket();
        cache.drop_views(["k"]);
        cache.keep(ticket, "k", &stored("old"));
        assert_eq!(cache.get("k"), None);
        // A read sent after the change is kept.
        let ticket = cache.ticket();
        cache.keep(ticket, "k", &stored("new"));
        assert_eq!(cache.get("k").map(|s| s.stored), Some(stored("new")));
    }

    #[test]
    fn nothing_is_kept_or_served_while_changes_may_be_missed() {
        let cache = ViewCache::new(Duration::from_secs(60), 1 << 20);
        assert!(cache.ticket().is_none(), "not following yet");
        cache.resume();
        let ticket = cache.ticket();
        cache.keep(ticket, "k", &stored("a"));
        cache.suspend();
        assert_eq!(cache.get("k"), None);
        cache.keep(ticket, "k", &stored("a"));
        cache.resume();
        assert_eq!(cache.get("k"), None, "a ticket from before stays void");
        let off = ViewCache::new(Duration::ZERO, 1 << 20);
        off.resume();
        assert!(off.ticket().is_none(), "a max age of zero keeps nothing");
    }

    #[test]
    fn a_kept_view_is_served_for_at_most_its_max_age() {
        let cache = ViewCache::new(Duration::from_millis(20), 1 << 20);
        cache.resume();
        cache.keep(cache.ticket(), "k", &stored("a"));
        assert!(cache.get("k").is_some());
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(cache.get("k"), None);
    }

    #[test]
    fn a_view_asked_for_late_in_its_age_is_read_again_by_one_caller() {
        // Ages long enough that a loaded machine's late wake-up still
        // lands inside the view's age.
        let cache = ViewCache::new(Duration::from_millis(2_000), 1 << 20);
        cache.resume();
        cache.keep(cache.ticket(), "k", &stored("a"));
        assert!(!cache.get("k").unwrap().read_again, "young");
        std::thread::sleep(Duration::from_millis(1_600));
        assert!(cache.get("k").unwrap().read_again, "the first to ask late");
        assert!(!cache.get("k").unwrap().read_again, "asked already");
        // Kept again: young again, and asked for again in its own time.
        cache.keep(cache.ticket(), "k", &stored("a"));
        assert!(!cache.get("k").unwrap().read_again);
    }

    #[test]
    fn memory_stays_within_its_bound() {
        let cache = ViewCache::new(Duration::from_secs(60), 4_000);
        cache.resume();
        let body = "x".repeat(900);
        for i in 0..100 {
            cache.keep(cache.ticket(), &format!("k{i}"), &stored(&body));
            assert!(cache.bytes() <= 4_000, "{}", cache.bytes());
        }
        cache.keep(cache.ticket(), "big", &stored(&"y".repeat(1_001)));
        assert_eq!(cache.get("big"), None, "over a quarter of the bound");
    }

    #[test]
    fn the_gzip_encoding_is_the_whole_body_made_once_per_view() {
        use std::io::Read;
        let cache = live_cache();
        let body = "{\"rate\":1},".repeat(200);
        let view = stored(&body);
        cache.keep(cache.ticket(), "k", &view);
        let gzip = cache.gzip("k", &view, b"[", b"]").unwrap();
        let mut plain = String::new();
        flate2::read::GzDecoder::new(&gzip[..])
            .read_to_string(&mut plain)
            .unwrap();
        assert_eq!(plain, format!("[{body}]"));
        assert!(gzip.len() * 10 < plain.len());
        let again = cache.gzip("k", &view, b"[", b"]").unwrap();
        assert_eq!(again.as_ptr(), gzip.as_ptr(), "made once");
        cache.keep(cache.ticket(), "k", &view);
        let reread = cache.gzip("k", &view, b"[", b"]").unwrap();
        assert_eq!(
            reread.as_ptr(),
            gzip.as_ptr(),
            "kept when the same view is read again"
        );
        assert_eq!(
            cache.gzip("k", &stored(&body.replace('1', "2")), b"[", b"]"),
            None
        );
        assert_eq!(cache.gzip("small", &stored("{}"), b"", b""), None);
    }

    #[tokio::test]
    async fn on_the_request_path_the_encoding_is_made_aside_and_served_once_made() {
        let cache = live_cache();
        let view = stored(&"{\"rate\":1},".repeat(200));
        cache.keep(cache.ticket(), "k", &view);
        assert_eq!(
            cache.gzip("k", &view, b"[", b"]"),
            None,
            "answered plain while it is made"
        );
        for _ in 0..200 {
            if cache.gzip("k", &view, b"[", b"]").is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the encoding was never made");
    }
}
