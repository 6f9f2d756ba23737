//! The public listener's way around its router (see
//! [`ratewire_service::Shortcut`]) for the reads callers make most: a
//! stored view kept in this process, asked for with a key this process
//! knows valid.
//!
//! Under load nearly every request is one of these, and its answer needs
//! nothing outside the process: the key's answer is kept a second, the
//! view until the projector changes it, and a busy caller's count comes
//! from its slice of allowance. The router's layers (CORS, the readiness
//! guard, the gate, conditional GETs, each a clone of the service below it
//! and a boxed future) cost more than that answer; here the same pieces
//! run in line:
//!
//! - the view key and the kept view ([`crate::views::requests::view_ref`],
//!   [`crate::views::cache`]);
//! - the key's local answer ([`crate::access::keys::KeyStore::known_valid`]);
//! - the limiter, as the gate asks it ([`crate::access::limits::Limiter`]);
//! - the handlers' answer for a stored view ([`stored_list`],
//!   [`with_etag`]), conditional GETs ([`conditional::tagged`]),
//!   the limit headers ([`gate::set_headers`]) and the CORS headers a
//!   request without `Origin` gets.
//!
//! Everything else goes to the router: another method or path, a request
//! from a browser page (`Origin`), a query the handler must refuse, a view
//! not kept, a key not known here, keyless access, a process not yet
//! prepared. The e2e test `tests/shortcut.rs` holds its answers to the
//! router's, header by header.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use ratewire_service::{Answered, Shortcut};
use tower::ServiceExt;

use crate::access::gate;
use crate::access::keys::API_KEY_HEADER;
use crate::access::limits::{Decision, Verdict};
use crate::conditional;
use crate::error::Error;
use crate::state::AppState;
use crate::views::answer::{stored_list, with_etag, AcceptsGzip};
use crate::views::body::json_body;
use crate::views::read_model::ReadModel;
use crate::views::requests::{view_ref, view_route, ViewRef, ViewRoute};

/// The public listener's shortcut (see the module docs).
#[derive(Clone)]
pub struct Reads {
    state: AppState,
    /// `RATEWIRE_SHORTCUT`: off, everything goes to the router.
    on: bool,
    /// What the CORS layer adds to an answer for a request without
    /// `Origin` (the same for every such answer: made once).
    cors: Arc<HeaderMap>,
}

impl Reads {
    /// The shortcut over `state`; `on` false hands every request on.
    pub async fn new(state: AppState, on: bool) -> Self {
        let cors = tower::ServiceBuilder::new()
            .layer(crate::cors::layer(&state.cors_origins))
            .service_fn(|_: Request| async {
                Ok::<_, std::convert::Infallible>(Response::new(Body::empty()))
            })
            .oneshot(Request::new(Body::empty()))
            .await
            .map(Response::into_parts)
            .map(|(parts, _)| parts.headers)
            .unwrap_or_default();
        Self {
            state,
            on,
            cors: Arc::new(cors),
        }
    }
}

/// The view route at `path`, if it is answered here.
fn route(path: &str) -> Option<&'static ViewRoute> {
    view_route(path).filter(|route| route.shortcut)
}

impl Shortcut for Reads {
    fn may_answer(&self, request: &Request) -> bool {
        self.on
            && request.method() == Method::GET
            && route(request.uri().path()).is_some()
            && !request.headers().contains_key(header::ORIGIN)
            && self.state.readiness.is_prepared()
    }

    async fn answer(&self, request: Request) -> Result<Answered, Request> {
        let state = &self.state;
        let Some(route) = route(request.uri().path()) else {
            return Err(request);
        };
        let Some(view) = view_of(state, request.uri()) else {
            return Err(request);
        };
        let Some(key) = api_key(request.headers()) else {
            return Err(request);
        };
        let Some(known) = state.access.key_store.known_valid(key).await else {
            return Err(request);
        };
        let caller = &known.caller;
        let Some(stored) = state.views.kept(&view) else {
            return Err(request);
        };
        tracing::Span::current().record("key", caller.prefix.as_str());
        let limits = state.access.limits_of(caller);
        let now = Utc::now();
        let decision = if state.access.rate_limits {
            let counts_monthly = gate::counts_monthly(request.uri().path());
            state
                .access
                .limiter
                .check(&known.subject, limits, counts_monthly, now)
                .await
        } else {
            Decision::uncounted(limits, now)
        };
        let mut response = match decision.verdict {
            Verdict::Allowed => {
                crate::views::served_from("redis");
                let headers = request.headers();
                let answer = if route.list {
                    let gzip = AcceptsGzip(crate::web::accepts_gzip(headers));
                    stored_list(&state.views.cache, gzip, &view.key, stored)
                } else {
                    with_etag(json_body(stored.body), stored.etag.as_deref())
                };
                conditional::tagged(headers.get(header::IF_NONE_MATCH), answer)
            }
            Verdict::RateLimited => Error::RateLimited.into_response(),
            Verdict::QuotaExceeded => Error::QuotaExceeded.into_response(),
        };
        let headers = response.headers_mut();
        gate::set_headers(headers, &decision);
        // As the CORS layer does: its `Vary` is added to the answer's, its
        // other headers replace the answer's own.
        for name in self.cors.keys() {
            if name != header::VARY {
                headers.remove(name);
            }
            for value in self.cors.get_all(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        crate::hot_metrics::increment(
            "ratewire_api_shortcut_answers_total",
            [crate::hot_metrics::NONE; 2],
        );
        Ok(Answered {
            route: route.path,
            response,
        })
    }
}

/// The views valid requests named on this worker thread, by their target
/// (`path?query`) and generation: parsing a query and making the keys'
/// names showed in profiles, and callers repeat the same few requests.
/// A generation is held weakly: a thread does not keep an old one's pools
/// open (and its allocation is not reused while it is named here).
#[derive(Default)]
struct Targets {
    views: HashMap<Box<str>, (Weak<ReadModel>, Arc<ViewRef>)>,
}

/// Targets a thread remembers at most (then it forgets them all).
const TARGETS_MAX: usize = 1_024;

thread_local! {
    static TARGETS: RefCell<Targets> = RefCell::new(Targets::default());
}

/// The stored view `uri` asks for, when its query is valid
/// ([`view_ref`]).
fn view_of(state: &AppState, uri: &Uri) -> Option<Arc<ViewRef>> {
    let target = uri.path_and_query()?.as_str();
    let read = state.views.read.current();
    let remembered = TARGETS.with_borrow(|targets| {
        targets
            .views
            .get(target)
            .filter(|(generation, _)| std::ptr::eq(generation.as_ptr(), Arc::as_ptr(&read)))
            .map(|(_, view)| Arc::clone(view))
    });
    if remembered.is_some() {
        return remembered;
    }
    let view = Arc::new(view_ref(&read.views, uri.path(), uri.query())?);
    TARGETS.with_borrow_mut(|targets| {
        if targets.views.len() >= TARGETS_MAX {
            targets.views.clear();
        }
        targets
            .views
            .insert(target.into(), (Arc::downgrade(&read), Arc::clone(&view)));
    });
    Some(view)
}

/// The `x-api-key` header's key, as the gate reads it.
fn api_key(headers: &HeaderMap) -> Option<&str> {
    const KEY: HeaderName = HeaderName::from_static(API_KEY_HEADER);
    headers
        .get(KEY)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
}
