//! The faults: a schedule drawn from the seed, and each fault's injection
//! and healing. Faults of different kinds overlap (two at a time at most);
//! one piece of each kind is hurt at a time, as a real outage rarely takes
//! two of three Kafka nodes together, and such a double fault is a loss of
//! quorum, not a test of failover.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::stack::{alive, signal, tree, Stack};

/// The parts of the system a fault hurts; one fault per part at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    Api,
    Ingest,
    Projector,
    Kafka,
    Redis,
    Postgres,
}

#[derive(Debug, Clone)]
pub enum Fault {
    /// kill -9, then `deploy/stack restart` after `down`.
    Kill { name: String, down: Duration },
    /// kill -9 of the primary's postmaster; its keeper starts it again.
    KillPostgresPrimary,
    /// SIGSTOP, SIGCONT after `hold`.
    Pause { name: String, hold: Duration },
    /// The primary's keeper, postmaster and backends stopped together.
    PausePostgresPrimary { hold: Duration },
    /// kill -9 of the node leading the partition, restarted after `down`.
    KillLeader { partition: i32, down: Duration },
    /// `CLUSTER FAILOVER` on a replica (the pick-th of those found).
    RedisFailover { pick: usize },
    /// `pg_autoctl perform failover`.
    PostgresFailover,
    /// The Kafka node cut off from its peers for `hold`.
    Cut { broker: String, hold: Duration },
}

impl Fault {
    pub fn part(&self) -> Part {
        match self {
            Fault::Kill { name, .. } | Fault::Pause { name, .. } => part_of(name),
            Fault::KillPostgresPrimary
            | Fault::PausePostgresPrimary { .. }
            | Fault::PostgresFailover => Part::Postgres,
            Fault::KillLeader { .. } | Fault::Cut { .. } => Part::Kafka,
            Fault::RedisFailover { .. } => Part::Redis,
        }
    }

    /// The fault's kind, as the report counts them.
    pub fn kind(&self) -> String {
        let what = |name: &str| {
            name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-')
                .to_owned()
        };
        match self {
            Fault::Kill { name, .. } => format!("kill -9 {}", what(name)),
            Fault::Pause { name, .. } => format!("pause {}", what(name)),
            Fault::KillPostgresPrimary => "kill -9 postgres primary".into(),
            Fault::PausePostgresPrimary { .. } => "pause postgres primary".into(),
            Fault::KillLeader { .. } => "kill -9 partition leader".into(),
            Fault::RedisFailover { .. } => "redis failover".into(),
            Fault::PostgresFailover => "postgres failover".into(),
            Fault::Cut { .. } => "broker cut off".into(),
        }
    }
}

fn part_of(name: &str) -> Part {
    match name.split('-').next().unwrap_or_default() {
        "api" => Part::Api,
        "ingest" => Part::Ingest,
        "projector" => Part::Projector,
        "broker" => Part::Kafka,
        "redis" => Part::Redis,
        _ => Part::Postgres,
    }
}

#[derive(Debug, Clone)]
pub struct Planned {
    /// After the start of the run.
    pub at: Duration,
    pub fault: Fault,
}

/// The schedule: a fault every 5 to 15 s from `from` to `until`.
pub fn plan(
    seed: u64,
    stack: &Stack,
    from: Duration,
    until: Duration,
    partitions: i32,
) -> Vec<Planned> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut planned = Vec::new();
    let mut at = from;
    let pick = |rng: &mut StdRng, names: &[String]| names[rng.gen_range(0..names.len())].clone();
    let of = |prefix: &str| -> Vec<String> {
        stack
            .processes
            .iter()
            .filter(|n| n.starts_with(prefix))
            .cloned()
            .collect()
    };
    let brokers: Vec<String> = stack.brokers.iter().map(|(n, _)| n.clone()).collect();
    let redis: Vec<String> = stack.redis.iter().map(|(n, _)| n.clone()).collect();
    let (apis, ingests, projectors) = (of("api-"), of("ingest-"), of("projector"));
    while at < until {
        let hold = Duration::from_secs(rng.gen_range(2..=20));
        let down = Duration::from_secs(rng.gen_range(1..=10));
        // Kinds 0-4 kill, 6-10 pause, one of these by turn.
        let targets = [&apis, &ingests, &projectors, &brokers, &redis];
        let fault = match rng.gen_range(0..15) {
            kind @ 0..=4 => Fault::Kill {
                name: pick(&mut rng, targets[kind]),
                down,
            },
            5 => Fault::KillPostgresPrimary,
            kind @ 6..=10 => Fault::Pause {
                name: pick(&mut rng, targets[kind - 6]),
                hold,
            },
            11 => Fault::PausePostgresPrimary { hold },
            12 => Fault::KillLeader {
                partition: rng.gen_range(0..partitions.max(1)),
                down,
            },
            13 => match rng.gen_range(0..3) {
                0 => Fault::RedisFailover {
                    pick: rng.gen_range(0..16),
                },
                1 => Fault::PostgresFailover,
                _ => Fault::Cut {
                    broker: pick(&mut rng, &brokers),
                    hold,
                },
            },
            _ => Fault::Cut {
                broker: pick(&mut rng, &brokers),
                hold,
            },
        };
        planned.push(Planned { at, fault });
        at += Duration::from_secs(rng.gen_range(5..=15));
    }
    planned
}

/// What became of one fault.
#[derive(Debug, Clone)]
pub struct Done {
    pub fault: Fault,
    /// The piece hurt, as found when the fault began.
    pub target: String,
    pub started: Instant,
    /// When it was healed: restarted and serving, resumed, reconnected,
    /// or the failover complete.
    pub healed: Option<Instant>,
    pub problem: Option<String>,
}

/// The iptables rules in force, so that every way out removes them.
#[derive(Clone, Default)]
pub struct Rules(Arc<Mutex<Vec<Vec<String>>>>);

impl Rules {
    fn add(&self, rule: Vec<String>) -> anyhow::Result<()> {
        iptables("-A", &rule)?;
        self.0.lock().expect("rules").push(rule);
        Ok(())
    }

    /// Removes every rule added.
    pub fn clear(&self) {
        let rules: Vec<Vec<String>> = std::mem::take(&mut *self.0.lock().expect("rules"));
        for rule in rules {
            if let Err(e) = iptables("-D", &rule) {
                eprintln!("nemesis: removing an iptables rule: {e:#}");
            }
        }
    }
}

fn iptables(action: &str, rule: &[String]) -> anyhow::Result<()> {
    let status = std::process::Command::new("iptables")
        .arg(action)
        .args(rule)
        .status()
        .context("iptables")?;
    if !status.success() {
        bail!("iptables {action} {} failed", rule.join(" "));
    }
    Ok(())
}

pub struct Nemesis {
    pub stack: Stack,
    pub topic: String,
    pub rules: Rules,
    /// Cancelled on Ctrl-C: every fault heals at once.
    pub stop: CancellationToken,
}

impl Nemesis {
    /// Runs the schedule from `start`; each fault is healed before this
    /// returns, also when `stop` is cancelled.
    pub async fn run(
        self: Arc<Self>,
        planned: Vec<Planned>,
        start: Instant,
        until: Duration,
    ) -> Vec<Done> {
        let parts: HashMap<Part, Arc<tokio::sync::Mutex<()>>> = [
            Part::Api,
            Part::Ingest,
            Part::Projector,
            Part::Kafka,
            Part::Redis,
            Part::Postgres,
        ]
        .into_iter()
        .map(|p| (p, Arc::default()))
        .collect();
        let together = Arc::new(Semaphore::new(2));
        let mut tasks = Vec::new();
        for Planned { at, fault } in planned {
            let (nemesis, part, together) = (
                Arc::clone(&self),
                Arc::clone(&parts[&fault.part()]),
                Arc::clone(&together),
            );
            tasks.push(tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep_until((start + at).into()) => {}
                    _ = nemesis.stop.cancelled() => return None,
                }
                let _part = part.lock().await;
                let _slot = together.acquire().await.ok()?;
                // A fault held up past the end of the window (its part was
                // hurt, a slow restart) is left out, so a run's length
                // stays what was asked.
                if nemesis.stop.is_cancelled() || start.elapsed() > until {
                    return None;
                }
                Some(nemesis.inject(fault).await)
            }));
        }
        let mut done = Vec::new();
        for task in tasks {
            if let Ok(Some(d)) = task.await {
                done.push(d);
            }
        }
        done.sort_by_key(|d| d.started);
        done
    }

    /// Waits `hold`, or less when stopped.
    async fn hold(&self, hold: Duration) {
        tokio::select! {
            _ = tokio::time::sleep(hold) => {}
            _ = self.stop.cancelled() => {}
        }
    }

    async fn inject(&self, fault: Fault) -> Done {
        let started = Instant::now();
        let mut target = String::new();
        let mut outcome = self.hurt_and_heal(&fault, &mut target).await;
        // A part is healed once it has its shape again; hurting it before
        // would be a double fault. A Kafka node back must catch up, or
        // partitions fall short of their in-sync replicas. An old Postgres
        // primary resumed after a failover rejoins as a standby only after
        // a rewind; pausing the new primary before that leaves no node. An
        // API or ingest process back serves only once the balancer's checks
        // see it; killing the other before that leaves the balancer none.
        let stack = &self.stack;
        if outcome.is_ok() {
            outcome = match (&fault, fault.part()) {
                (_, Part::Kafka) => {
                    self.wait_for(
                        "every partition's replicas in sync",
                        Duration::from_secs(180),
                        || stack.in_sync(&self.topic),
                    )
                    .await
                }
                (_, Part::Postgres) => {
                    self.wait_for(
                        "a Postgres primary with a streaming standby",
                        Duration::from_secs(180),
                        || stack.pg_whole(),
                    )
                    .await
                }
                (
                    Fault::Kill { name, .. } | Fault::Pause { name, .. },
                    Part::Api | Part::Ingest,
                ) => {
                    self.wait_for("the balancer to see it up", Duration::from_secs(30), || {
                        stack.balanced(name)
                    })
                    .await
                }
                _ => Ok(()),
            };
        }
        let (healed, problem) = match outcome {
            Ok(()) => (Some(Instant::now()), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        println!(
            "nemesis: {:>6.1} s  {} {}{}",
            started.elapsed().as_secs_f64(),
            fault.kind(),
            target,
            problem
                .as_ref()
                .map(|p| format!(": {p}"))
                .unwrap_or_default()
        );
        Done {
            fault,
            target,
            started,
            healed,
            problem,
        }
    }

    async fn hurt_and_heal(&self, fault: &Fault, target: &mut String) -> anyhow::Result<()> {
        let stack = &self.stack;
        match fault {
            Fault::Kill { name, down } => {
                *target = name.clone();
                self.kill_and_restart(name, *down).await
            }
            Fault::KillLeader { partition, down } => {
                let leader = stack.partition_leader(&self.topic, *partition).await?;
                let name = format!("broker-{leader}");
                *target = format!("{name} (leading partition {partition})");
                self.kill_and_restart(&name, *down).await
            }
            Fault::Pause { name, hold } => {
                *target = name.clone();
                let pid = stack
                    .pid(name)
                    .with_context(|| format!("{name} is not running"))?;
                signal(&[pid], libc::SIGSTOP);
                self.hold(*hold).await;
                signal(&[pid], libc::SIGCONT);
                Ok(())
            }
            Fault::KillPostgresPrimary => {
                let node = stack
                    .pg_primary()
                    .await
                    .context("no Postgres primary answers")?;
                *target = node.name.clone();
                let postmaster = stack.postmaster(&node).context("no postmaster")?;
                signal(&[postmaster], libc::SIGKILL);
                // The keeper starts it again; healed once a primary answers.
                self.wait_for("a Postgres primary", Duration::from_secs(90), || async {
                    stack.pg_primary().await.is_some()
                })
                .await
            }
            Fault::PausePostgresPrimary { hold } => {
                let node = stack
                    .pg_primary()
                    .await
                    .context("no Postgres primary answers")?;
                *target = node.name.clone();
                let keeper = stack.pid(&node.name).context("its keeper is not running")?;
                let mut stopped = tree(keeper);
                if let Some(postmaster) = stack.postmaster(&node) {
                    stopped.extend(tree(postmaster));
                }
                signal(&stopped, libc::SIGSTOP);
                self.hold(*hold).await;
                // Anything forked meanwhile belongs to the tree too.
                stopped.extend(tree(keeper));
                signal(&stopped, libc::SIGCONT);
                Ok(())
            }
            Fault::RedisFailover { pick } => {
                let (_, replicas) = stack.redis_roles().await;
                anyhow::ensure!(!replicas.is_empty(), "no Redis replica answers");
                let (name, port) = replicas[pick % replicas.len()].clone();
                *target = name.clone();
                stack.redis_failover(port).await?;
                self.wait_for(
                    "the replica to take over",
                    Duration::from_secs(30),
                    || async { stack.redis_roles().await.0.iter().any(|(n, _)| *n == name) },
                )
                .await
            }
            Fault::PostgresFailover => {
                *target = stack
                    .pg_primary()
                    .await
                    .map(|n| format!("from {}", n.name))
                    .unwrap_or_default();
                stack
                    .script(&["pg-failover"], Duration::from_secs(120))
                    .await
            }
            Fault::Cut { broker, hold } => {
                *target = broker.clone();
                self.cut(broker, *hold).await
            }
        }
    }

    async fn kill_and_restart(&self, name: &str, down: Duration) -> anyhow::Result<()> {
        let pid = self
            .stack
            .pid(name)
            .with_context(|| format!("{name} is not running"))?;
        signal(&[pid], libc::SIGKILL);
        for _ in 0..100 {
            if !alive(pid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.hold(down).await;
        self.stack.restart(name).await
    }

    async fn wait_for<F, Fut>(&self, what: &str, limit: Duration, mut done: F) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if done().await {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("waited {limit:?} for {what}")
    }

    /// Drops, on loopback, what the node sends its peers and what they
    /// send it, for `hold`: its clients still reach it. Each node runs in
    /// a cgroup of its own from its start (deploy/stack), so that every
    /// one of its sockets is known by it.
    async fn cut(&self, broker: &str, hold: Duration) -> anyhow::Result<()> {
        let stack = &self.stack;
        let group = |name: &str| format!("{}-{name}", stack.tag);
        for (name, _) in &stack.brokers {
            let pid = stack
                .pid(name)
                .with_context(|| format!("{name} is not running"))?;
            let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            anyhow::ensure!(
                cgroup.lines().any(|l| l == format!("0::/{}", group(name))),
                "{name} runs in no cgroup of its own (cgroup2 missing, or not root when it started)"
            );
        }
        let ports = |name: &str| -> String {
            stack
                .brokers
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, p)| format!("{p},{}", p + 1))
                .collect()
        };
        let rule = |from: &str, to: &str| -> Vec<String> {
            [
                "OUTPUT",
                "-o",
                "lo",
                "-p",
                "tcp",
                "-m",
                "cgroup",
                "--path",
                &group(from),
                "-m",
                "multiport",
                "--dports",
                &ports(to),
                "-m",
                "comment",
                "--comment",
                &stack.tag,
                "-j",
                "DROP",
            ]
            .map(str::to_owned)
            .to_vec()
        };
        let added = (|| {
            for (peer, _) in stack.brokers.iter().filter(|(n, _)| n != broker) {
                self.rules.add(rule(broker, peer))?;
                self.rules.add(rule(peer, broker))?;
            }
            Ok::<_, anyhow::Error>(())
        })();
        if added.is_ok() {
            self.hold(hold).await;
        }
        self.rules.clear();
        added
    }
}
