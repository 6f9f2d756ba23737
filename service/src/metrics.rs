//! The process's Prometheus recorder, `GET /metrics`, and the metrics a
//! process documents, registered at start ([`Documented`], [`register`]).

use std::time::Duration;

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::PrometheusHandle;
use tracing::warn;

pub use crate::documented_metrics::{register, Documented, Kind};

/// How often histogram samples are folded into their buckets between
/// scrapes.
const METRICS_UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The process's Prometheus recorder, installed on first use (call it at
/// start: anything counted before is lost). Every `metrics::counter!` and
/// friends in the process lands here.
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: std::sync::OnceLock<PrometheusHandle> = std::sync::OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
            .set_buckets(&[
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ])
            .expect("static bucket list is not empty")
            .build_recorder();
        let handle = recorder.handle();
        // Another recorder may exist when several apps share a test process;
        // this handle still renders its own.
        let _ = metrics::set_global_recorder(recorder);
        // Histogram samples wait in the recorder until something drains
        // them into the buckets; a bare recorder has no task of its own for
        // that, so without scrapes every request's samples were kept.
        let upkeep = handle.clone();
        let spawned = std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(METRICS_UPKEEP_EVERY);
                upkeep.run_upkeep();
            });
        if let Err(e) = spawned {
            warn!(error = %e, "metrics upkeep thread not started; histograms drain only when scraped");
        }
        register(crate::http_metrics::DOCUMENTED);
        handle
    })
}

/// `GET /metrics`: the process's metrics in Prometheus text format.
pub async fn render() -> Response {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        recorder().render(),
    )
        .into_response()
}
