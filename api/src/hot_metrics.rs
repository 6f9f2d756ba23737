//! The API's metrics: every one it documents ([`DOCUMENTED`], registered
//! at start so each reads 0 until its first event), and the request
//! path's counters, by handle.
//!
//! `metrics::counter!` with labels builds the metric's key (label strings
//! included) and hashes it into the registry on every call: a few
//! allocations per request on the hottest path. Each worker thread keeps
//! the handles it has used; they share the registry's atomics, so the
//! counts are the same.

use std::cell::RefCell;
use std::collections::HashMap;

use metrics::Counter;
use ratewire_service::metrics::Documented;

/// Every metric the API reports besides the requests every process
/// counts (docs/operations.md, "Metrics"), with the values of its labels.
pub const DOCUMENTED: &[Documented] = &[
    Documented::gauge("ratewire_api_redis_breaker_open"),
    Documented::counter("ratewire_api_redis_breaker_opened_total"),
    Documented::counter("ratewire_api_key_lookups_postgres_total"),
    Documented::counter("ratewire_api_keys_unchecked_total"),
    Documented::counter("ratewire_api_limiter_decisions_total").by(&[
        ("decision", &["allowed", "rate_limited", "quota_exceeded"]),
        ("counted", &["redis", "lease", "local"]),
    ]),
    Documented::counter("ratewire_api_limiter_round_trips_total"),
    Documented::counter("ratewire_api_views_served_total")
        .by(&[("source", &["redis", "postgres"])]),
    Documented::counter("ratewire_api_views_kept_served_total"),
    Documented::histogram("ratewire_api_view_gzip_seconds"),
    Documented::counter("ratewire_api_fallback_renders_total"),
    Documented::counter("ratewire_api_redis_errors_total"),
    Documented::counter("ratewire_api_postgres_errors_total"),
    Documented::gauge("ratewire_api_streams_open"),
    Documented::counter("ratewire_api_stream_changes_total"),
    Documented::counter("ratewire_api_stream_dropped_total"),
    Documented::counter("ratewire_api_stream_alerts_total"),
];

/// A counter's name and up to two labels (`""` for none), by the address
/// of each string: hashing five addresses costs a fraction of hashing the
/// strings (the same text at two addresses only makes two handles of one
/// counter).
type Name = [usize; 5];

fn addresses(name: &'static str, labels: &[(&'static str, &'static str); 2]) -> Name {
    let at = |s: &'static str| s.as_ptr() as usize;
    [
        at(name),
        at(labels[0].0),
        at(labels[0].1),
        at(labels[1].0),
        at(labels[1].1),
    ]
}

thread_local! {
    static COUNTERS: RefCell<HashMap<Name, Counter>> = RefCell::new(HashMap::new());
}

/// Adds one to `name{labels}`.
pub fn increment(name: &'static str, labels: [(&'static str, &'static str); 2]) {
    COUNTERS.with_borrow_mut(|counters| {
        counters
            .entry(addresses(name, &labels))
            .or_insert_with(|| {
                let labels: Vec<metrics::Label> = labels
                    .iter()
                    .filter(|(key, _)| !key.is_empty())
                    .map(|(key, value)| metrics::Label::from_static_parts(key, value))
                    .collect();
                metrics::counter!(name, labels)
            })
            .increment(1);
    });
}

/// No label.
pub const NONE: (&str, &str) = ("", "");
