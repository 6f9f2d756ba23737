//! The crates depend on each other as the README's diagram shows: the
//! processes share code only through `proto`, `service`, `readmodel` and
//! `alerts`,
//! the event contract carries no runtime, and the API links no Kafka
//! client. Read from the manifests and `Cargo.lock` (which lists every
//! package's resolved dependencies), so a new dependency that breaks the
//! layering fails here, not in review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Each package of `Cargo.lock` and the names of its dependencies.
fn locked() -> BTreeMap<String, BTreeSet<String>> {
    let lock = read("Cargo.lock");
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let name = block
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("every package has a name")
            .to_owned();
        let dependencies = block
            .split_once("dependencies = [")
            .map(|(_, rest)| rest.split(']').next().unwrap_or_default())
            .unwrap_or_default()
            .split('"')
            .skip(1)
            .step_by(2)
            .filter_map(|d| d.split_whitespace().next())
            .map(str::to_owned);
        packages.entry(name).or_default().extend(dependencies);
    }
    packages
}

/// Everything `package` pulls in, however indirectly.
fn closure(packages: &BTreeMap<String, BTreeSet<String>>, package: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut next = vec![package.to_owned()];
    while let Some(name) = next.pop() {
        for dependency in packages.get(&name).into_iter().flatten() {
            if seen.insert(dependency.clone()) {
                next.push(dependency.clone());
            }
        }
    }
    seen
}

/// The ratewire crates a crate's manifest names as (normal) dependencies.
fn ratewire_dependencies(dir: &str) -> BTreeSet<String> {
    let manifest = read(&format!("{dir}/Cargo.toml"));
    let normal = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap_or_default()
        .split("\n[")
        .next()
        .unwrap_or_default();
    normal
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|l| l.strip_prefix("ratewire-"))
        .map(|l| l.trim_end_matches(".workspace").to_owned())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn processes_share_code_only_through_the_four_libraries() {
    assert_eq!(ratewire_dependencies("ingest"), set(&["proto", "service"]));
    assert_eq!(
        ratewire_dependencies("projector"),
        set(&["alerts", "proto", "readmodel", "service"])
    );
    assert_eq!(
        ratewire_dependencies("api"),
        set(&["alerts", "proto", "readmodel", "service"])
    );
    assert_eq!(
        ratewire_dependencies("alerts"),
        set(&["proto", "readmodel", "service"])
    );
    assert_eq!(
        ratewire_dependencies("readmodel"),
        set(&["proto", "service"])
    );
    assert_eq!(
        ratewire_dependencies("tools"),
        set(&["alerts", "proto", "service", "ingest"])
    );
    assert_eq!(ratewire_dependencies("service"), set(&[]));
    assert_eq!(ratewire_dependencies("proto"), set(&[]));
}

#[test]
fn the_event_contract_carries_no_runtime() {
    let contract = closure(&locked(), "ratewire-proto");
    for forbidden in [
        "axum",
        "clap",
        "tokio",
        "tracing-subscriber",
        "metrics-exporter-prometheus",
        "sqlx",
        "redis",
        "rdkafka",
    ] {
        assert!(
            !contract.contains(forbidden),
            "ratewire-proto pulls in {forbidden}"
        );
    }
}

#[test]
fn the_api_links_no_kafka_client() {
    let packages = locked();
    let api = closure(&packages, "ratewire-api");
    assert!(!api.contains("rdkafka") && !api.contains("rdkafka-sys"));
    assert!(!api.contains("ratewire-projector"));
    // The check can see a Kafka client where one is linked.
    assert!(closure(&packages, "ratewire-projector").contains("rdkafka"));
}
