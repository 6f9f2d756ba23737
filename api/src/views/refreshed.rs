//! Views rendered from Postgres for each process (the live quality
//! reports), kept and refreshed behind the requests instead of ahead of
//! them.
//!
//! Such a view costs a render of many rows, so a request must not wait on
//! one: a kept render is served while it is fresh, and once it is older
//! than that, still served while one refresh at a time renders it again
//! in the background. It is fresh for ten times what it cost to render,
//! and at least [`FRESH_AT_LEAST`], so that the refreshes of a costly view
//! keep Postgres and the process busy a tenth of the time at most; a render older than
//! [`KEPT_AT_MOST`] is no longer served, and the next request renders it
//! again. Only the first request for a view (and one after a long quiet)
//! waits, sharing the render with any others asking at once.
//!
//! Failures are not kept: a failed render answers its request, and a
//! failed refresh leaves the kept render to be served until it is too old.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::views::fallback::fingerprinted;
use crate::views::requests::Stored;

/// The least time a render is served before it is refreshed: a report of
/// days is no less true for being seconds old, and refreshing every key
/// asked for every second costs the other reads their cores.
pub const FRESH_AT_LEAST: Duration = Duration::from_secs(5);

/// How many times its cost a render is fresh.
const FRESH_PER_COST: u32 = 10;

/// The oldest render served.
pub const KEPT_AT_MOST: Duration = Duration::from_secs(60);

/// The most bytes of renders kept.
const MOST_BYTES: u64 = 16 * 1024 * 1024;

/// A render, or the "not found" message of its route.
type Rendered = std::result::Result<Stored, &'static str>;

/// A render, when it was made and what it cost.
#[derive(Clone)]
struct Kept {
    rendered: Rendered,
    made: Instant,
    cost: Duration,
}

impl Kept {
    fn fresh(&self) -> bool {
        self.made.elapsed() < (self.cost * FRESH_PER_COST).max(FRESH_AT_LEAST)
    }
}

#[derive(Clone)]
pub struct Refreshed {
    kept: moka::future::Cache<String, Kept>,
    /// The views being refreshed in the background.
    refreshing: Arc<Mutex<HashSet<String>>>,
}

impl Default for Refreshed {
    fn default() -> Self {
        Self {
            kept: moka::future::Cache::builder()
                .max_capacity(MOST_BYTES)
                .weigher(|key: &String, kept: &Kept| {
                    let body = kept.rendered.as_ref().map_or(0, |s| s.body.len());
                    u32::try_from(key.len() + body).unwrap_or(u32::MAX)
                })
                .time_to_live(KEPT_AT_MOST)
                .build(),
            refreshing: Arc::default(),
        }
    }
}

impl Refreshed {
    /// The view kept under `key`, rendered by `render` when none is kept
    /// (shared by the requests asking at once), and refreshed in the
    /// background when the one kept is no longer fresh. `render` answers
    /// `Err(message)` for a view that does not exist (a 404 with that
    /// message).
    pub async fn get<F, Fut>(&self, key: &str, render: F) -> Result<Stored>
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Rendered>> + Send + 'static,
    {
        let kept = self
            .kept
            .try_get_with(key.to_owned(), made(&render))
            .await
            .map_err(|shared: Arc<Error>| {
                Arc::try_unwrap(shared)
                    .unwrap_or_else(|shared| shared.duplicate("rendering a view"))
            })?;
        if !kept.fresh() && self.start_refresh(key) {
            let (this, key) = (self.clone(), key.to_owned());
            tokio::spawn(async move {
                match made(&render).await {
                    Ok(kept) => this.kept.insert(key.clone(), kept).await,
                    Err(e) => tracing::warn!(view = %key, error = %e, "refreshing a view failed"),
                }
                this.refreshing.lock().expect("not poisoned").remove(&key);
            });
        }
        kept.rendered.map_err(Error::NotFound)
    }

    /// Whether this request starts `key`'s refresh (none is under way).
    fn start_refresh(&self, key: &str) -> bool {
        let mut refreshing = self.refreshing.lock().expect("not poisoned");
        !refreshing.contains(key) && refreshing.insert(key.to_owned())
    }
}

/// A render by `render`, timed.
async fn made<F, Fut>(render: &F) -> Result<Kept>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Rendered>>,
{
    let started = Instant::now();
    let rendered = fingerprinted(render).await?;
    Ok(Kept {
        rendered,
        made: Instant::now(),
        cost: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::fallback::rendered;
    use axum::body::Bytes;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A render that counts itself, takes 20 ms, and answers its count.
    type Render = std::pin::Pin<Box<dyn Future<Output = Result<Rendered>> + Send>>;

    fn counted(renders: &Arc<AtomicUsize>) -> impl Fn() -> Render + Send + Sync + 'static {
        let renders = Arc::clone(renders);
        move || {
            let renders = Arc::clone(&renders);
            Box::pin(async move {
                let n = renders.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(Ok(rendered(Bytes::from(n.to_string()))))
            })
        }
    }

    #[tokio::test]
    async fn a_stale_render_is_served_while_one_refresh_renders_it_again() {
        let refreshed = Refreshed::default();
        let renders = Arc::new(AtomicUsize::new(0));
        let mut at_once = tokio::task::JoinSet::new();
        for _ in 0..10 {
            let (refreshed, render) = (refreshed.clone(), counted(&renders));
            at_once.spawn(async move { refreshed.get("view", render).await });
        }
        while let Some(answer) = at_once.join_next().await {
            assert_eq!(answer.unwrap().unwrap().body, Bytes::from_static(b"1"));
        }
        assert_eq!(renders.load(Ordering::SeqCst), 1, "one render for ten");
        tokio::time::sleep(FRESH_AT_LEAST).await;
        for _ in 0..10 {
            let stale = refreshed.get("view", counted(&renders)).await.unwrap();
            assert_eq!(
                stale.body,
                Bytes::from_static(b"1"),
                "served without waiting"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(renders.load(Ordering::SeqCst), 2, "one refresh for ten");
        let refreshed_body = refreshed.get("view", counted(&renders)).await.unwrap();
        assert_eq!(refreshed_body.body, Bytes::from_static(b"2"));
    }

    #[tokio::test]
    async fn a_failed_render_is_not_kept() {
        let refreshed = Refreshed::default();
        let failed = refreshed
            .get("view", || async {
                Err(Error::Starting(crate::error::STILL_STARTING))
            })
            .await;
        assert!(failed.is_err());
        let again = refreshed
            .get("view", || async {
                Ok(Ok(rendered(Bytes::from_static(b"y"))))
            })
            .await;
        assert_eq!(again.unwrap().body, Bytes::from_static(b"y"));
    }
}
