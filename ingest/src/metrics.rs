//! Every metric ingest reports besides the requests every process counts
//! (docs/operations.md, "Metrics"), registered at start so each reads 0
//! until its first event.

use ratewire_service::metrics::Documented;

/// What the broker answered a publish (`publisher`).
const RESULTS: &[&str] = &["acknowledged", "failed", "timed_out"];

pub const DOCUMENTED: &[Documented] = &[
    Documented::counter("ratewire_ingest_publish_total").by(&[("result", RESULTS)]),
    Documented::histogram("ratewire_ingest_publish_seconds").by(&[("result", RESULTS)]),
    Documented::counter("ratewire_ingest_postgres_errors_total"),
];
