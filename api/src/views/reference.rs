//! The reference rates as the API reads them: a source's days, and one
//! day's whole answer, as the projector stored them (kept in this process
//! until it changes them), else rendered from Postgres by the same
//! renderer.

use std::sync::Arc;

use axum::body::Bytes;
use chrono::NaiveDate;
use ratewire_readmodel::store;
use ratewire_readmodel::views::{
    reference_dates_body, reference_dates_from_body, reference_day_from_body,
    reference_day_response, StoredDay, ViewStyle,
};
use sqlx::PgConnection;

use crate::error::{Error, Result};
use crate::views::{Cached, Stored, ViewRef, Views};

/// The answer when a source has no day at all (the list of days is then
/// empty: stored views say nothing of a source never published).
const NO_DAYS: &str = "no reference day";

/// The days `source` published, oldest first (none: empty).
pub async fn dates(views: &Arc<Views>, source: &str) -> Result<Vec<NaiveDate>> {
    let read = views.read.current();
    let view = ViewRef::new(&read.views, read.views.reference_dates(source));
    let stored = fetch(views, &view, || {
        let (pool, source) = (read.pool.clone(), source.to_owned());
        async move {
            let dates = store::reference_dates(&pool, &source).await?;
            Ok(Ok(Stored {
                body: Bytes::from(reference_dates_body(&dates)),
                etag: None,
            }))
        }
    })
    .await?;
    reference_dates_from_body(&stored.body).map_err(|e| {
        Error::Startup(format!(
            "a stored list of reference days does not read: {e}"
        ))
    })
}

/// `source`'s answer for `date` (every currency), with its `ETag`; 404 when
/// it published nothing that day.
pub async fn day(views: &Arc<Views>, source: &str, date: NaiveDate) -> Result<Stored> {
    let read = views.read.current();
    let view = ViewRef::new(&read.views, read.views.reference_day(source, date));
    let style = Arc::clone(&views.style);
    fetch(views, &view, || {
        let (pool, source) = (read.pool.clone(), source.to_owned());
        async move { render_day(&pool, &source, date, &style).await }
    })
    .await
}

/// `source`'s answer for `date` as `db` holds it (`Err` when it published
/// nothing that day): what the projector stores.
async fn render_day<'e>(
    db: impl sqlx::PgExecutor<'e>,
    source: &str,
    date: NaiveDate,
    style: &ViewStyle,
) -> Result<std::result::Result<Stored, &'static str>> {
    let days = store::reference_days(db, source, Some(&[date])).await?;
    Ok(match days.first() {
        Some(day) => Ok(Stored {
            body: Bytes::from(reference_day_response(day, style)),
            etag: None,
        }),
        None => Err(NO_DAYS),
    })
}

/// Where a read finds the reference days: as stored (the present), or in
/// a snapshot of the model as known at an instant (see
/// [`crate::views::known_at`]).
pub enum Reader<'a> {
    Live(&'a Arc<Views>),
    KnownAt(&'a mut PgConnection, &'a ViewStyle),
}

impl Reader<'_> {
    /// The days `source` published, oldest first (see [`dates`]).
    pub async fn dates(&mut self, source: &str) -> Result<Vec<NaiveDate>> {
        match self {
            Reader::Live(views) => dates(views, source).await,
            Reader::KnownAt(db, _) => Ok(store::reference_dates(&mut **db, source).await?),
        }
    }

    /// `source`'s answer for `date` (see [`day`]).
    pub async fn day(&mut self, source: &str, date: NaiveDate) -> Result<Stored> {
        match self {
            Reader::Live(views) => day(views, source, date).await,
            Reader::KnownAt(db, style) => render_day(&mut **db, source, date, style)
                .await?
                .map_err(Error::NotFound),
        }
    }
}

/// A day's answer read back (its rates, and each currency's element as
/// stored).
pub fn read_day(stored: &Stored) -> Result<StoredDay<'_>> {
    reference_day_from_body(&stored.body)
        .map_err(|e| Error::Startup(format!("a stored reference day does not read: {e}")))
}

/// `view` as stored, else rendered from Postgres by `render`.
async fn fetch<F, Fut>(views: &Arc<Views>, view: &ViewRef, render: F) -> Result<Stored>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<std::result::Result<Stored, &'static str>>>,
{
    match views.cached(None, view).await {
        Cached::Found(stored) => Ok(stored),
        cached => {
            views
                .fallbacks
                .render(cached.shared(views), &view.key, render)
                .await
        }
    }
}
