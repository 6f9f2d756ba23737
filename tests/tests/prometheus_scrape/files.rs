//! The scrape settings shipped beside the rules, held to the deployment
//! files they scrape (none can run here: no container engine, no cluster):
//! compose's Prometheus has a job per process, named as the rules expect,
//! on the port each container serves `/metrics` on; the Kubernetes rules are
//! rules.yml's; each Deployment's pods are scraped on the container port
//! their `prometheus.io/port` names; and the dashboard takes its data
//! source as Grafana's provisioning gives it.

use std::collections::BTreeSet;

use ratewire_e2e::repo::{read, yaml_documents};
use serde_norway::Value;

use super::JOBS;

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => panic!("not a string or number: {other:?}"),
    }
}

fn port_of(address: &str) -> u64 {
    address
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("not host:port: {address}"))
}

#[test]
fn compose_prometheus_scrapes_every_replica_of_each_process_where_it_serves_metrics() {
    let compose = yaml_documents("deploy/compose.yaml").remove(0);
    let config: Value = serde_norway::from_str(&read("deploy/prometheus/prometheus.yml"))
        .expect("prometheus.yml is YAML");
    let jobs = config["scrape_configs"]
        .as_sequence()
        .expect("scrape_configs");
    let mut scraped = BTreeSet::new();
    for (name, service) in compose["services"].as_mapping().expect("services") {
        let name = text(name);
        let Some(binary) = service["command"][0].as_str() else {
            continue;
        };
        if !binary.starts_with("ratewire-") {
            continue;
        }
        // The operator listener when the process has one apart, else its
        // only listener (the projector's).
        let env = service["environment"].as_mapping().expect("environment");
        let listeners: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (text(k), text(v)))
            .filter(|(k, _)| k.ends_with("_LISTEN"))
            .collect();
        let (_, address) = listeners
            .iter()
            .find(|(k, _)| k.ends_with("_OPERATOR_LISTEN"))
            .or(listeners.first())
            .unwrap_or_else(|| panic!("{name}: no listener setting"));
        let job = jobs
            .iter()
            .find(|j| j["job_name"].as_str() == Some(binary))
            .unwrap_or_else(|| panic!("prometheus.yml has no job {binary}"));
        let discovery = &job["dns_sd_configs"][0];
        assert_eq!(
            discovery["names"]
                .as_sequence()
                .map(|n| n.iter().map(text).collect::<Vec<_>>()),
            Some(vec![name.clone()]),
            "{binary}: every replica of the service {name}"
        );
        assert_eq!(discovery["type"].as_str(), Some("A"), "{binary}");
        assert_eq!(
            discovery["port"].as_u64(),
            Some(port_of(address)),
            "{binary}: scraped where {name} serves /metrics"
        );
        scraped.insert(binary.to_owned());
    }
    assert_eq!(scraped, JOBS.map(str::to_owned).into(), "a job per process");
    assert_eq!(jobs.len(), JOBS.len(), "no other job");

    // Compose's Prometheus reads this configuration and rules.yml where
    // the configuration says, and is reached from the host's loopback only.
    let prometheus = &compose["services"]["prometheus"];
    let flags: Vec<String> = prometheus["command"]
        .as_sequence()
        .expect("prometheus command")
        .iter()
        .map(text)
        .collect();
    let config_file = flags
        .iter()
        .find_map(|f| f.strip_prefix("--config.file="))
        .expect("--config.file");
    let mounts: Vec<String> = prometheus["volumes"]
        .as_sequence()
        .expect("volumes")
        .iter()
        .map(text)
        .collect();
    let rules_file = text(&config["rule_files"][0]);
    for (source, target) in [
        ("./prometheus/prometheus.yml", config_file),
        ("./prometheus/rules.yml", rules_file.as_str()),
    ] {
        assert!(
            mounts.contains(&format!("{source}:{target}:ro")),
            "{source} mounted read-only at {target}: {mounts:?}"
        );
    }
    for port in prometheus["ports"]
        .as_sequence()
        .expect("ports")
        .iter()
        .map(text)
    {
        assert!(port.starts_with("127.0.0.1:"), "{port}: loopback only");
    }
}

/// Whether a Kubernetes label selector selects pods labelled `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let by_label = selector["matchLabels"]
        .as_mapping()
        .into_iter()
        .flatten()
        .all(|(k, v)| &labels[k] == v);
    let by_expression = selector["matchExpressions"]
        .as_sequence()
        .into_iter()
        .flatten()
        .all(|e| {
            assert_eq!(e["operator"].as_str(), Some("In"), "{e:?}");
            e["values"]
                .as_sequence()
                .is_some_and(|values| values.contains(&labels[text(&e["key"]).as_str()]))
        });
    by_label && by_expression
}

#[test]
fn kubernetes_monitoring_carries_rules_yml_and_scrapes_each_pod_where_it_serves_metrics() {
    let rules_text = read("deploy/prometheus/rules.yml");
    let rules: Value = serde_norway::from_str(&rules_text).expect("rules.yml is YAML");
    let monitoring = yaml_documents("deploy/k8s/monitoring.yaml");
    let of_kind = |kind: &str| -> Vec<&Value> {
        monitoring
            .iter()
            .filter(|d| d["kind"].as_str() == Some(kind))
            .collect()
    };
    let config_maps = of_kind("ConfigMap");
    assert_eq!(config_maps.len(), 1);
    let copied = text(&config_maps[0]["data"]["rules.yml"]);
    let differing = copied
        .lines()
        .map(Some)
        .chain(std::iter::repeat(None))
        .zip(rules_text.lines().map(Some).chain(std::iter::repeat(None)))
        .take(copied.lines().count().max(rules_text.lines().count()))
        .enumerate()
        .find(|(_, (copy, original))| copy != original);
    if let Some((line, (copy, original))) = differing {
        panic!(
            "the ConfigMap's rules.yml differs from deploy/prometheus/rules.yml at its line {}:\n  \
             ConfigMap: {copy:?}\n  rules.yml: {original:?}\ncopy rules.yml into it again, \
             indented by four spaces",
            line + 1
        );
    }
    let scrape: Value = serde_norway::from_str(&text(&config_maps[0]["data"]["prometheus.yml"]))
        .expect("the ConfigMap's prometheus.yml is YAML");
    assert!(text(&scrape["rule_files"][0]).ends_with("/rules.yml"));
    let relabels = scrape["scrape_configs"][0]["relabel_configs"]
        .as_sequence()
        .expect("relabel_configs");
    assert!(
        relabels
            .iter()
            .any(|r| r["target_label"].as_str() == Some("job")
                && r["source_labels"][0].as_str()
                    == Some("__meta_kubernetes_pod_label_app_kubernetes_io_name")),
        "`job` is the process, as the rules group by it"
    );
    let operator_rules = of_kind("PrometheusRule");
    assert_eq!(operator_rules.len(), 1);
    assert_eq!(
        operator_rules[0]["spec"], rules,
        "the PrometheusRule's groups are rules.yml's"
    );

    // Each process's pods: one PodMonitor, naming the container port that
    // the pods' prometheus.io/port annotation (checked against the code
    // by deploy_files.rs) points at, with `job` the process's name.
    let monitors = of_kind("PodMonitor");
    let mut monitored = BTreeSet::new();
    for file in ["api", "ingest", "projector"] {
        let path = format!("deploy/k8s/{file}.yaml");
        for deployment in yaml_documents(&path)
            .iter()
            .filter(|d| d["kind"].as_str() == Some("Deployment"))
        {
            let pod = &deployment["spec"]["template"];
            let labels = &pod["metadata"]["labels"];
            let container = &pod["spec"]["containers"][0];
            let binary = text(&container["command"][0]);
            let choosing: Vec<&&Value> = monitors
                .iter()
                .filter(|m| selects(&m["spec"]["selector"], labels))
                .collect();
            assert_eq!(choosing.len(), 1, "{path}: one PodMonitor selects its pods");
            let monitor = &choosing[0]["spec"];
            let job_label = text(&monitor["jobLabel"]);
            assert_eq!(text(&labels[job_label.as_str()]), binary, "{path}: job");
            let endpoint = &monitor["podMetricsEndpoints"][0];
            assert_eq!(endpoint["path"].as_str(), Some("/metrics"), "{path}");
            let port = container["ports"]
                .as_sequence()
                .expect("container ports")
                .iter()
                .find(|p| p["name"] == endpoint["port"])
                .unwrap_or_else(|| panic!("{path}: no port named {:?}", endpoint["port"]));
            assert_eq!(
                text(&port["containerPort"]),
                text(&pod["metadata"]["annotations"]["prometheus.io/port"]),
                "{path}: scraped on the annotated port"
            );
            monitored.insert(binary);
        }
    }
    assert_eq!(monitored, JOBS.map(str::to_owned).into());
}

#[test]
fn the_dashboard_takes_its_prometheus_from_a_variable_as_provisioning_gives_it() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/ratewire.json")).expect("JSON");
    assert!(dashboard["schemaVersion"].as_u64() >= Some(36));
    assert!(dashboard["id"].is_null(), "Grafana gives the id");
    assert_eq!(dashboard["uid"], "ratewire", "a stable address");
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a `datasource` variable of Prometheus data sources"
    );
    let source = serde_json::json!({"type": "prometheus", "uid": "${datasource}"});
    let mut ids = BTreeSet::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels {
        let title = &panel["title"];
        assert!(
            ids.insert(panel["id"].as_u64().expect("an id")),
            "{title}: id taken"
        );
        let at = &panel["gridPos"];
        assert!(
            at["x"].as_u64().unwrap() + at["w"].as_u64().unwrap() <= 24,
            "{title}: in the grid"
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"], source, "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        let mut references = BTreeSet::new();
        for target in targets {
            assert_eq!(target["datasource"], source, "{title}");
            assert!(
                references.insert(target["refId"].as_str().unwrap()),
                "{title}"
            );
        }
    }
}
