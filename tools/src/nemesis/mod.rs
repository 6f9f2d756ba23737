//! `ratewire-nemesis` (`deploy/stack nemesis`): the cluster topology under
//! mixed faults on a seeded schedule, with publishers, readers and alert
//! receivers at work, then a check of everything they were told against
//! what the system shows. docs/reliability.md says what each invariant
//! means for a user and holds a long run's report.
//!
//! - [`publish`], [`read`], [`receive`]: the users;
//! - [`stack`], [`faults`]: the pieces and what is done to them;
//! - [`check`], [`report`]: the invariants and the report.

pub mod check;
pub mod faults;
pub mod publish;
pub mod read;
pub mod receive;
pub mod report;
pub mod stack;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::Rng;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::feed::client::{new_bank, IngestClient};
use check::{Api, Violations};
use faults::Nemesis;
use publish::{Bank, Publisher, Pushes, CURRENCIES};
use read::{Reader, Reads};
use receive::Receiver;
use stack::Stack;

#[derive(clap::Args, Debug)]
pub struct Settings {
    /// How long faults are injected.
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// The schedule's seed (random when not given; the report names it).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Banks publishing, each with its own publisher.
    #[arg(long, default_value_t = 6)]
    pub banks: usize,
    /// Each bank publishes a board this often (the next once the last is accepted).
    #[arg(long, default_value_t = 500)]
    pub interval_ms: u64,
    /// Readers through the balancer, each asking again 40 ms after an answer.
    #[arg(long, default_value_t = 4)]
    pub readers: usize,
    /// Also write the report here (Markdown).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The rest is what `deploy/stack nemesis` passes.
    #[arg(long, env = "RATEWIRE_NEMESIS_STACK", hide = true)]
    pub stack_script: PathBuf,
    #[arg(long, env = "RATEWIRE_NEMESIS_STACK_DIR", hide = true)]
    pub stack_dir: PathBuf,
    #[arg(long, env = "RATEWIRE_NEMESIS_TAG", hide = true)]
    pub tag: String,
    #[arg(long, env = "RATEWIRE_NEMESIS_API", hide = true)]
    pub api: String,
    #[arg(long, env = "RATEWIRE_NEMESIS_INGEST", hide = true)]
    pub ingest: String,
    #[arg(long, env = "RATEWIRE_NEMESIS_INGEST_OPERATOR", hide = true)]
    pub ingest_operator: String,
    #[arg(long, env = "RATEWIRE_NEMESIS_BROKERS", hide = true)]
    pub brokers: String,
    #[arg(long, env = "RATEWIRE_NEMESIS_REDIS", hide = true)]
    pub redis: String,
    #[arg(long, env = "RATEWIRE_NEMESIS_PROCESSES", hide = true)]
    pub processes: String,
    #[arg(long, env = "RATEWIRE_NEMESIS_POSTGRES", hide = true)]
    pub postgres: String,
    #[arg(long, env = "RATEWIRE_NEMESIS_BIN", hide = true)]
    pub bin: PathBuf,
    #[arg(long, env = "RATEWIRE_ADMIN_TOKEN", hide = true)]
    pub admin_token: String,
    #[arg(long, env = "RATEWIRE_KAFKA_TOPIC", default_value = ratewire_proto::topic::DEFAULT_TOPIC, hide = true)]
    pub topic: String,
    #[arg(
        long,
        env = "RATEWIRE_TOPIC_PARTITIONS",
        default_value_t = 6,
        hide = true
    )]
    pub partitions: i32,
}

/// An alert the nemesis made: `threshold` in hundredths.
#[derive(Debug, Clone)]
pub struct Alert {
    pub id: String,
    pub bank: i64,
    pub currency: String,
    pub field: String,
    pub above: bool,
    pub threshold: i64,
}

/// Before the first fault: every publisher has had boards accepted and
/// every reader's key is known to the API's caches.
const WARM_UP: Duration = Duration::from_secs(15);
/// Publishing goes on this long after the last fault is healed.
const TAIL: Duration = Duration::from_secs(10);
/// How long the checker waits for the system to settle, and for calls.
const SETTLE: Duration = Duration::from_secs(120);

/// Runs the nemesis; Ok(true) when no invariant was violated.
pub async fn run(settings: Settings) -> anyhow::Result<bool> {
    let seed = settings
        .seed
        .unwrap_or_else(|| rand::thread_rng().gen_range(1..1_000_000));
    println!(
        "nemesis: seed {seed}, {} minutes of faults",
        settings.minutes
    );
    let stack = Stack {
        script: settings.stack_script.clone(),
        dir: settings.stack_dir.clone(),
        tag: settings.tag.clone(),
        brokers: stack::named_ports(&settings.brokers)?,
        redis: stack::named_ports(&settings.redis)?,
        processes: settings
            .processes
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        postgres: stack::pg_nodes(&settings.postgres)?,
        bin: settings.bin.clone(),
    };
    // A connection idle for 5 s is dropped here before the balancer drops
    // it at 10 s (timeout http-keep-alive): a request sent on a
    // connection the other end is closing gets no answer.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .pool_idle_timeout(Duration::from_secs(5))
        .build()?;
    let stop_all = CancellationToken::new();
    let receiver = Receiver::start(stop_all.clone()).await?;
    let world = World::set_up(&settings, &stack, &http, &receiver).await?;
    println!(
        "nemesis: {} banks, {} alerts; receiver on {}",
        world.banks.len(),
        world.alerts.len(),
        receiver.address
    );

    // The users.
    let (pushes, reads): (Pushes, Reads) = Default::default();
    let (stop_publishing, give_up, stop_reading) = (
        CancellationToken::new(),
        CancellationToken::new(),
        CancellationToken::new(),
    );
    let publisher = Arc::new(Publisher {
        http: http.clone(),
        ingest: settings.ingest.clone(),
        interval: Duration::from_millis(settings.interval_ms),
    });
    let mut publishers = Vec::new();
    for bank in world.banks.clone() {
        let (publisher, pushes, stop, give_up) = (
            Arc::clone(&publisher),
            Arc::clone(&pushes),
            stop_publishing.clone(),
            give_up.clone(),
        );
        publishers.push(tokio::spawn(async move {
            publisher.run(bank, seed, pushes, stop, give_up).await
        }));
    }
    // Readers begin once every bank has a board (before, /history is 404)...
    let warming = Instant::now();
    while pushes
        .lock()
        .expect("pushes")
        .iter()
        .filter(|p| p.accepted().is_some())
        .map(|p| p.board.bank)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        < world.banks.len()
    {
        anyhow::ensure!(
            warming.elapsed() < Duration::from_secs(60),
            "the banks' first boards were not accepted within a minute"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // And once those boards are folded.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reader = Arc::new(Reader {
        http: http.clone(),
        api: settings.api.clone(),
        key: world.read_key.clone(),
        banks: world.banks.iter().map(|b| b.id).collect(),
        pause: Duration::from_millis(40),
    });
    let mut readers = Vec::new();
    for i in 0..settings.readers {
        let (reader, reads, stop) = (
            Arc::clone(&reader),
            Arc::clone(&reads),
            stop_reading.clone(),
        );
        readers.push(tokio::spawn(async move {
            reader.run(seed.wrapping_add(i as u64), reads, stop).await
        }));
    }

    // The faults, healed at once on Ctrl-C.
    let nemesis = Arc::new(Nemesis {
        stack: stack.clone(),
        topic: settings.topic.clone(),
        rules: Default::default(),
        stop: CancellationToken::new(),
    });
    let interrupted = nemesis.stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("nemesis: interrupted; healing every fault");
            interrupted.cancel();
        }
    });
    let start = Instant::now();
    let window = Duration::from_secs_f64(settings.minutes * 60.0);
    let planned = faults::plan(seed, &stack, WARM_UP, WARM_UP + window, settings.partitions);
    println!("nemesis: {} faults planned", planned.len());
    let planned_count = planned.len();
    let done = Arc::clone(&nemesis)
        .run(planned, start, WARM_UP + window)
        .await;
    if done.len() < planned_count {
        println!(
            "nemesis: {} faults left out, held up past the window by the part they hurt",
            planned_count - done.len()
        );
    }
    nemesis.rules.clear();
    let mut violations = Violations::default();
    for name in stack
        .processes
        .iter()
        .chain(stack.brokers.iter().map(|(n, _)| n))
        .chain(stack.redis.iter().map(|(n, _)| n))
    {
        if stack.pid(name).is_none() {
            if let Err(e) = stack.restart(name).await {
                violations.add(
                    "every piece running after the faults",
                    format!("{name}: {e:#}"),
                );
            }
        }
    }

    // The tail, then the users stop; the board in flight is pushed until
    // accepted or given up.
    tokio::select! {
        _ = tokio::time::sleep(TAIL) => {}
        _ = nemesis.stop.cancelled() => {}
    }
    stop_publishing.cancel();
    stop_reading.cancel();
    let stopped = Instant::now();
    let finishing = futures_util::future::join_all(publishers);
    if tokio::time::timeout(SETTLE, finishing).await.is_err() {
        give_up.cancel();
    }
    futures_util::future::join_all(readers).await;
    let pushes = pushes.lock().expect("pushes").clone();
    let reads = {
        let mut all = reads.lock().expect("reads").clone();
        all.sort_by_key(|r| r.at);
        all
    };
    println!(
        "nemesis: faults over, publishers stopped after {:.1} s; checking",
        stopped.elapsed().as_secs_f64()
    );

    // The checks.
    let api = Api {
        http: http.clone(),
        base: settings.api.clone(),
        key: world.check_key.clone(),
    };
    check::check_answers(&pushes, start, &mut violations);
    let boards = check::accepted(&pushes);
    let settled = check::settle(&api, &boards, SETTLE).await;
    if settled.is_none() {
        violations.add(
            check::FOLD,
            format!(
                "the banks' last boards were not all on /rates {SETTLE:?} after publishing stopped"
            ),
        );
    }
    let expected = check::crossings(&world.alerts, &boards);
    let deliveries = wait_for_calls(&expected, &receiver).await;
    check::check_alerts(&expected, &deliveries, &mut violations);
    let mut copies = 0;
    let steps: [(&str, anyhow::Result<()>); 5] = [
        (
            "the log",
            check::check_log(
                &stack.bootstrap(),
                &settings.topic,
                &boards,
                &mut violations,
            )
            .await
            .map(|n| copies = n),
        ),
        (
            "the boards",
            check::check_boards(&api, &boards, &mut violations).await,
        ),
        (
            "the history",
            check::check_history(&api, &boards, &mut violations).await,
        ),
        (
            "the views",
            check::check_views(&api, &world.banks, &boards, &mut violations).await,
        ),
        (
            "the replay",
            check::check_replay(&stack.bin, &mut violations).await,
        ),
    ];
    for (what, result) in steps {
        if let Err(e) = result {
            violations.add("the checks ran", format!("checking {what}: {e:#}"));
        }
    }
    let reads_ok = reads.iter().filter(|r| r.ok()).count();
    if (reads_ok as f64) < 0.999 * reads.len() as f64 {
        let mut failures: std::collections::BTreeMap<String, usize> = Default::default();
        for r in reads.iter().filter(|r| !r.ok()) {
            *failures.entry(report::failed_read(r)).or_default() += 1;
        }
        for (what, count) in failures {
            violations.add(check::READS, format!("{count} reads: {what}"));
        }
    }

    let mut latencies: Vec<Duration> = pushes
        .iter()
        .flat_map(|p| p.attempts.iter().map(|a| a.took))
        .collect();
    latencies.sort();
    let figures = report::Figures {
        seed,
        planned: planned_count,
        minutes: settings.minutes,
        banks: world.banks.len(),
        pushes: pushes.len(),
        accepted: boards.values().map(Vec::len).sum(),
        attempts: pushes.iter().map(|p| p.attempts.len()).sum(),
        unavailable: pushes
            .iter()
            .flat_map(|p| &p.attempts)
            .filter(|a| matches!(a.answer, publish::Answer::Unavailable { .. }))
            .count(),
        reads: reads.len(),
        reads_ok,
        crossings: expected.len(),
        copies,
        deliveries: deliveries.len(),
        settled,
        push_p99: latencies
            .get(latencies.len() * 99 / 100)
            .copied()
            .unwrap_or_default(),
    };
    let text = report::render(&figures, start, &done, &reads, &pushes, &violations);
    println!("\n{text}");
    if let Some(path) = &settings.report {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    stop_all.cancel();
    world.retire(&settings, &http).await;
    Ok(violations.is_empty())
}

/// Waits until every crossing has been called, or the settling time is
/// up; the calls received.
async fn wait_for_calls(
    expected: &std::collections::BTreeSet<check::Crossing>,
    receiver: &Receiver,
) -> Vec<receive::Delivery> {
    let started = Instant::now();
    loop {
        let deliveries = receiver.deliveries();
        if check::all_called(expected, &deliveries) || started.elapsed() > SETTLE {
            return deliveries;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What the nemesis made before it began: banks, keys, webhooks, alerts.
struct World {
    banks: Vec<Bank>,
    read_key: String,
    check_key: String,
    alerts: Vec<Alert>,
}

impl World {
    /// Deactivates the run's banks, so that a later run on the same stack
    /// is alone among the active banks (its best rates are its own).
    async fn retire(&self, settings: &Settings, http: &reqwest::Client) {
        for bank in &self.banks {
            let answer = http
                .patch(format!(
                    "{}/v1/admin/banks/{}",
                    settings.ingest_operator, bank.id
                ))
                .bearer_auth(&settings.admin_token)
                .json(&json!({"active": false}))
                .send()
                .await;
            if !matches!(&answer, Ok(r) if r.status().is_success()) {
                eprintln!("nemesis: could not deactivate bank {}: {answer:?}", bank.id);
            }
        }
    }

    async fn set_up(
        settings: &Settings,
        stack: &Stack,
        http: &reqwest::Client,
        receiver: &Receiver,
    ) -> anyhow::Result<Self> {
        let ingest = IngestClient::new(
            &settings.ingest,
            &settings.ingest_operator,
            Some(&settings.admin_token),
        )?;
        // Bank codes are unique: a run's own suffix lets runs follow each other on one stack.
        let run = format!("{:05X}", chrono::Utc::now().timestamp_millis() % 0xFFFFF);
        let mut banks = Vec::new();
        for i in 1..=settings.banks {
            let code = format!("NEM{run}{i}");
            let name = format!("Nemesis Bank {run}-{i}");
            let id = ingest
                .register_bank(new_bank(&code, &name, "https://img.test/nemesis.png", &[]))
                .await?;
            let (token, _) = ingest
                .create_token(id)
                .await?
                .context("a publisher token")?;
            banks.push(Bank {
                id,
                code,
                name,
                token,
            });
        }
        let key = |name: &str| -> anyhow::Result<String> {
            let out = std::process::Command::new(stack.bin.join("ratewire-api"))
                .args(["keys", "create", "--name", name, "--plan", "enterprise"])
                .output()
                .context("ratewire-api keys create")?;
            let created: Value = serde_json::from_slice(&out.stdout)
                .with_context(|| format!("a key: {}", String::from_utf8_lossy(&out.stderr)))?;
            created["key"]
                .as_str()
                .map(str::to_owned)
                .context("no key in the answer")
        };
        let (read_key, check_key, alerts_key) = (
            key("nemesis-reads")?,
            key("nemesis-checker")?,
            key("nemesis-alerts")?,
        );
        let mut hooks = Vec::new();
        for path in ["a", "b"] {
            let created: Value = http
                .post(format!("{}/api/v1/webhooks", settings.api))
                .header("x-api-key", &alerts_key)
                .json(&json!({"url": format!("http://{}/{path}", receiver.address), "description": "nemesis"}))
                .send()
                .await?
                .json()
                .await?;
            let secret = created["data"]["secret"]
                .as_str()
                .and_then(ratewire_alerts::Secret::decode)
                .with_context(|| format!("a webhook: {created}"))?;
            receiver.trust(secret);
            hooks.push(
                created["data"]["id"]
                    .as_str()
                    .context("a webhook id")?
                    .to_owned(),
            );
        }
        // Each bank's USD cash buying above its centre, EUR cash selling
        // below its centre and GBP transactional buying above: the
        // publishers' values wander across all three.
        let watched: [(&str, &str, bool, i64); 3] = [
            (CURRENCIES[0].0, "cashBuying", true, 15_000),
            (CURRENCIES[1].0, "cashSelling", false, 17_120),
            (CURRENCIES[2].0, "transactionalBuying", true, 19_010),
        ];
        let mut alerts = Vec::new();
        for bank in &banks {
            for (i, (currency, field, above, threshold)) in watched.iter().enumerate() {
                let created: Value = http
                    .post(format!("{}/api/v1/alerts", settings.api))
                    .header("x-api-key", &alerts_key)
                    .json(&json!({"webhookId": hooks[i % 2], "currencyCode": currency, "field": field,
                                  "condition": if *above { "above" } else { "below" },
                                  "threshold": serde_json::from_str::<Value>(&publish::decimal(*threshold))?,
                                  "bankId": bank.id}))
                    .send()
                    .await?
                    .json()
                    .await?;
                alerts.push(Alert {
                    id: created["data"]["id"]
                        .as_str()
                        .with_context(|| format!("an alert: {created}"))?
                        .to_owned(),
                    bank: bank.id,
                    currency: currency.to_string(),
                    field: field.to_string(),
                    above: *above,
                    threshold: *threshold,
                });
            }
        }
        Ok(Self {
            banks,
            read_key,
            check_key,
            alerts,
        })
    }
}
