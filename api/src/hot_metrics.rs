//! Counters of the request path, by handle.
//!
//! `metrics::counter!` with labels builds the metric's key (label strings
//! included) and hashes it into the registry on every call: a few
//! allocations per request on the hottest path. Each worker thread keeps
//! the handles it has used; they share the registry's atomics, so the
//! counts are the same.

use std::cell::RefCell;
use std::collections::HashMap;

use metrics::Counter;

/// A counter's name and up to two labels (`""` for none).
type Name = (&'static str, [(&'static str, &'static str); 2]);

thread_local! {
    static COUNTERS: RefCell<HashMap<Name, Counter>> = RefCell::new(HashMap::new());
}

/// Adds one to `name{labels}`.
pub fn increment(name: &'static str, labels: [(&'static str, &'static str); 2]) {
    COUNTERS.with_borrow_mut(|counters| {
        counters
            .entry((name, labels))
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
