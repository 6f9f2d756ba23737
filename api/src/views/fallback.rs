//! Views rendered from Postgres while Redis cannot be asked (down, hung,
//! slower than its budget), shared and kept briefly.
//!
//! Without this, every request during a Redis outage would cost Postgres a
//! snapshot and two or three queries: the moment Redis fails, the whole
//! read traffic of every instance lands on the database. Instead, requests
//! that need the same view at once share one render, and a render is kept
//! for [`KEPT_FOR`], so each instance asks Postgres for a view at most about
//! once a second however busy it is. A kept render is at most that old,
//! and serves only the outage it was made in: the first request of each
//! outage renders afresh, so a view never goes back to before what Redis
//! showed until it failed (views reach Redis after their rows are
//! committed). Once Redis answers again, its views are served as before. A
//! view Redis answered it does not have (not built yet, an unknown bank)
//! is rendered afresh each time: Redis is there, and such a render is
//! never kept.
//!
//! "Not found" answers are kept the same way, so made-up ids cost no more.
//! Failures (Postgres down) are not kept: the next request tries again.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;

use crate::error::{Error, Result};
use crate::views::known_at::FinalAnswers;
use crate::views::requests::Stored;

/// How long a render is served before Postgres is asked again.
pub const KEPT_FOR: Duration = Duration::from_secs(1);

/// The most bytes of renders kept (the list of all banks is the largest,
/// a few hundred kilobytes per variant).
const MOST_BYTES: u64 = 32 * 1024 * 1024;

/// A render (its fingerprint computed from its bytes unless it brings
/// one), or the "not found" message the view's route answers.
type Rendered = std::result::Result<Stored, &'static str>;

/// A render whose fingerprint is that of its bytes.
pub fn rendered(body: impl Into<Bytes>) -> Stored {
    Stored {
        body: body.into(),
        etag: None,
    }
}

/// A render kept: its bytes and fingerprint, computed once when rendered.
type Kept = std::result::Result<Stored, &'static str>;

#[derive(Clone)]
pub struct Fallbacks {
    renders: moka::future::Cache<String, Kept>,
    /// Final answers as known at an instant: rendered from Postgres too,
    /// and kept for good (see [`crate::views::known_at`]).
    pub final_answers: FinalAnswers,
}

impl Default for Fallbacks {
    fn default() -> Self {
        Self {
            renders: moka::future::Cache::builder()
                .max_capacity(MOST_BYTES)
                .weigher(|key: &String, kept: &Kept| {
                    let body = kept.as_ref().map_or(0, |s| s.body.len());
                    u32::try_from(key.len() + body).unwrap_or(u32::MAX)
                })
                .time_to_live(KEPT_FOR)
                .build(),
            final_answers: FinalAnswers::default(),
        }
    }
}

impl Fallbacks {
    /// The view stored under `key` in Redis, rendered from Postgres by
    /// `render` unless a render of it is being made or was made within
    /// [`KEPT_FOR`]. `render` answers `Err(message)` for a view that does
    /// not exist (a 404 with that message).
    pub async fn get<F, Fut>(&self, key: &str, render: F) -> Result<Stored>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Rendered>>,
    {
        self.render(Some(0), key, render).await
    }

    /// [`Fallbacks::get`] during outage number `outage` when `shared`,
    /// else `render` on its own.
    pub async fn render<F, Fut>(&self, shared: Option<u64>, key: &str, render: F) -> Result<Stored>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Rendered>>,
    {
        let Some(outage) = shared else {
            return fingerprinted(render).await?.map_err(Error::NotFound);
        };
        let rendered = self
            .renders
            .try_get_with(format!("{outage}:{key}"), fingerprinted(render))
            .await
            .map_err(|shared: Arc<Error>| {
                Arc::try_unwrap(shared)
                    .unwrap_or_else(|shared| shared.duplicate("rendering a view"))
            })?;
        rendered.map_err(Error::NotFound)
    }
}

/// Renders, and fingerprints what was rendered (its `ETag`).
pub(crate) async fn fingerprinted<F, Fut>(render: F) -> Result<Kept>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Rendered>>,
{
    metrics::counter!("ratewire_api_fallback_renders_total").increment(1);
    Ok(render().await?.map(|mut stored| {
        if stored.etag.is_none() {
            stored.etag = std::str::from_utf8(&stored.body)
                .map(ratewire_readmodel::views::digest)
                .ok();
        }
        stored
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn requests_at_once_share_one_render_and_a_render_is_kept_briefly() {
        let fallbacks = Fallbacks::default();
        let renders = Arc::new(AtomicUsize::new(0));
        let render = {
            let renders = Arc::clone(&renders);
            move || {
                let renders = Arc::clone(&renders);
                async move {
                    renders.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok(Ok(rendered(Bytes::from_static(b"[]"))))
                }
            }
        };
        let mut at_once = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let (fallbacks, render) = (fallbacks.clone(), render.clone());
            at_once.spawn(async move { fallbacks.get("view", render).await });
        }
        while let Some(answer) = at_once.join_next().await {
            assert_eq!(answer.unwrap().unwrap().body, Bytes::from_static(b"[]"));
        }
        assert_eq!(renders.load(Ordering::SeqCst), 1, "one render for twenty");
        fallbacks.get("view", render.clone()).await.unwrap();
        assert_eq!(renders.load(Ordering::SeqCst), 1, "kept");
        fallbacks.get("another", render).await.unwrap();
        assert_eq!(renders.load(Ordering::SeqCst), 2, "per view");
    }

    #[tokio::test]
    async fn not_found_is_kept_and_failures_are_not() {
        let fallbacks = Fallbacks::default();
        let missing = fallbacks
            .get("bank", || async { Ok(Err("Bank not found")) })
            .await;
        assert!(matches!(missing, Err(Error::NotFound("Bank not found"))));
        let kept = fallbacks
            .get("bank", || async {
                Ok(Ok(rendered(Bytes::from_static(b"x"))))
            })
            .await;
        assert!(matches!(kept, Err(Error::NotFound(_))), "kept");
        let failed = fallbacks
            .get("other", || async {
                Err(Error::Starting(crate::error::STILL_STARTING))
            })
            .await;
        assert!(failed.is_err());
        let again = fallbacks
            .get("other", || async {
                Ok(Ok(rendered(Bytes::from_static(b"y"))))
            })
            .await;
        assert_eq!(again.unwrap().body, Bytes::from_static(b"y"), "not kept");
    }

    #[tokio::test]
    async fn while_redis_answers_a_missing_view_is_rendered_afresh() {
        let fallbacks = Fallbacks::default();
        let missing = fallbacks
            .render(None, "bank", || async { Ok(Err("Bank not found")) })
            .await;
        assert!(matches!(missing, Err(Error::NotFound(_))));
        let found = fallbacks
            .render(None, "bank", || async {
                Ok(Ok(rendered(Bytes::from_static(b"x"))))
            })
            .await;
        let found = found.unwrap();
        assert_eq!(found.body, Bytes::from_static(b"x"), "nothing kept");
        assert_eq!(
            found.etag.as_deref(),
            Some(ratewire_readmodel::views::digest("x").as_str())
        );
    }
}
