//! Every metric docs/operations.md documents is on its process's
//! `/metrics` from the start, at 0 before anything happened, so a
//! dashboard shows 0 rather than no data; and every `ratewire_` metric a
//! process serves is documented there. Any other page naming a metric
//! names one of the table's. The docs and the code cannot drift apart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ratewire_e2e::Stack;

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("docs")
}

/// The metrics of operations.md's table, by process (`all`, `api`,
/// `ingest`, `projector`). A cell may name several, the later ones by
/// their suffix after the process's prefix
/// (`ratewire_projector_postgres_errors_total`, `_redis_errors_total`).
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(docs().join("operations.md")).unwrap();
    let section = text
        .split("\n## Metrics\n")
        .nth(1)
        .expect("operations.md has a Metrics section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut by_process: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `ratewire_")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (names, process) = (cells[1], cells[2]);
        let mut prefix = String::new();
        for name in names.split('`').skip(1).step_by(2) {
            let name = name.split('{').next().unwrap_or_default();
            let name = match name.strip_prefix('_') {
                Some(suffix) => format!("{prefix}_{suffix}"),
                None => {
                    prefix = name.splitn(3, '_').take(2).collect::<Vec<_>>().join("_");
                    name.to_owned()
                }
            };
            by_process
                .entry(process.to_owned())
                .or_default()
                .insert(name);
        }
    }
    assert!(
        by_process.len() == 4,
        "rows for all, api, ingest and projector: {by_process:?}"
    );
    by_process
}

/// The metric names a Prometheus text page declares (`# TYPE name kind`).
fn served(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_metric_another_page_names_is_in_the_table() {
    let table: BTreeSet<String> = documented().into_values().flatten().collect();
    // The autoscaler's external metric: the Prometheus adapter's sum of
    // `ratewire_projector_consumer_lag`, which no process serves.
    let not_served = ["ratewire_projector_lag"];
    let metric = |word: &str| {
        ["api", "ingest", "projector", "http", "webhook"]
            .iter()
            .any(|kind| word.starts_with(&format!("ratewire_{kind}_")))
    };
    for page in std::fs::read_dir(docs()).unwrap() {
        let page = page.unwrap().path();
        // The history of measurements names what was measured then.
        if page.extension().is_none_or(|e| e != "md") || page.ends_with("benchmarks-history.md") {
            continue;
        }
        let text = std::fs::read_to_string(&page).unwrap();
        let words = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        for word in words.filter(|w| metric(w) && !w.ends_with('_')) {
            assert!(
                table.contains(word) || not_served.contains(&word),
                "{} names {word}, which operations.md's metrics table does not document",
                page.display()
            );
        }
    }
}

#[tokio::test]
async fn every_documented_metric_is_served_from_the_start_and_none_other() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let documented = documented();
    for (process, url) in [
        ("api", &stack.api_operator_url),
        ("ingest", &stack.ingest_operator_url),
        ("projector", &stack.projector_url),
    ] {
        let page = stack
            .text_at(&format!("{url}/metrics"))
            .await
            .ok_or_else(|| anyhow::anyhow!("{process} serves no /metrics"))?;
        let served = served(&page);
        let expected: BTreeSet<String> = documented[process]
            .iter()
            .chain(&documented["all"])
            .cloned()
            .collect();
        let missing: Vec<&String> = expected.difference(&served).collect();
        assert!(
            missing.is_empty(),
            "{process} does not serve {missing:?} on a fresh stack:\n{page}"
        );
        let undocumented: Vec<&String> = served
            .iter()
            .filter(|name| name.starts_with("ratewire_"))
            .filter(|name| !expected.contains(*name))
            .collect();
        assert!(
            undocumented.is_empty(),
            "{process} serves {undocumented:?}, which operations.md does not document"
        );
    }
    Ok(())
}
