//! Reading, keeping and rendering the views the API answers with.
//!
//! A request names a stored view ([`requests`]); it is served kept in this
//! process ([`cache`]), read from Redis (a list joined from its banks'
//! elements: [`lists`]), or, when Redis has none or cannot be asked,
//! rendered from Postgres with the same renderer ([`fallback`]), all in
//! [`Views::serve`]. A request as known at a past instant is rendered
//! from Postgres alone ([`known_at`]). Views no projector renders (the
//! live quality reports) are kept and refreshed here ([`refreshed`]).
//! [`read_model`] says which
//! generation is served;
//! [`reference`](mod@reference) reads the reference rates' days;
//! [`answer`] and [`body`] make the responses.

pub mod answer;
pub mod boards;
pub mod body;
pub mod cache;
pub mod fallback;
pub mod known_at;
pub mod lists;
pub mod read_model;
pub mod reference;
pub mod refreshed;
pub mod requests;

use std::future::Future;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::Uri;
use axum::response::Response;
use ratewire_readmodel::views::ViewStyle;

use crate::error::{Error, FieldErrors, Result};
use crate::hot_metrics;
use crate::query::FromQuery;
use crate::redis_guard::{RedisGuard, Unavailable};
use answer::{stored_list, with_etag, AcceptsGzip};
use boards::ReadBack;
use body::json_body;
use cache::ViewCache;
use fallback::Fallbacks;
use lists::Joins;
use read_model::{ReadModel, ReadModels};
use requests::{Naming, Parsed};
pub use requests::{Stored, ViewRef};

/// Everything that serves views, shared by the handlers and the gate.
pub struct Views {
    /// Redis for the request path: every call within a budget, none while
    /// it is unavailable.
    pub redis: RedisGuard,
    /// The read-model generation requests are served from.
    pub read: ReadModels,
    /// Views kept in this process until the projector changes them.
    pub cache: Arc<ViewCache>,
    /// The all-banks lists being joined, one join of each at a time.
    pub lists: Joins,
    /// Views rendered from Postgres while Redis has none, shared and kept
    /// a second.
    pub fallbacks: Fallbacks,
    /// Views rendered from Postgres for this process alone (the live
    /// quality reports), refreshed behind the requests.
    pub refreshed: refreshed::Refreshed,
    /// Boards' outliers judged final, which quality reports count.
    pub judged_boards: ratewire_readmodel::store::JudgedBoards,
    /// The boards a conversion reads, read back from their stored list.
    pub read_back: ReadBack,
    pub style: Arc<ViewStyle>,
}

/// What Redis had of a view.
#[derive(Debug)]
pub enum Cached {
    /// The ready-made view.
    Found(Stored),
    /// Redis answered: there is none (not built yet, flushed, or an
    /// unknown bank or currency).
    Missing,
    /// Redis could not be asked (see [`crate::redis_guard`]).
    Unavailable,
}

impl Cached {
    /// The outage whose renders from Postgres a request may share (see
    /// [`fallback`]): only while Redis cannot be asked. A view Redis says
    /// is missing is rendered afresh, so a bank or currency that has just
    /// appeared is never hidden by a render from before it did.
    pub fn shared(&self, views: &Views) -> Option<u64> {
        matches!(self, Cached::Unavailable).then(|| views.redis.outage())
    }
}

/// How a view's answer is made.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// A list of elements (`/rates`, `/banks`): wrapped in the envelope
    /// when answered, gzip-encoded once per kept view when the client
    /// takes it.
    List(AcceptsGzip),
    /// A whole body, answered as stored.
    Whole,
}

/// The view a public read names, as the gate found it (see
/// [`requests::VIEW_ROUTES`]): the generation it is served from, the view
/// (`None` for a query that names nothing), the query as parsed to name it
/// (see [`ViewRead`]), and what is stored there when the gate has it
/// already (kept in this process, or read along with the limiter;
/// `Some(None)`: Redis has none). Requests that shared a round trip share
/// the body.
#[derive(Clone)]
pub struct Named {
    pub read: Arc<ReadModel>,
    pub view: Option<Arc<ViewRef>>,
    pub parsed: Option<Parsed>,
    pub stored: Option<Option<Stored>>,
}

impl Named {
    /// The view `uri` names, of the generation served now, nothing read
    /// yet.
    pub fn of(views: &Views, uri: &Uri) -> Self {
        let (read, naming) = requests::naming(&views.read, uri)
            .unwrap_or_else(|| (views.read.current(), Naming::default()));
        Self {
            read,
            view: naming.view,
            parsed: naming.parsed,
            stored: None,
        }
    }
}

impl<S> FromRequestParts<S> for Named
where
    S: Send + Sync,
    Arc<Views>: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    /// What the gate found; named here when the gate did not.
    async fn from_request_parts(
        parts: &mut Parts,
        state: &S,
    ) -> std::result::Result<Self, Self::Rejection> {
        Ok(match parts.extensions.remove::<Named>() {
            Some(named) => named,
            None => Named::of(&Arc::<Views>::from_ref(state), &parts.uri),
        })
    }
}

/// A read answered from a stored view, as its handler takes it: its query
/// (as the gate parsed it to name the view, or parsed here; a bad one is
/// answered 400 naming every bad parameter), and the view it names.
pub struct ViewRead<Q> {
    pub query: Q,
    pub named: Named,
}

impl<S, Q> FromRequestParts<S> for ViewRead<Q>
where
    S: Send + Sync,
    Arc<Views>: FromRef<S>,
    Q: FromQuery + Clone + Send + Sync + 'static,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        let Ok(named) = Named::from_request_parts(parts, state).await;
        let parsed = named
            .parsed
            .as_ref()
            .and_then(|parsed| parsed.downcast_ref::<std::result::Result<Q, FieldErrors>>())
            .cloned()
            .unwrap_or_else(|| Q::parse(parts.uri.query()));
        Ok(Self {
            query: parsed.map_err(Error::Validation)?,
            named,
        })
    }
}

impl Views {
    /// Answers with the view `named`: as stored (what the gate has, kept
    /// here, or read from Redis), else rendered from its generation's
    /// Postgres by `render` (the same bytes the projector stores). A view
    /// that does not exist is a 404 with message `missing` (`render` says
    /// so with `Err(missing)`).
    pub async fn serve<F, Fut>(
        self: &Arc<Self>,
        named: Named,
        missing: &'static str,
        shape: Shape,
        render: F,
    ) -> Result<Response>
    where
        F: FnOnce(Arc<ReadModel>) -> Fut,
        Fut: Future<Output = Result<std::result::Result<Stored, &'static str>>>,
    {
        let Named {
            read, view, stored, ..
        } = named;
        let view = view.ok_or(Error::NotFound(missing))?;
        let view = &*view;
        let cached = match self.cached(stored, view).await {
            Cached::Found(stored) => {
                return Ok(match shape {
                    Shape::List(gzip) => stored_list(&self.cache, gzip, &view.key, stored),
                    Shape::Whole => with_etag(json_body(stored.body), stored.etag.as_deref()),
                })
            }
            cached => cached,
        };
        // The view is missing (flushed, not built yet, or an unknown bank
        // or currency), or Redis cannot be asked: Postgres has the same
        // data and the same renderer makes the same bytes.
        let rendered = self
            .fallbacks
            .render(cached.shared(self), &view.key, || render(read))
            .await?;
        Ok(match shape {
            Shape::List(_) => with_etag(body::json_list(rendered.body), rendered.etag.as_deref()),
            Shape::Whole => with_etag(json_body(rendered.body), rendered.etag.as_deref()),
        })
    }

    /// A ready-made view from Redis (`stored` when the gate has it
    /// already); when it is missing or Redis is unavailable, the caller
    /// renders the same bytes from Postgres.
    pub async fn cached(
        self: &Arc<Self>,
        stored: Option<Option<Stored>>,
        view: &ViewRef,
    ) -> Cached {
        let answer = match stored {
            Some(stored) => Ok(stored),
            None => match self.kept(view) {
                Some(kept) => Ok(Some(kept)),
                None => self.read_view(view).await,
            },
        };
        let (cached, source) = match answer {
            Ok(Some(stored)) => (Cached::Found(stored), "redis"),
            Ok(None) => {
                tracing::debug!(key = view.key, "view missing; rendering from postgres");
                (Cached::Missing, "postgres")
            }
            Err(e) => {
                metrics::counter!("ratewire_api_redis_errors_total").increment(1);
                // The guard logs each change of Redis's state once.
                tracing::debug!(error = %e, "rendering from postgres");
                (Cached::Unavailable, "postgres")
            }
        };
        served_from(source);
        cached
    }

    /// `view` as kept in this process, if it is; one late in its age is
    /// read again in the background (see [`cache`]).
    pub fn kept(self: &Arc<Self>, view: &ViewRef) -> Option<Stored> {
        let served = self.cache.get(&view.key)?;
        if served.read_again {
            let (views, view) = (Arc::clone(self), view.clone());
            tokio::spawn(async move {
                // Unavailable: the guard reports it, and the view runs out.
                let _ = views.read_view(&view).await;
            });
        }
        Some(served.stored)
    }

    /// `view` read from Redis (a list joined from its elements there and
    /// here: see [`lists`]), kept in this process when nothing changed
    /// meanwhile (see [`cache`]).
    async fn read_view(&self, view: &ViewRef) -> std::result::Result<Option<Stored>, Unavailable> {
        if let Some((list, views)) = &view.list {
            return lists::join(self, view, *list, views).await;
        }
        let ticket = self.cache.ticket();
        let stored = self
            .redis
            .call("reading a view", |mut conn| async move {
                redis::pipe()
                    .get(&view.key)
                    .hget(&view.etags, &view.key)
                    .query_async::<(Option<Vec<u8>>, Option<String>)>(&mut conn)
                    .await
            })
            .await
            .map(|(body, etag)| {
                body.map(|body| Stored {
                    body: Bytes::from(body),
                    etag,
                })
            })?;
        if let Some(stored) = &stored {
            self.cache.keep(ticket, &view.key, stored);
        }
        Ok(stored)
    }
}

/// Counts a view served from `source` (`redis`: kept here or read there;
/// `postgres`: rendered).
pub fn served_from(source: &'static str) {
    hot_metrics::increment(
        "ratewire_api_views_served_total",
        [("source", source), hot_metrics::NONE],
    );
}
