//! The metrics a process documents (docs/operations.md, "Metrics"), and
//! their registration at start, so each series reads 0 before its first
//! event.

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
