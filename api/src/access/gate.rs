//! The gate every public request passes: who is calling, and may they?
//!
//! A request with a valid key is counted against its key's plan, whatever
//! others send from its address. Any other request (no key, unknown or
//! revoked key) is counted against its client IP under the `anonymous` plan
//! *before* it is refused, so keyless floods are throttled too. The decision's numbers go on every response as
//! X-RateLimit-Limit, -Remaining and -Reset; a refused request gets 429 with
//! Retry-After. Handlers learn the caller from [`Identified`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use crate::access::keys::{Caller, Lookup, API_KEY_HEADER};
use crate::access::limits::{Decision, Verdict};
use crate::access::plans::ANONYMOUS;
use crate::access::Access;
use crate::error::Error;
use crate::views::requests::view_ref;
use crate::views::Prefetched;
use crate::views::Views;

/// What the gate found out, for the handlers.
#[derive(Debug, Clone)]
pub struct Identified {
    /// The key's owner, when the request carried a valid key.
    pub caller: Option<Caller>,
    /// Whether an `x-api-key` header was present at all.
    pub key_given: bool,
    /// Who is counted: `key:{prefix}`, or the client's address.
    pub subject: String,
    pub decision: Decision,
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
    headers.insert(LIMIT, HeaderValue::from(decision.limits.per_minute));
    headers.insert(REMAINING, HeaderValue::from(decision.minute_remaining()));
    headers.insert(RESET, HeaderValue::from(decision.minute_reset));
    headers.insert(POLICY, policy(&decision.limits));
    headers.insert(RATELIMIT, ratelimit(decision));
    if let Some(retry_after) = decision.retry_after() {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    }
}

/// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers): both windows
/// of the plan. The same few plans answer nearly every request, so each
/// thread keeps the last value it made.
fn policy(limits: &crate::access::plans::Limits) -> HeaderValue {
    thread_local! {
        static LAST: std::cell::RefCell<Option<((u64, u64), HeaderValue)>> =
            const { std::cell::RefCell::new(None) };
    }
    let plan = (limits.per_minute, limits.per_month);
    LAST.with_borrow_mut(|last| match last {
        Some((made_for, value)) if *made_for == plan => value.clone(),
        _ => {
            let value = HeaderValue::try_from(format!(
                "\"minute\";q={};w=60, \"month\";q={};w={MONTH_WINDOW_SECS}",
                plan.0, plan.1
            ))
            .expect("digits and quotes make a header value");
            *last = Some((plan, value.clone()));
            value
        }
    })
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
fn key_in_query(request: &Request) -> Option<String> {
    if request.uri().path() != KEY_IN_QUERY {
        return None;
    }
    serde_urlencoded::from_str::<Vec<(String, String)>>(request.uri().query()?)
        .ok()?
        .into_iter()
        .find(|(name, _)| name == "apiKey")
        .map(|(_, key)| key)
}

/// What the gate consults: callers' keys and limits, and the views it
/// reads along with the limiter.
#[derive(Clone)]
pub struct Gate {
    pub access: Arc<Access>,
    pub views: Arc<Views>,
}

pub async fn gate(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    let Gate {
        access: state,
        views,
    } = gate;
    let from_query = key_in_query(&request);
    let key = request
        .headers()
        .get(API_KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .or(from_query.as_deref())
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let key_given = key.is_some();
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let headers = request.headers();
    let caller = match key {
        Some(key) => {
            // Only while the directory of live keys is not current does a
            // key no cache knows cost a Postgres query; each client address
            // then gets at most its anonymous allowance of those a minute.
            let may_ask_postgres = || match state.clients.client(peer, headers) {
                Some(client) => state.key_lookups.try_take(client),
                None => true,
            };
            match state.key_store.lookup(key, may_ask_postgres).await {
                Ok(Lookup::Valid(caller)) => Some(caller),
                Ok(Lookup::Invalid) => None,
                // Not known to be invalid: never answered as if it were.
                Ok(Lookup::NotChecked) => {
                    metrics::counter!("ratewire_api_keys_unchecked_total").increment(1);
                    return Error::KeyUnchecked.into_response();
                }
                Err(e) => return e.into_response(),
            }
        }
        None => None,
    };
    let (subject, limits) = match &caller {
        Some(caller) => (caller.subject(), state.limits_of(caller)),
        None => {
            let client = state.clients.client(peer, request.headers());
            (
                format!(
                    "ip:{}",
                    client.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string())
                ),
                state.plans.anonymous(),
            )
        }
    };
    let now = Utc::now();
    let (decision, prefetched) = if state.rate_limits {
        let view = view_ref(
            &views.read.current().views,
            request.uri().path(),
            request.uri().query(),
        );
        // A view kept in this process needs no read; any other is read in
        // the limiter's round trip, and kept if nothing changed meanwhile.
        let (view, kept) = match view {
            Some(view) => match views.kept(&view) {
                Some(stored) => (None, Some((view.key, Some(stored)))),
                // Joined by its handler, from elements kept or read.
                None if view.list.is_some() => (None, None),
                None => (Some(view), None),
            },
            None => (None, None),
        };
        let ticket = view.as_ref().and_then(|_| views.cache.ticket());
        let (decision, stored) = state
            .limiter
            .check_and_read(
                &subject,
                limits,
                counts_monthly(request.uri().path()),
                now,
                view.as_ref(),
            )
            .await;
        let read = view.map(|v| v.key).zip(stored);
        if let Some((key, Some(stored))) = &read {
            views.cache.keep(ticket, key, stored);
        }
        (decision, kept.or(read))
    } else {
        (Decision::uncounted(limits, now), None)
    };
    let mut response = match decision.verdict {
        Verdict::Allowed => {
            request.extensions_mut().insert(Identified {
                caller,
                key_given,
                subject,
                decision,
            });
            request.extensions_mut().insert(Prefetched(prefetched));
            next.run(request).await
        }
        Verdict::RateLimited => Error::RateLimited.into_response(),
        Verdict::QuotaExceeded => Error::QuotaExceeded.into_response(),
    };
    set_headers(response.headers_mut(), &decision);
    response
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
