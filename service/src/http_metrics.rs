//! What every HTTP process reports about its requests, in one shape so one
//! dashboard reads all three:
//!
//! - `ratewire_http_requests_total{route, method, status}`
//! - `ratewire_http_request_duration_seconds{route, method}` (histogram)
//!
//! `route` is the matched route pattern (`/api/v1/rates`), or `unmatched`,
//! and `method` is a standard method or `OTHER`, so arbitrary paths and
//! methods cannot grow the label set.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use axum::http::Method;
use metrics::{counter, histogram, Counter, Histogram};

use crate::documented_metrics::Documented;

/// The series every process has from its start: those of the scrape of
/// `/metrics` (each process serves it), which counts itself only once it
/// has answered.
pub const DOCUMENTED: &[Documented] = &[
    Documented::counter("ratewire_http_requests_total").by(&[
        ("route", &["/metrics"]),
        ("method", &["GET"]),
        ("status", &["200"]),
    ]),
    Documented::histogram("ratewire_http_request_duration_seconds")
        .by(&[("route", &["/metrics"]), ("method", &["GET"])]),
];

/// Counts one request of `method` to `route` answered `status` after
/// `latency`.
pub fn record(route: &str, method: &Method, status: u16, latency: Duration) {
    let method = known_method(method);
    HANDLES.with_borrow_mut(|handles| {
        let (requests, duration) = handles.get(route, &method, status);
        requests.increment(1);
        duration.record(latency.as_secs_f64());
    });
}

/// The request's method, or `OTHER` for an extension method: any token is
/// a valid method, so clients must not be able to grow the label set.
fn known_method(method: &Method) -> Method {
    const KNOWN: [Method; 9] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
        Method::TRACE,
        Method::CONNECT,
    ];
    if KNOWN.contains(method) {
        method.clone()
    } else {
        Method::from_bytes(b"OTHER").expect("a valid method token")
    }
}

thread_local! {
    // Looking a labelled metric up in the registry builds its key (label
    // strings included) and hashes it: a few allocations per request on the
    // hottest path. Each worker thread keeps the handles it has used; they
    // share the registry's atomics, so the counts are the same.
    static HANDLES: RefCell<Handles> = RefCell::new(Handles::default());
}

/// A route's request counter and duration histogram per method and status.
type ByOutcome = HashMap<(Method, u16), (Counter, Histogram)>;

/// The handles used so far, by route.
#[derive(Default)]
struct Handles {
    by_route: HashMap<Box<str>, ByOutcome>,
}

impl Handles {
    fn get(&mut self, route: &str, method: &Method, status: u16) -> &(Counter, Histogram) {
        if !self.by_route.contains_key(route) {
            self.by_route.insert(route.into(), HashMap::new());
        }
        let by_outcome = self.by_route.get_mut(route).expect("inserted above");
        by_outcome
            .entry((method.clone(), status))
            .or_insert_with(|| {
                let (route, method) = (route.to_owned(), method.as_str().to_owned());
                (
                    counter!("ratewire_http_requests_total",
                        "route" => route.clone(), "method" => method.clone(), "status" => status.to_string()),
                    histogram!("ratewire_http_request_duration_seconds", "route" => route, "method" => method),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_methods_are_labelled_as_themselves() {
        assert_eq!(known_method(&Method::GET), Method::GET);
        assert_eq!(known_method(&Method::PATCH), Method::PATCH);
    }

    #[test]
    fn extension_methods_share_one_label() {
        let a = Method::from_bytes(b"PURGE").unwrap();
        let b = Method::from_bytes(b"X-RANDOM-1234").unwrap();
        assert_eq!(known_method(&a).as_str(), "OTHER");
        assert_eq!(known_method(&b).as_str(), "OTHER");
    }

    #[test]
    fn handles_are_made_once_per_route_method_and_status() {
        let mut handles = Handles::default();
        handles.get("/api/v1/rates", &Method::GET, 200);
        handles.get("/api/v1/rates", &Method::GET, 200);
        handles.get("/api/v1/rates", &Method::GET, 429);
        handles.get("unmatched", &Method::GET, 404);
        assert_eq!(handles.by_route.len(), 2);
        assert_eq!(handles.by_route["/api/v1/rates"].len(), 2);
    }
}
