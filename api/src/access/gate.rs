//! The gate every public read passes: who is calling, may they, and what
//! do they ask for? It is part of the one layer each route of the read API
//! has (see `routes::public`), so a request costs one pass through it:
//!
//! - the process must be prepared (else 503);
//! - the caller: a request with a valid key is counted against its key's
//!   plan, whatever others send from its address. Any other request (no
//!   key, unknown or revoked key) is counted against its client IP under
//!   the `anonymous` plan *before* it is refused, so keyless floods are
//!   throttled too;
//! - a read answered from a stored view names it here, its query parsed
//!   once for its handler too ([`crate::views::requests`]); the view is
//!   taken as kept in this process, or read in the limiter's Redis round
//!   trip, and handed down ([`Named`]);
//! - the limiter decides. The decision's numbers go on every answer as
//!   X-RateLimit-Limit, -Remaining and -Reset (and `RateLimit`,
//!   `RateLimit-Policy`); a refused request gets 429 with Retry-After;
//! - the handler answers (learning the caller from [`Identified`]), and a
//!   conditional GET is answered 304 here ([`crate::conditional`]): a 304
//!   is still a request, counted, with the limit headers.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use ratewire_service::Readiness;
use tower::{Layer, Service, ServiceExt};

use crate::access::keys::{Caller, Known, Lookup, API_KEY_HEADER};
use crate::access::limits::{Decision, Verdict};
use crate::access::plans::ANONYMOUS;
use crate::access::Access;
use crate::conditional;
use crate::error::{Error, STILL_STARTING};
use crate::views::requests::naming;
use crate::views::{Named, Views};

/// What the gate found out, for the handlers.
#[derive(Debug, Clone)]
pub struct Identified {
    /// The key, when the request carried a valid one.
    pub caller: Option<Arc<Known>>,
    /// Whether a key was given at all.
    pub key_given: bool,
    /// Whether requests without a key are served.
    pub anonymous_access: bool,
    /// Who is counted: `key:{prefix}`, or the client's address.
    pub subject: Arc<str>,
    pub decision: Decision,
}

impl Identified {
    /// The caller a handler serves: the key's owner, `None` for a keyless
    /// request when those are served; 401 otherwise.
    pub fn admitted(&self) -> Result<Option<&Caller>, Error> {
        match (&self.caller, self.key_given) {
            (Some(known), _) => Ok(Some(&known.caller)),
            (None, false) if self.anonymous_access => Ok(None),
            (None, false) => Err(Error::MissingKey),
            (None, true) => Err(Error::InvalidKey),
        }
    }
}

/// Paths that count per minute but not toward the monthly allowance.
pub fn counts_monthly(path: &str) -> bool {
    !matches!(path, "/me" | "/usage" | "/api/v1/me" | "/api/v1/usage")
}

/// The window of the `month` policy in `RateLimit-Policy`: the allowance
/// resets with the calendar month, which the field's seconds cannot say;
/// 30 days. `t` in `RateLimit` gives the real time to the reset.
pub const MONTH_WINDOW_SECS: u64 = 30 * 24 * 3600;

pub fn set_headers(headers: &mut HeaderMap, decision: &Decision) {
    // Names made at compile time, numbers without the formatting machinery:
    // every answer carries these.
    const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
    const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
    const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
    const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
    const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
    let (limit, policy) = plan_values(&decision.limits);
    headers.insert(LIMIT, limit);
    headers.insert(REMAINING, HeaderValue::from(decision.minute_remaining()));
    headers.insert(RESET, seconds(decision.minute_reset));
    headers.insert(POLICY, policy);
    headers.insert(RATELIMIT, ratelimit(decision));
    if let Some(retry_after) = decision.retry_after() {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    }
}

/// The plan's per-minute limit, and its `RateLimit-Policy`
/// (draft-ietf-httpapi-ratelimit-headers): both windows of the plan. The
/// same few plans answer nearly every request, so each thread keeps the
/// last values it made.
fn plan_values(limits: &crate::access::plans::Limits) -> (HeaderValue, HeaderValue) {
    type Made = ((u64, u64), HeaderValue, HeaderValue);
    thread_local! {
        static LAST: std::cell::RefCell<Option<Made>> = const { std::cell::RefCell::new(None) };
    }
    let plan = (limits.per_minute, limits.per_month);
    LAST.with_borrow_mut(|last| match last {
        Some((made_for, limit, policy)) if *made_for == plan => (limit.clone(), policy.clone()),
        _ => {
            let policy = HeaderValue::try_from(format!(
                "\"minute\";q={};w=60, \"month\";q={};w={MONTH_WINDOW_SECS}",
                plan.0, plan.1
            ))
            .expect("digits and quotes make a header value");
            let limit = HeaderValue::from(plan.0);
            *last = Some((plan, limit.clone(), policy.clone()));
            (limit, policy)
        }
    })
}

/// A number of seconds as a header value; those of a minute's reset are
/// made once per thread.
fn seconds(n: u64) -> HeaderValue {
    const MINUTE: usize = 60;
    thread_local! {
        static MADE: [HeaderValue; MINUTE + 1] =
            std::array::from_fn(|n| HeaderValue::from(n as u64));
    }
    match usize::try_from(n) {
        Ok(n) if n <= MINUTE => MADE.with(|made| made[n].clone()),
        _ => HeaderValue::from(n),
    }
}

/// `RateLimit`: the minute window as the X- fields give it, or the month
/// once the monthly allowance refused the request.
fn ratelimit(decision: &Decision) -> HeaderValue {
    let value = match decision.verdict {
        Verdict::QuotaExceeded => format!(
            "\"month\";r={};t={}",
            decision.month_remaining(),
            decision.month_reset
        ),
        _ => format!(
            "\"minute\";r={};t={}",
            decision.minute_remaining(),
            decision.minute_reset
        ),
    };
    HeaderValue::try_from(value).expect("digits and quotes make a header value")
}

/// The path whose key may also come as the `apiKey` query parameter:
/// browsers' EventSource cannot send headers.
const KEY_IN_QUERY: &str = "/api/v1/stream";

/// The `apiKey` query parameter (of [`KEY_IN_QUERY`] only).
fn key_in_query(uri: &Uri) -> Option<String> {
    if uri.path() != KEY_IN_QUERY {
        return None;
    }
    crate::query::Params::parse(uri.query())
        .ok()?
        .first("apiKey")
        .map(str::to_owned)
}

/// The gate, as a layer of the read API's routes: what it consults
/// (callers' keys and limits, the views it reads along with the limiter,
/// whether the process is prepared).
#[derive(Clone)]
pub struct Gate {
    pub access: Arc<Access>,
    pub views: Arc<Views>,
    pub readiness: Readiness,
}

impl<S> Layer<S> for Gate {
    type Service = Gated<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Gated {
            gate: Arc::new(self.clone()),
            inner,
        }
    }
}

/// A route behind the [`Gate`].
#[derive(Clone)]
pub struct Gated<S> {
    gate: Arc<Gate>,
    inner: S,
}

impl<S> Service<Request> for Gated<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The route is called through a clone, made ready there.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let gate = Arc::clone(&self.gate);
        let route = self.inner.clone();
        Box::pin(async move { Ok(gate.pass(request, route).await) })
    }
}

impl Gate {
    /// `request` through the gate (see the module docs), answered by
    /// `route` when admitted.
    async fn pass<S>(&self, mut request: Request, route: S) -> Response
    where
        S: Service<Request, Response = Response, Error = Infallible>,
    {
        if !self.readiness.is_prepared() {
            return Error::Starting(STILL_STARTING).into_response();
        }
        let access = &self.access;
        let peer = request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        let found = self.caller(request.headers(), request.uri(), peer).await;
        let (caller, key_given) = match found {
            Ok(found) => found,
            Err(refused) => return refused,
        };
        let (subject, limits) = match &caller {
            Some(known) => {
                tracing::Span::current().record("key", known.caller.prefix.as_str());
                (Arc::clone(&known.subject), access.limits_of(&known.caller))
            }
            None => {
                let client = access.clients.client(peer, request.headers());
                let client = client.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
                (Arc::from(format!("ip:{client}")), access.plans.anonymous())
            }
        };
        let now = Utc::now();
        let mut named = self.named(&request);
        let decision = if access.rate_limits {
            // A view kept in this process needs no read; any other is read
            // in the limiter's round trip, and kept if nothing changed
            // meanwhile.
            let read = named.as_mut().and_then(|named| self.kept(named));
            let ticket = read.as_ref().and_then(|_| self.views.cache.ticket());
            let counts_monthly = counts_monthly(request.uri().path());
            let (decision, stored) = access
                .limiter
                .check_and_read(&subject, limits, counts_monthly, now, read.as_deref())
                .await;
            if let (Some(view), Some(stored), Some(named)) = (read, stored, named.as_mut()) {
                if let Some(found) = &stored {
                    self.views.cache.keep(ticket, &view.key, found);
                }
                named.stored = Some(stored);
            }
            decision
        } else {
            Decision::uncounted(limits, now)
        };
        let mut response = match decision.verdict {
            Verdict::Allowed => {
                let readable = matches!(*request.method(), Method::GET | Method::HEAD);
                let if_none_match = request.headers().get(header::IF_NONE_MATCH).cloned();
                let extensions = request.extensions_mut();
                extensions.insert(Identified {
                    caller,
                    key_given,
                    anonymous_access: access.anonymous_access,
                    subject,
                    decision,
                });
                if let Some(named) = named {
                    extensions.insert(named);
                }
                let Ok(response) = route.oneshot(request).await;
                conditional::answer(readable, if_none_match.as_ref(), response).await
            }
            Verdict::RateLimited => Error::RateLimited.into_response(),
            Verdict::QuotaExceeded => Error::QuotaExceeded.into_response(),
        };
        set_headers(response.headers_mut(), &decision);
        response
    }

    /// The key a request carries, if any, and whether it is valid; the
    /// answer when the key can be neither (see `Lookup::NotChecked`).
    async fn caller(
        &self,
        headers: &HeaderMap,
        uri: &Uri,
        peer: Option<IpAddr>,
    ) -> Result<(Option<Arc<Known>>, bool), Response> {
        const KEY: HeaderName = HeaderName::from_static(API_KEY_HEADER);
        let from_query = key_in_query(uri);
        let key = headers
            .get(KEY)
            .and_then(|v| v.to_str().ok())
            .or(from_query.as_deref())
            .map(str::trim)
            .filter(|k| !k.is_empty());
        let Some(key) = key else {
            return Ok((None, false));
        };
        let access = &self.access;
        // Only while the directory of live keys is not current does a key
        // no cache knows cost a Postgres query; each client address then
        // gets at most its anonymous allowance of those a minute.
        let may_ask_postgres = || match access.clients.client(peer, headers) {
            Some(client) => access.key_lookups.try_take(client),
            None => true,
        };
        match access.key_store.lookup(key, may_ask_postgres).await {
            Ok(Lookup::Valid(known)) => Ok((Some(known), true)),
            Ok(Lookup::Invalid) => Ok((None, true)),
            // Not known to be invalid: never answered as if it were.
            Ok(Lookup::NotChecked) => {
                metrics::counter!("ratewire_api_keys_unchecked_total").increment(1);
                Err(Error::KeyUnchecked.into_response())
            }
            Err(e) => Err(e.into_response()),
        }
    }

    /// The view a read answered from a stored view names, of the
    /// generation served now (its query parsed once, for the handler too);
    /// `None` for other routes.
    fn named(&self, request: &Request) -> Option<Named> {
        let (read, naming) = naming(&self.views.read, request.uri())?;
        Some(Named {
            read,
            view: naming.view,
            parsed: naming.parsed,
            stored: None,
        })
    }

    /// Takes `named`'s view as kept in this process; the view to read
    /// along with the limiter when it is not (a list is joined by its
    /// handler instead, from elements kept or read).
    fn kept(&self, named: &mut Named) -> Option<Arc<crate::views::ViewRef>> {
        let view = named.view.as_ref()?;
        match self.views.kept(view) {
            Some(kept) => {
                named.stored = Some(Some(kept));
                None
            }
            None if view.list.is_some() => None,
            None => Some(Arc::clone(view)),
        }
    }
}

/// The caller to show on /me for keyless access, when that is switched on.
pub fn anonymous_caller() -> Caller {
    Caller {
        prefix: String::new(),
        name: ANONYMOUS.to_owned(),
        plan: ANONYMOUS.to_owned(),
        created_at: None,
    }
}
