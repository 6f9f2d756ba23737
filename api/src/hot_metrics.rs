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
