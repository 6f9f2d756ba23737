//! The process's Prometheus recorder, `GET /metrics`, and the metrics a
//! process documents, registered at start ([`Documented`], [`register`]).

use std::time::Duration;

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::PrometheusHandle;
use tracing::warn;

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

/// What kind of metric one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A metric a process documents (docs/operations.md, "Metrics"): its
/// name, its kind, and each label it is broken down by with every value
/// that label takes.
#[derive(Debug, Clone, Copy)]
pub struct Documented {
    pub name: &'static str,
    pub kind: Kind,
    /// In the order the process gives them when it counts.
    pub labels: &'static [(&'static str, &'static [&'static str])],
}

impl Documented {
    pub const fn counter(name: &'static str) -> Self {
        Self {
            name,
            kind: Kind::Counter,
            labels: &[],
        }
    }

    pub const fn gauge(name: &'static str) -> Self {
        Self {
            name,
            kind: Kind::Gauge,
            labels: &[],
        }
    }

    pub const fn histogram(name: &'static str) -> Self {
        Self {
            name,
            kind: Kind::Histogram,
            labels: &[],
        }
    }

    /// The same metric, broken down by `labels`.
    pub const fn by(self, labels: &'static [(&'static str, &'static [&'static str])]) -> Self {
        Self { labels, ..self }
    }

    /// Every series of the metric: each combination of its labels' values.
    fn series(&self) -> Vec<Vec<::metrics::Label>> {
        let mut series = vec![Vec::new()];
        for (label, values) in self.labels {
            series = series
                .into_iter()
                .flat_map(|labels: Vec<::metrics::Label>| {
                    values.iter().map(move |value| {
                        let mut labels = labels.clone();
                        labels.push(::metrics::Label::from_static_parts(label, value));
                        labels
                    })
                })
                .collect();
        }
        series
    }
}

/// Registers every series of `documented`, so each reads 0 until its
/// first event: a series that does not exist yet is "no data" on a
/// dashboard, and an alert on its rate never sees it start. Registering
/// changes no value, so it may run at any time.
pub fn register(documented: &[Documented]) {
    for metric in documented {
        // Looking a series up registers it; the handle is not needed.
        for labels in metric.series() {
            match metric.kind {
                Kind::Counter => drop(::metrics::counter!(metric.name, labels)),
                Kind::Gauge => drop(::metrics::gauge!(metric.name, labels)),
                Kind::Histogram => drop(::metrics::histogram!(metric.name, labels)),
            }
        }
    }
}

/// `GET /metrics`: the process's metrics in Prometheus text format.
pub async fn render() -> Response {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        recorder().render(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_has_a_series_for_each_combination_of_its_labels() {
        let decisions = Documented::counter("decisions_total").by(&[
            ("decision", &["allowed", "refused"]),
            ("counted", &["here", "there", "elsewhere"]),
        ]);
        let series = decisions.series();
        assert_eq!(series.len(), 6);
        assert_eq!(series[0][0].value(), "allowed");
        assert_eq!(series[0][1].key(), "counted");
        assert_eq!(Documented::gauge("open").series(), vec![Vec::new()]);
    }
}
