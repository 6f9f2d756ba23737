//! What every HTTP process reports about its requests, in one shape so one
//! dashboard reads all three:
//!
//! - `ratewire_http_requests_total{route, method, status}`
//! - `ratewire_http_request_duration_seconds{route, method}` (histogram)
//!
//! `route` is the matched route pattern (`/api/v1/rates`), or `unmatched`,
//! so arbitrary paths cannot grow the label set.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics::{counter, histogram};

/// Middleware (`axum::middleware::from_fn(track)`) counting and timing
/// every request.
pub async fn track(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let seconds = started.elapsed().as_secs_f64();
    let status = response.status().as_u16().to_string();
    counter!("ratewire_http_requests_total",
        "route" => route.clone(), "method" => method.clone(), "status" => status)
    .increment(1);
    histogram!("ratewire_http_request_duration_seconds", "route" => route, "method" => method)
        .record(seconds);
    response
}

/// `GET /metrics`: the process's metrics in Prometheus text format.
pub async fn render() -> Response {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::runtime::metrics().render(),
    )
        .into_response()
}
