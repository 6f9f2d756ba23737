//! The deployment files (Dockerfile, compose file, Kubernetes manifests)
//! cannot be run here (no container engine), so they are held to the code
//! instead: every process they start exists, every setting they pass is one
//! that process reads, ports and probe paths are the ones it serves, and the
//! projector replicas split the partitions without a gap.

use std::collections::{BTreeMap, BTreeSet};

use ratewire_e2e::repo::{read, yaml_documents};
use serde_norway::Value;

/// The `RATEWIRE_*` settings a process reads: those of its `config.rs`,
/// and of each settings group it flattens into it (the groups every
/// process or the read model's two sides share).
fn settings_of(binary: &str) -> BTreeSet<String> {
    let file = match binary {
        "ratewire-api" => "api/src/config.rs",
        "ratewire-ingest" => "ingest/src/config.rs",
        "ratewire-projector" => "projector/src/config.rs",
        other => panic!("no such process: {other}"),
    };
    let config = read(file);
    let body = struct_body(&config, "Config").expect("a Config");
    let mut settings = env_names(Some(body));
    // Groups flatten groups in turn.
    let mut groups = flattened_groups(body);
    while let Some(group) = groups.pop() {
        let body = SHARED_SETTINGS
            .iter()
            .map(|file| read(file))
            .find_map(|text| struct_body(&text, &group).map(str::to_owned))
            .unwrap_or_else(|| panic!("{file} flattens {group}, found in no shared settings file"));
        settings.extend(env_names(Some(&body)));
        groups.extend(flattened_groups(&body));
    }
    settings
}

/// Where the settings groups shared between processes are defined.
const SHARED_SETTINGS: [&str; 6] = [
    "service/src/kafka.rs",
    "service/src/settings.rs",
    "service/src/serve.rs",
    "service/src/clients.rs",
    "readmodel/src/settings.rs",
    "alerts/src/settings.rs",
];

/// The text of `pub struct {name} { ... }` in `text`.
fn struct_body<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let start = text.find(&format!("pub struct {name} {{"))?;
    let rest = &text[start..];
    Some(&rest[..rest.find("\n}").unwrap_or(rest.len())])
}

/// The types of the fields marked `#[command(flatten)]`.
fn flattened_groups(config: &str) -> Vec<String> {
    config
        .split("#[command(flatten)]")
        .skip(1)
        .filter_map(|rest| {
            let field = rest.trim_start().lines().next()?;
            let ty = field.split(':').nth(1)?.trim().trim_end_matches(',');
            Some(ty.to_owned())
        })
        .collect()
}

fn env_names(body: Option<&str>) -> BTreeSet<String> {
    body.unwrap_or_default()
        .split("env = \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|name| name.starts_with("RATEWIRE_"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn each_process_reads_the_shared_settings_it_flattens_and_no_others() {
    let api = settings_of("ratewire-api");
    let ingest = settings_of("ratewire-ingest");
    let projector = settings_of("ratewire-projector");
    for settings in [&api, &ingest, &projector] {
        assert!(settings.contains("RATEWIRE_DATABASE_URL"));
        assert!(settings.contains("RATEWIRE_LOG_FORMAT"));
    }
    assert!(api.contains("RATEWIRE_ADMIN_TOKEN") && ingest.contains("RATEWIRE_ADMIN_TOKEN"));
    assert!(!projector.contains("RATEWIRE_ADMIN_TOKEN"));
    assert!(api.contains("RATEWIRE_READ_SCHEMA") && projector.contains("RATEWIRE_READ_SCHEMA"));
    assert!(!ingest.contains("RATEWIRE_REDIS_URL"));
    // Webhook secrets are sealed by the API and opened by the projectors.
    for name in ["RATEWIRE_WEBHOOK_SECRETS_KEY", "RATEWIRE_ALERTS_SCHEMA"] {
        assert!(api.contains(name) && projector.contains(name), "{name}");
        assert!(!ingest.contains(name), "{name}");
    }
}

/// Binaries the workspace builds (`[[bin]]` names).
fn binaries() -> BTreeSet<String> {
    [
        "api/Cargo.toml",
        "ingest/Cargo.toml",
        "projector/Cargo.toml",
    ]
    .iter()
    .flat_map(|file| {
        read(file)
            .lines()
            .filter_map(|l| l.strip_prefix("name = \""))
            .filter_map(|l| l.strip_suffix('"'))
            .filter(|n| n.starts_with("ratewire-"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    })
    .collect()
}

/// The listen setting of each process and the port its code defaults to.
fn listen_setting(binary: &str) -> (&'static str, u16) {
    match binary {
        "ratewire-api" => ("RATEWIRE_API_LISTEN", 8080),
        "ratewire-ingest" => ("RATEWIRE_INGEST_LISTEN", 8081),
        "ratewire-projector" => ("RATEWIRE_PROJECTOR_LISTEN", 8082),
        other => panic!("no such process: {other}"),
    }
}

/// The operator listen setting and its default port, for the processes
/// whose public listener is not their operator one (the projector's only
/// listener already is).
fn operator_setting(binary: &str) -> Option<(&'static str, u16)> {
    match binary {
        "ratewire-api" => Some(("RATEWIRE_API_OPERATOR_LISTEN", 9080)),
        "ratewire-ingest" => Some(("RATEWIRE_INGEST_OPERATOR_LISTEN", 9081)),
        _ => None,
    }
}

/// Where a process serves `/metrics`: its operator listener.
fn metrics_port(binary: &str) -> u16 {
    operator_setting(binary).unwrap_or(listen_setting(binary)).1
}

fn port_of(address: &str) -> u16 {
    address
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("not host:port: {address}"))
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

#[test]
fn the_code_defaults_to_the_ports_the_files_use() {
    for binary in ["ratewire-api", "ratewire-ingest", "ratewire-projector"] {
        let config = read(&format!(
            "{}/src/config.rs",
            binary.trim_start_matches("ratewire-")
        ));
        for (setting, port) in [Some(listen_setting(binary)), operator_setting(binary)]
            .into_iter()
            .flatten()
        {
            let declared = config
                .split(&format!("env = \"{setting}\""))
                .nth(1)
                .unwrap_or_else(|| panic!("{binary} does not read {setting}"));
            let default = declared
                .split("default_value = \"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or_else(|| panic!("{setting} has no default"));
            assert_eq!(port_of(default), port, "{setting} default");
        }
        // The probes and metrics the files point at are served.
        let sources = match binary {
            "ratewire-api" => vec!["api/src/routes/health.rs", "api/src/routes/mod.rs"],
            "ratewire-ingest" => vec!["ingest/src/routes/health.rs", "ingest/src/routes/mod.rs"],
            _ => vec!["projector/src/http.rs"],
        };
        let code: String = sources.iter().map(|f| read(f)).collect();
        for path in ["/healthz", "/readyz", "/metrics"] {
            assert!(
                code.contains(&format!(".route(\"{path}\"")),
                "{binary} serves {path}"
            );
        }
    }
}

#[test]
fn the_dockerfile_builds_in_stages_and_ships_every_process() {
    let dockerfile = read("deploy/Dockerfile");
    let stages = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .count();
    assert!(stages >= 2, "multi-stage build");
    assert!(dockerfile.contains("cargo build --release --locked --bins"));
    for binary in binaries() {
        assert!(
            dockerfile.contains(&format!("target/release/{binary}")),
            "the image holds {binary}"
        );
    }
    let exposed: BTreeSet<u16> = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(|l| l.split_whitespace().map(|p| p.parse::<u16>().unwrap()))
        .collect();
    for binary in ["ratewire-api", "ratewire-ingest", "ratewire-projector"] {
        for (setting, port) in [Some(listen_setting(binary)), operator_setting(binary)]
            .into_iter()
            .flatten()
        {
            assert!(exposed.contains(&port), "EXPOSE {port}");
            assert!(
                dockerfile.contains(&format!("{setting}=0.0.0.0:{port}")),
                "{setting} listens on every interface in a container"
            );
        }
    }
    assert!(read(".dockerignore").lines().any(|l| l.trim() == "target"));
}

#[test]
fn the_compose_file_runs_every_process_against_kafka_in_kraft_mode() {
    let compose = yaml_documents("deploy/compose.yaml").remove(0);
    let services = compose["services"].as_mapping().expect("services");
    let kafka = &compose["services"]["kafka"]["environment"];
    assert!(
        text(&kafka["KAFKA_PROCESS_ROLES"]).contains("controller"),
        "KRaft: the broker is its own controller"
    );
    assert!(compose["services"]["kafka"]["image"]
        .as_str()
        .unwrap()
        .starts_with("apache/kafka"));
    let known = binaries();
    // The broker version production runs is the one the tests run.
    let pom = read("deploy/kafka/pom.xml");
    let tested = pom
        .split("<kafka.version>")
        .nth(1)
        .and_then(|rest| rest.split("</kafka.version>").next())
        .expect("deploy/kafka/pom.xml names kafka.version");
    assert_eq!(
        text(&compose["services"]["kafka"]["image"]),
        format!("apache/kafka:{tested}"),
        "compose runs the Kafka version the tests run"
    );
    let mut started = BTreeMap::<String, usize>::new();
    for (name, service) in services {
        let name = text(name);
        let Some(command) = service["command"].as_sequence() else {
            continue;
        };
        let binary = text(&command[0]);
        if !binary.starts_with("ratewire-") {
            continue;
        }
        assert!(known.contains(&binary), "{name}: {binary} is built");
        let replicas = service["deploy"]["replicas"].as_u64().unwrap_or(1) as usize;
        *started.entry(binary.clone()).or_default() += replicas;
        let env = service["environment"].as_mapping().expect("environment");
        let settings = settings_of(&binary);
        for key in env.keys().map(text) {
            assert!(settings.contains(&key), "{name}: {binary} reads {key}");
        }
        let (listen, _) = listen_setting(&binary);
        let port = port_of(&text(&env[listen]));
        let operator = operator_setting(&binary).map(|(s, _)| port_of(&text(&env[s])));
        if let Some(ports) = service["ports"].as_sequence() {
            for mapping in ports.iter().map(text) {
                if operator.is_some_and(|o| mapping.ends_with(&format!(":{o}"))) {
                    assert!(
                        mapping.starts_with("127.0.0.1:"),
                        "{name}: the operator port {mapping} is published on loopback only"
                    );
                } else {
                    assert!(
                        mapping.ends_with(&format!(":{port}")),
                        "{name}: published port {mapping:?} reaches {port}"
                    );
                }
            }
        }
        if binary == "ratewire-projector" {
            assert_eq!(
                env.get("RATEWIRE_PROJECTOR_PARTITIONS")
                    .map(text)
                    .as_deref(),
                Some("auto"),
                "{name}: projectors share the partitions by themselves"
            );
        }
    }
    assert_eq!(started.get("ratewire-ingest"), Some(&1));
    assert!(started["ratewire-api"] >= 2, "several api replicas");
    assert!(started["ratewire-projector"] >= 3, "three projectors");
}

#[test]
fn the_kubernetes_manifests_match_the_processes() {
    let mut deployments = BTreeMap::new();
    let mut services = Vec::new();
    let mut autoscalers = Vec::new();
    let mut ingresses = Vec::new();
    let mut jobs = Vec::new();
    let mut shared = BTreeSet::new();
    for file in [
        "deploy/k8s/config.yaml",
        "deploy/k8s/api.yaml",
        "deploy/k8s/ingest.yaml",
        "deploy/k8s/projector.yaml",
        "deploy/k8s/ingress.yaml",
        "deploy/k8s/reference.yaml",
    ] {
        assert!(
            !read(file).contains("RATEWIRE_ADMIN_TOKEN:"),
            "{file}: the admin token comes from a Secret the operator creates, never a file"
        );
        for doc in yaml_documents(file) {
            let name = text(&doc["metadata"]["name"]);
            match doc["kind"].as_str().unwrap() {
                "Deployment" => {
                    deployments.insert(name, doc);
                }
                "Service" => services.push(doc),
                "HorizontalPodAutoscaler" => autoscalers.push(doc),
                "Ingress" => ingresses.push(doc),
                "CronJob" => jobs.push(doc),
                "ConfigMap" => shared.extend(doc["data"].as_mapping().unwrap().keys().map(text)),
                "Secret" => shared.extend(doc["stringData"].as_mapping().unwrap().keys().map(text)),
                other => panic!("{file}: unexpected kind {other}"),
            }
        }
    }
    let every_setting: BTreeSet<String> = ["ratewire-api", "ratewire-ingest", "ratewire-projector"]
        .iter()
        .flat_map(|b| settings_of(b))
        .collect();
    for key in &shared {
        assert!(every_setting.contains(key), "shared setting {key} is read");
    }

    // The reference poller: the feed tool's one round, with settings the
    // feed reads, reaching ingest's operator Service, suspended until its
    // URL is set.
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job["spec"]["suspend"].as_bool(), Some(true));
    let container = &job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    let command: Vec<String> = container["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert_eq!(command, ["ratewire-feed", "reference", "poll", "--once"]);
    assert!(read("deploy/Dockerfile").contains("target/release/ratewire-feed"));
    let feed = env_names(Some(&read("tools/src/bin/feed.rs")));
    for variable in container["env"].as_sequence().unwrap() {
        let name = text(&variable["name"]);
        assert!(feed.contains(&name), "the feed reads {name}");
    }
    assert!(feed.contains("RATEWIRE_ADMIN_TOKEN"));
    assert!(
        container["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|v| text(&v["value"]).starts_with("http://ratewire-ingest-operator:9081")),
        "the poller reaches ingest's operator Service"
    );
    for kind in ["requests", "limits"] {
        assert!(!container["resources"][kind]["memory"].is_null());
    }

    let mut per_binary = BTreeMap::<String, Vec<String>>::new();
    for (name, deployment) in &deployments {
        let pod = &deployment["spec"]["template"];
        let selector = deployment["spec"]["selector"]["matchLabels"]
            .as_mapping()
            .unwrap();
        for (label, value) in selector {
            assert_eq!(
                &pod["metadata"]["labels"][label], value,
                "{name}: the selector matches its pods"
            );
        }
        let container = &pod["spec"]["containers"][0];
        let binary = text(&container["command"][0]);
        assert!(binaries().contains(&binary), "{name}: {binary} is built");
        per_binary
            .entry(binary.clone())
            .or_default()
            .push(name.clone());
        let settings = settings_of(&binary);
        let env: BTreeMap<String, String> = container["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|e| (text(&e["name"]), text(&e["value"])))
            .collect();
        for key in env.keys() {
            assert!(settings.contains(key), "{name}: {binary} reads {key}");
        }
        let (listen, _) = listen_setting(&binary);
        let port = port_of(&env[listen]);
        assert_eq!(
            container["ports"][0]["containerPort"].as_u64(),
            Some(u64::from(port)),
            "{name}: containerPort"
        );
        let mut scraped = port;
        if let Some((setting, _)) = operator_setting(&binary) {
            let operator = port_of(&env[setting]);
            let declared = container["ports"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|p| p["name"].as_str() == Some("operator"))
                .unwrap_or_else(|| panic!("{name}: an `operator` container port"));
            assert_eq!(
                declared["containerPort"].as_u64(),
                Some(u64::from(operator)),
                "{name}: the operator port"
            );
            scraped = operator;
        }
        assert_eq!(scraped, metrics_port(&binary), "{name}: metrics port");
        for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
            let get = &container[probe]["httpGet"];
            assert_eq!(get["path"].as_str(), Some(path), "{name}: {probe}");
            assert_eq!(
                get["port"].as_u64(),
                Some(u64::from(port)),
                "{name}: {probe}"
            );
        }
        assert_eq!(
            text(&pod["metadata"]["annotations"]["prometheus.io/port"]),
            scraped.to_string(),
            "{name}: metrics scraped where served"
        );
        for kind in ["requests", "limits"] {
            for resource in ["cpu", "memory"] {
                assert!(
                    !container["resources"][kind][resource].is_null(),
                    "{name}: resources.{kind}.{resource}"
                );
            }
        }
        if binary == "ratewire-projector" {
            assert_eq!(
                env.get("RATEWIRE_PROJECTOR_PARTITIONS").map(String::as_str),
                Some("auto"),
                "{name}: projectors share the partitions by themselves"
            );
        }
    }
    for binary in ["ratewire-api", "ratewire-ingest", "ratewire-projector"] {
        assert_eq!(
            per_binary.get(binary).map(Vec::len),
            Some(1),
            "one Deployment runs {binary}, scaled by its replicas"
        );
    }

    let mut exposed = BTreeSet::new();
    for service in &services {
        let name = text(&service["metadata"]["name"]);
        let target = deployments
            .values()
            .find(|d| {
                service["spec"]["selector"]
                    .as_mapping()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| &d["spec"]["template"]["metadata"]["labels"][k] == v)
            })
            .unwrap_or_else(|| panic!("service {name} selects no Deployment"));
        let container = &target["spec"]["template"]["spec"]["containers"][0];
        let binary = text(&container["command"][0]);
        let target_port = &service["spec"]["ports"][0]["targetPort"];
        if name.ends_with("-operator") {
            let operator = operator_setting(&binary)
                .unwrap_or_else(|| panic!("{name}: {binary} has no operator listener"));
            assert_eq!(target_port.as_u64(), Some(u64::from(operator.1)), "{name}");
            assert_eq!(
                service["spec"]["type"].as_str(),
                Some("ClusterIP"),
                "{name}"
            );
            continue;
        }
        assert_eq!(
            target_port, &container["ports"][0]["containerPort"],
            "service {name} reaches the public container port"
        );
        exposed.insert(binary);
    }
    assert_eq!(
        exposed,
        BTreeSet::from(["ratewire-api".to_owned(), "ratewire-ingest".to_owned()]),
        "a public Service for api and for ingest"
    );

    assert_eq!(ingresses.len(), 1);
    let backends: Vec<String> = ingresses[0]["spec"]["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|rule| rule["http"]["paths"].as_sequence().unwrap().clone())
        .map(|path| {
            let service = &path["backend"]["service"];
            assert_eq!(service["port"]["name"].as_str(), Some("http"));
            text(&service["name"])
        })
        .collect();
    assert!(!backends.is_empty());
    for backend in &backends {
        assert!(
            ["ratewire-api", "ratewire-ingest"].contains(&backend.as_str()),
            "the Ingress reaches only public Services, not {backend}"
        );
    }

    let mut scaled = BTreeMap::new();
    for autoscaler in &autoscalers {
        let target = &autoscaler["spec"]["scaleTargetRef"];
        assert_eq!(target["kind"].as_str(), Some("Deployment"));
        let deployment = &deployments[&text(&target["name"])];
        let binary = text(&deployment["spec"]["template"]["spec"]["containers"][0]["command"][0]);
        scaled.insert(binary, autoscaler);
    }
    assert_eq!(
        scaled.keys().cloned().collect::<Vec<_>>(),
        ["ratewire-api", "ratewire-projector"],
        "autoscalers for the api and the projectors"
    );
    // The projectors scale on lag, never past one per partition.
    let projectors = &scaled["ratewire-projector"]["spec"];
    let metric = &projectors["metrics"][0];
    assert!(
        text(&metric[metric["type"].as_str().unwrap().to_lowercase().as_str()]["metric"]["name"])
            .contains("lag"),
        "the projector autoscaler follows the consumer lag"
    );
    let partitions: u64 = yaml_documents("deploy/k8s/ingest.yaml")
        .iter()
        .filter(|d| d["kind"].as_str() == Some("Deployment"))
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["env"]
                .as_sequence()
                .unwrap()
                .clone()
        })
        .find(|e| e["name"].as_str() == Some("RATEWIRE_TOPIC_PARTITIONS"))
        .map(|e| text(&e["value"]).parse().unwrap())
        .expect("ingest creates the topic with a partition count");
    assert!(
        projectors["maxReplicas"].as_u64().unwrap() <= partitions,
        "no more projectors than partitions"
    );
}

#[test]
fn the_bench_script_only_wraps_the_typed_harness() {
    let script = read("deploy/bench");
    assert!(
        script.lines().count() <= 300,
        "deploy/bench is {} lines: scenarios belong in tools/src/bench",
        script.lines().count()
    );
    assert!(script.contains("ratewire-bench"));
}
