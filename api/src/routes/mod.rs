//! The API's HTTP surface: one module per resource, merged here into the
//! two listeners' routers ([`public`] and [`operator`]) with the gate, the
//! readiness guard and JSON fallbacks for unknown paths and methods
//! (`ratewire_service::serve` adds request ids, tracing, request metrics
//! and the listener limits).

pub mod admin;
pub mod banks;
pub mod best_rates;
pub mod convert;
pub mod currencies;
pub mod fallback;
pub mod health;
pub mod history;
pub mod me;
pub mod rates;
pub mod series;
pub mod stream;
pub mod view_body;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Router};
use ratewire_service::metrics::render as render_metrics;

use crate::error::Error;
use crate::gate::{self, Prefetched};
use crate::requests::{Stored, ViewRef};
use crate::state::AppState;

/// The public listener: the read API behind the gate, its OpenAPI
/// document, the dashboard and reference pages, and the probes. Nothing operators use is reachable here.
pub fn public(state: AppState) -> Router {
    // Everything a consumer calls passes the gate (keys, limits, headers),
    // unknown paths included; the probes and the document do not.
    let api = Router::new()
        .merge(banks::router())
        .merge(currencies::router())
        .merge(rates::router())
        .merge(best_rates::router())
        .merge(history::router())
        .merge(series::router())
        .merge(convert::router())
        .merge(stream::router())
        .merge(me::router())
        .fallback(|| async { Error::NotFound("Not Found") })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        // Inside the gate: a 304 is counted and carries the limit headers.
        .layer(middleware::from_fn(crate::conditional::conditional))
        .layer(middleware::from_fn_with_state(state.clone(), gate::gate));
    let web = std::sync::Arc::new(crate::web::Web::new(
        state.timezone.name(),
        state.anonymous_access,
    ));
    let routes = Router::new()
        .merge(crate::web::router(web))
        .route(
            "/api/v1/openapi.json",
            get(|| async { json_body(crate::openapi::DOCUMENT.clone()) }),
        )
        .merge(health::router())
        .merge(api);
    // Outermost: a browser's preflight is answered before any gate.
    let cors = crate::cors::layer(&state.cors_origins);
    state
        .readiness
        .guard(routes, still_starting)
        .with_state(state)
        .layer(cors)
}

/// The operator listener: key management, metrics and the probes.
pub fn operator(state: AppState) -> Router {
    let document = std::sync::Arc::new(crate::openapi::operator_document(&state.plans));
    let routes = Router::new()
        .merge(admin::router())
        .merge(health::router())
        .route(
            "/v1/openapi.json",
            get(move || async move { json_body(String::clone(&document)) }),
        )
        .route("/metrics", get(render_metrics))
        .fallback(|| async { Error::NotFound("Not Found") })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed });
    state
        .readiness
        .guard(routes, still_starting)
        .with_state(state)
}

/// The answer while the process is still preparing Postgres (e.g. it
/// started while Postgres was down): 503, not a hanging connection.
fn still_starting() -> Response {
    Error::Starting("still starting: waiting for Postgres").into_response()
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
    pub fn shared(&self, state: &AppState) -> Option<u64> {
        matches!(self, Cached::Unavailable).then(|| state.redis.outage())
    }
}

/// A ready-made view from Redis (taken from `prefetched` when the gate
/// already read that key); when it is missing or Redis is unavailable,
/// the caller renders the same bytes from Postgres.
pub async fn cached_view(state: &AppState, prefetched: Prefetched, view: &ViewRef) -> Cached {
    let answer = match prefetched.0 {
        Some((fetched, stored)) if fetched == view.key => Ok(stored),
        _ => match kept_view(state, view) {
            Some(kept) => Ok(Some(kept)),
            None => read_view(state, view).await,
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

/// Counts a view served from `source` (`redis`: kept here or read there;
/// `postgres`: rendered).
pub fn served_from(source: &'static str) {
    crate::hot_metrics::increment(
        "ratewire_api_views_served_total",
        [("source", source), crate::hot_metrics::NONE],
    );
}

/// `view` as kept in this process, if it is; one late in its age is read
/// again in the background (see [`crate::view_cache`]).
pub fn kept_view(state: &AppState, view: &ViewRef) -> Option<Stored> {
    let served = state.views.get(&view.key)?;
    if served.read_again {
        let (state, view) = (state.clone(), view.clone());
        tokio::spawn(async move {
            // Unavailable: the guard reports it, and the view runs out.
            let _ = read_view(&state, &view).await;
        });
    }
    Some(served.stored)
}

/// `view` read from Redis (a list joined from its elements there and
/// here: see [`crate::lists`]), kept in this process when nothing changed
/// meanwhile (see [`crate::view_cache`]).
async fn read_view(
    state: &AppState,
    view: &ViewRef,
) -> std::result::Result<Option<Stored>, crate::redis_guard::Unavailable> {
    if let Some((list, views)) = &view.list {
        return crate::lists::join(state, view, *list, views).await;
    }
    let ticket = state.views.ticket();
    let stored = state
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
        state.views.keep(ticket, &view.key, stored);
    }
    Ok(stored)
}

/// Whether the client takes gzip (read from `Accept-Encoding` alone,
/// without copying the request's headers).
#[derive(Debug, Clone, Copy)]
pub struct AcceptsGzip(pub bool);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for AcceptsGzip {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> std::result::Result<Self, Self::Rejection> {
        Ok(Self(crate::web::accepts_gzip(&parts.headers)))
    }
}

/// A list answer made of a stored view (`/rates`, `/banks`): gzip-encoded,
/// made once per kept view, when the client takes gzip and the view is kept
/// in this process; as it is otherwise. The gzip encoding is another
/// representation, so its `ETag` is the view's with `-gz`.
pub fn stored_list(state: &AppState, gzip: AcceptsGzip, key: &str, stored: Stored) -> Response {
    use ratewire_readmodel::views::{LIST_HEAD, LIST_TAIL};
    // The cache decides whether the body is large enough to gain.
    let gzip = gzip
        .0
        .then(|| {
            state
                .views
                .gzip(key, &stored, LIST_HEAD.as_bytes(), LIST_TAIL.as_bytes())
        })
        .flatten();
    let mut response = match gzip {
        Some(gzip) => {
            let etag = stored.etag.as_deref().map(|e| format!("{e}-gz"));
            let mut response = with_etag(json_body(gzip), etag.as_deref());
            response
                .headers_mut()
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            response
        }
        None => with_etag(view_body::json_list(stored.body), stored.etag.as_deref()),
    };
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    response
}

/// `response` with the strong `ETag` of fingerprint `etag` (see
/// [`conditional`] for what a client does with it).
pub fn with_etag(mut response: Response, etag: Option<&str>) -> Response {
    if let Some(etag) = etag {
        let mut quoted = Vec::with_capacity(etag.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(etag.as_bytes());
        quoted.push(b'"');
        if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(quoted)) {
            response.headers_mut().insert(header::ETAG, value);
        }
    }
    response
}

/// The headers a read's answer carries: type, tag, caching, `Vary`, the
/// three limit headers, two CORS headers and the request id, and room for
/// `Content-Encoding` and `Retry-After`.
const ANSWER_HEADERS: usize = 12;

/// A ready-made JSON body, sent as it is (a string, a stored view, or the
/// parts of [`view_body::json_list`]).
pub fn json_body(body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    // Room for every header a read's answer gets, made at once: a header
    // map starts with room for six and grew on each answer, its table
    // rebuilt (1.5% of the API's time in a profile at 30k requests/s).
    response.headers_mut().reserve(ANSWER_HEADERS);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
