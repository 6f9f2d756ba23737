//! The dashboard and the recording rules hold to the running processes: a
//! real Prometheus (Debian's `prometheus`; `RATEWIRE_PROMETHEUS`, or the one
//! on the PATH) scrapes a stack's three operator listeners every second with
//! deploy/prometheus/rules.yml loaded, while the test makes the traffic each
//! panel shows. Every recording rule's series and every query of
//! deploy/grafana/ratewire.json must then return a number: a panel on a
//! metric no process serves, a label none carries or a rule that records
//! nothing fails here, not on an operator's screen.
//!
//! `files` holds the compose file's and the Kubernetes manifests' scrape
//! settings to the same rules, jobs and ports.

mod files;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use ratewire_e2e::receiver::Receiver;
use ratewire_e2e::repo::{read, root};
use ratewire_e2e::{eventually, free_port, Board, Stack};
use serde_json::Value;

/// How long the queries may take to all return data: a 5-minute rate needs
/// two scrapes of a counter that moved, a histogram's quantile the
/// observations of a folded board; seconds each with 1 s scrapes.
const ALL_DATA_WITHIN: Duration = Duration::from_secs(90);

/// The jobs Prometheus scrapes, named after the processes: the rules and
/// the dashboard group by `job`.
const JOBS: [&str; 3] = ["ratewire-ingest", "ratewire-projector", "ratewire-api"];

/// A query to check: where it comes from (a rule, or a panel and its
/// target), and its PromQL.
#[derive(Debug)]
struct Query {
    from: String,
    expr: String,
}

/// The series each recording rule of deploy/prometheus/rules.yml records.
fn recorded() -> Vec<Query> {
    let rules: serde_norway::Value =
        serde_norway::from_str(&read("deploy/prometheus/rules.yml")).expect("rules.yml is YAML");
    rules["groups"]
        .as_sequence()
        .expect("rule groups")
        .iter()
        .flat_map(|group| group["rules"].as_sequence().cloned().unwrap_or_default())
        .filter_map(|rule| rule["record"].as_str().map(str::to_owned))
        .map(|record| Query {
            from: format!("recording rule {record}"),
            expr: record,
        })
        .collect()
}

/// Every panel's every target in deploy/grafana/ratewire.json, rows'
/// nested panels included.
fn panel_targets(dashboard: &Value) -> Vec<(String, String, Value)> {
    let mut found = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("untitled").to_owned();
            let reference = target["refId"].as_str().unwrap_or("?").to_owned();
            found.push((title, reference, target.clone()));
        }
    }
    found
}

/// Grafana's built-in variables in a query, as Grafana would fill them on
/// a dashboard of the last minutes scraped every second.
const GRAFANA_VARIABLES: [(&str, &str); 4] = [
    ("$__rate_interval", "1m"),
    ("$__interval", "1s"),
    ("$__range", "5m"),
    ("${__range}", "5m"),
];

fn dashboard_queries() -> Vec<Query> {
    let dashboard: Value =
        serde_json::from_str(&read("deploy/grafana/ratewire.json")).expect("the dashboard is JSON");
    panel_targets(&dashboard)
        .into_iter()
        .map(|(title, reference, target)| {
            let mut expr = target["expr"].as_str().expect("a PromQL target").to_owned();
            for (variable, value) in GRAFANA_VARIABLES {
                expr = expr.replace(variable, value);
            }
            assert!(
                !expr.contains('$'),
                "panel {title:?} {reference}: a variable this test cannot fill: {expr}"
            );
            Query {
                from: format!("panel {title:?} {reference}"),
                expr,
            }
        })
        .collect()
}

/// A Prometheus of the test's own, on loopback, its data under the stack's
/// logs; killed when dropped.
struct Prometheus {
    url: String,
    http: reqwest::Client,
    log: PathBuf,
    _process: tokio::process::Child,
}

impl Prometheus {
    /// Scrapes `stack`'s three operator listeners every second and
    /// evaluates the rules every second; returns once it is ready.
    async fn scrape(stack: &Stack) -> Result<Prometheus> {
        let dir = stack.logs.join("prometheus");
        std::fs::create_dir_all(&dir)?;
        let targets = [
            &stack.ingest_operator_url,
            &stack.projector_url,
            &stack.api_operator_url,
        ];
        let jobs: String = JOBS
            .iter()
            .zip(targets)
            .map(|(job, url)| {
                let address = url.trim_start_matches("http://");
                format!(
                    "  - job_name: {job}\n    static_configs:\n      - targets: [\"{address}\"]\n"
                )
            })
            .collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\nscrape_configs:\n{jobs}",
            root().join("deploy/prometheus/rules.yml").display()
        );
        std::fs::write(dir.join("prometheus.yml"), config)?;
        let program = std::env::var_os("RATEWIRE_PROMETHEUS").unwrap_or("prometheus".into());
        let port = free_port();
        let log = dir.join("prometheus.log");
        let output = std::fs::File::create(&log)?;
        let process = tokio::process::Command::new(&program)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => anyhow::anyhow!(
                    "{} not found: install Debian's `prometheus` package, or set \
                     RATEWIRE_PROMETHEUS to a Prometheus binary",
                    program.to_string_lossy()
                ),
                _ => anyhow::Error::from(e).context("starting prometheus"),
            })?;
        let prometheus = Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()?,
            log,
            _process: process,
        };
        let ready = format!("{}/-/ready", prometheus.url);
        eventually("prometheus ready", Duration::from_secs(30), || async {
            let answer = prometheus.http.get(&ready).send().await.ok()?;
            answer.status().is_success().then_some(())
        })
        .await
        .with_context(|| prometheus.log_tail())?;
        Ok(prometheus)
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "the end of {}:\n{}",
            self.log.display(),
            lines[lines.len().saturating_sub(20)..].join("\n")
        )
    }

    /// The instant vector (or scalar) `expr` evaluates to now; an error when
    /// Prometheus refuses the query.
    async fn query(&self, expr: &str) -> Result<Vec<Value>> {
        let answer: Value = self
            .http
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", expr)])
            .send()
            .await?
            .json()
            .await?;
        ensure!(
            answer["status"] == "success",
            "prometheus refused {expr}: {}",
            answer["error"]
        );
        let data = &answer["data"];
        Ok(match data["resultType"].as_str() {
            Some("scalar") => vec![serde_json::json!({"value": data["result"]})],
            _ => data["result"].as_array().cloned().unwrap_or_default(),
        })
    }

    /// Whether `expr` returns at least one sample that is a number: a
    /// quantile of a histogram that observed nothing in its window is NaN,
    /// which a panel draws as nothing.
    async fn has_number(&self, expr: &str) -> Result<bool> {
        Ok(self.query(expr).await?.iter().any(|sample| {
            sample["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(f64::is_finite)
        }))
    }

    /// Waits until each job's target has been scraped successfully.
    async fn wait_targets_up(&self) -> Result<()> {
        let up = eventually("every target up", Duration::from_secs(20), || async {
            let samples = self.query("up").await.ok()?;
            let jobs: Vec<&str> = samples
                .iter()
                .filter(|s| s["value"][1] == "1")
                .filter_map(|s| s["metric"]["job"].as_str())
                .collect();
            JOBS.iter().all(|job| jobs.contains(job)).then_some(())
        })
        .await;
        if up.is_err() {
            let targets: Value = self
                .http
                .get(format!("{}/api/v1/targets", self.url))
                .send()
                .await?
                .json()
                .await?;
            bail!("not every target is up: {targets:#}");
        }
        Ok(())
    }
}

/// What the panels show, made on a stack: a bank's boards, reads, a 404,
/// keyless requests past their limit (429) and webhook calls, one failed
/// and one delivered.
struct Traffic {
    key: String,
    bank: i64,
    token: String,
    round: u32,
    _receiver: Receiver,
}

impl Traffic {
    async fn start(stack: &Stack) -> Result<Traffic> {
        let key = stack.api_key("prometheus").await?;
        let (bank, token) = stack.bank_with_token("PRM", "Prometheus Bank").await?;
        let receiver = Receiver::start().await?;
        receiver.answer_next(&[500]);
        let (webhook, _) = stack.webhook(&key, &receiver.url()).await?;
        for _ in 0..2 {
            let (status, body) = stack.test_call(&key, &webhook).await?;
            ensure!(status == 202, "a test call: {status} {body}");
        }
        receiver.wait_for(2, Duration::from_secs(20)).await?;
        // Callers without a key get ten requests a minute from one address.
        let mut limited = false;
        for _ in 0..30 {
            if stack.get_raw("/api/v1/rates", None).await?.0 == 429 {
                limited = true;
                break;
            }
        }
        ensure!(limited, "keyless requests were never refused with 429");
        Ok(Traffic {
            key,
            bank,
            token,
            round: 0,
            _receiver: receiver,
        })
    }

    /// One more of each, so that every rate moves between scrapes.
    async fn round(&mut self, stack: &Stack) -> Result<()> {
        self.round += 1;
        let buying = format!("155.{}", self.round);
        let board = Board::now()
            .rate("USD", &buying, "158")
            .rate("EUR", "180", "184.5");
        let (status, body) = stack.publish_board(self.bank, &self.token, board).await?;
        ensure!(status == 202, "publishing a board: {status} {body}");
        stack
            .wait_served("the board", self.bank, &self.key, &buying)
            .await?;
        for path in ["/api/v1/rates", "/api/v1/banks", "/api/v1/currencies"] {
            let (status, body) = stack.get(path, Some(&self.key)).await?;
            ensure!(status == 200, "{path}: {status} {body}");
        }
        let (status, _) = stack
            .get("/api/v1/rates?bankId=999", Some(&self.key))
            .await?;
        ensure!(status == 404, "an unknown bank: {status}");
        stack.get_raw("/api/v1/rates", None).await?;
        Ok(())
    }
}

#[tokio::test]
async fn every_panel_and_recording_rule_has_data_from_a_scraped_stack() -> Result<()> {
    let queries: Vec<Query> = recorded().into_iter().chain(dashboard_queries()).collect();
    let stack = Stack::start().await?;
    // Scraping first: a counter's rate and a histogram's quantile need the
    // value before the traffic as well as after.
    let prometheus = Prometheus::scrape(&stack).await?;
    prometheus.wait_targets_up().await?;
    let mut traffic = Traffic::start(&stack).await?;

    let deadline = Instant::now() + ALL_DATA_WITHIN;
    loop {
        traffic.round(&stack).await?;
        let mut empty = Vec::new();
        for query in &queries {
            if !prometheus.has_number(&query.expr).await? {
                empty.push(query);
            }
        }
        if empty.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            let list: Vec<String> = empty
                .iter()
                .map(|q| format!("  {}: {}", q.from, q.expr))
                .collect();
            bail!(
                "after {ALL_DATA_WITHIN:?} of traffic, {} of {} queries still return no number:\n{}\n\
                 prometheus: {}; stack logs: {}",
                empty.len(),
                queries.len(),
                list.join("\n"),
                prometheus.log.display(),
                stack.logs.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Scraped all along, not only once.
    prometheus.wait_targets_up().await?;
    Ok(())
}
