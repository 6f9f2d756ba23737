//! The cluster as the nemesis acts on it: the pieces `deploy/stack` started
//! (each known by its pid file), the script that starts one again, and the
//! components' own ways to fail over. Nothing here reads ratewire's state.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use tokio::process::Command;

/// A Postgres node of pg_auto_failover: its keeper's name, data and port.
#[derive(Debug, Clone)]
pub struct PgNode {
    pub name: String,
    pub data: PathBuf,
    pub port: u16,
}

/// One partition in the cluster's metadata: its leader (-1 for none) and
/// how many of its replicas are in sync.
struct Partition {
    id: i32,
    leader: i32,
    in_sync: usize,
    replicas: usize,
}

/// Where everything is, as `deploy/stack nemesis` passes it.
#[derive(Debug, Clone)]
pub struct Stack {
    /// `deploy/stack`, which restarts a piece and fails Postgres over.
    pub script: PathBuf,
    pub dir: PathBuf,
    /// Tags the nemesis's iptables rules and names its brokers' cgroups.
    pub tag: String,
    /// Kafka nodes: name (`broker-N`, node id N) and port (its controller
    /// listens on the next one).
    pub brokers: Vec<(String, u16)>,
    pub redis: Vec<(String, u16)>,
    /// ratewire's processes: api-N, ingest-N, projector, projector-N.
    pub processes: Vec<String>,
    pub postgres: Vec<PgNode>,
    /// Where ratewire's binaries are.
    pub bin: PathBuf,
}

/// `name=port,...` as the script writes it.
pub fn named_ports(list: &str) -> anyhow::Result<Vec<(String, u16)>> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|item| {
            let (name, port) = item.split_once('=').context("name=port")?;
            Ok((name.to_owned(), port.parse().context("a port")?))
        })
        .collect()
}

/// `name=data=port,...`.
pub fn pg_nodes(list: &str) -> anyhow::Result<Vec<PgNode>> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|item| {
            let mut parts = item.split('=');
            let (Some(name), Some(data), Some(port)) = (parts.next(), parts.next(), parts.next())
            else {
                bail!("name=data=port: {item}");
            };
            Ok(PgNode {
                name: name.to_owned(),
                data: data.into(),
                port: port.parse().context("a port")?,
            })
        })
        .collect()
}

impl Stack {
    pub fn bootstrap(&self) -> String {
        let all: Vec<String> = self
            .brokers
            .iter()
            .map(|(_, port)| format!("127.0.0.1:{port}"))
            .collect();
        all.join(",")
    }

    /// The pid of NAME when it runs: its pid file names a live process
    /// running NAME's program (a pid file outlives a kill -9, and the
    /// kernel may give its pid to another process).
    pub fn pid(&self, name: &str) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.dir.join(format!("{name}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let program = match name.split('-').next().unwrap_or_default() {
            "broker" => "kafka",
            "redis" => "redis-server",
            "pg" => "pg_autoctl",
            "haproxy" => "haproxy",
            kind => return self.runs(pid, &format!("ratewire-{kind}")).then_some(pid),
        };
        self.runs(pid, program).then_some(pid)
    }

    fn runs(&self, pid: u32, program: &str) -> bool {
        alive(pid)
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|cmdline| String::from_utf8_lossy(&cmdline).contains(program))
                .unwrap_or(false)
    }

    /// The postmaster of a Postgres node.
    pub fn postmaster(&self, node: &PgNode) -> Option<u32> {
        let text = std::fs::read_to_string(node.data.join("postmaster.pid")).ok()?;
        let pid: u32 = text.lines().next()?.trim().parse().ok()?;
        alive(pid).then_some(pid)
    }

    /// Runs `deploy/stack ARGS` to its end (its output goes to
    /// nemesis-stack.log in the stack's directory).
    pub async fn script(&self, args: &[&str], limit: Duration) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("nemesis-stack.log"))?;
        let mut child = Command::new(&self.script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("deploy/stack")?;
        let status = tokio::time::timeout(limit, child.wait())
            .await
            .with_context(|| format!("deploy/stack {} took over {limit:?}", args.join(" ")))??;
        if !status.success() {
            bail!(
                "deploy/stack {} failed; see {}",
                args.join(" "),
                self.dir.join("nemesis-stack.log").display()
            );
        }
        Ok(())
    }

    /// Starts NAME again and waits until it serves.
    pub async fn restart(&self, name: &str) -> anyhow::Result<()> {
        self.script(&["restart", name], Duration::from_secs(180))
            .await
    }

    /// The node id leading `partition` of `topic`, as the cluster's metadata
    /// says now.
    pub async fn partition_leader(&self, topic: &str, partition: i32) -> anyhow::Result<i32> {
        self.partitions(topic, Duration::from_secs(10))
            .await?
            .into_iter()
            .find(|p| p.id == partition)
            .map(|p| p.leader)
            .filter(|l| *l >= 0)
            .context("the partition has no leader now")
    }

    /// Whether every partition of `topic` has all its replicas in sync, as
    /// the cluster's metadata says now.
    pub async fn in_sync(&self, topic: &str) -> bool {
        match self.partitions(topic, Duration::from_secs(5)).await {
            Ok(partitions) => {
                !partitions.is_empty()
                    && partitions
                        .iter()
                        .all(|p| p.leader >= 0 && p.in_sync == p.replicas)
            }
            Err(_) => false,
        }
    }

    /// `topic`'s partitions as the cluster's metadata says now, asked on a
    /// client of its own (one that lived on would keep a dead node's view).
    async fn partitions(&self, topic: &str, wait: Duration) -> anyhow::Result<Vec<Partition>> {
        let (bootstrap, topic) = (self.bootstrap(), topic.to_owned());
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("log_level", "3")
                .create()?;
            let metadata = consumer.fetch_metadata(Some(&topic), wait)?;
            let topic = metadata.topics().first().context("no such topic")?;
            Ok(topic
                .partitions()
                .iter()
                .map(|p| Partition {
                    id: p.id(),
                    leader: p.leader(),
                    in_sync: p.isr().len(),
                    replicas: p.replicas().len(),
                })
                .collect())
        })
        .await?
    }

    /// One value asked of the Postgres node on `port`, or None when it does
    /// not answer within 2 s.
    async fn pg_ask<T>(&self, port: u16, sql: &'static str) -> Option<T>
    where
        T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Send + Unpin,
    {
        let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        let probe = async {
            let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url).await?;
            sqlx::query_scalar::<_, T>(sql).fetch_one(&mut conn).await
        };
        tokio::time::timeout(Duration::from_secs(2), probe)
            .await
            .ok()?
            .ok()
    }

    /// The Postgres node that is primary now (not in recovery).
    pub async fn pg_primary(&self) -> Option<PgNode> {
        for node in &self.postgres {
            let recovering = self.pg_ask::<bool>(node.port, "SELECT pg_is_in_recovery()");
            if recovering.await == Some(false) {
                return Some(node.clone());
            }
        }
        None
    }

    /// Whether Postgres has its shape again: a primary answers, with a
    /// standby streaming from it.
    pub async fn pg_whole(&self) -> bool {
        let Some(primary) = self.pg_primary().await else {
            return false;
        };
        let streaming = self.pg_ask::<i64>(
            primary.port,
            "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
        );
        streaming.await.is_some_and(|n| n > 0)
    }

    /// Whether the balancer has `name` (api-N or ingest-N) up again in
    /// every backend that lists it, from HAProxy's admin socket. Its checks
    /// see a process back a second or so after it serves.
    pub async fn balanced(&self, name: &str) -> bool {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let ask = async {
            let mut socket = tokio::net::UnixStream::connect(self.dir.join("haproxy.sock")).await?;
            socket.write_all(b"show stat\n").await?;
            let mut out = String::new();
            socket.read_to_string(&mut out).await?;
            Ok::<_, std::io::Error>(out)
        };
        let Ok(Ok(stats)) = tokio::time::timeout(Duration::from_secs(2), ask).await else {
            return false;
        };
        // CSV: the server's name is field 1, its status field 17.
        let rows: Vec<Vec<&str>> = stats
            .lines()
            .map(|line| line.split(',').collect::<Vec<_>>())
            .filter(|fields| fields.len() > 17 && fields[1] == name)
            .collect();
        !rows.is_empty() && rows.iter().all(|fields| fields[17].starts_with("UP"))
    }

    /// Redis nodes by role now: `(primaries, replicas)` as `(name, port)`.
    pub async fn redis_roles(&self) -> (Vec<(String, u16)>, Vec<(String, u16)>) {
        let (mut primaries, mut replicas) = (Vec::new(), Vec::new());
        for (name, port) in &self.redis {
            let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
                continue;
            };
            let asked = async {
                let mut conn = client.get_multiplexed_async_connection().await?;
                redis::cmd("ROLE")
                    .query_async::<redis::Value>(&mut conn)
                    .await
            };
            let Ok(Ok(redis::Value::Array(role))) =
                tokio::time::timeout(Duration::from_secs(2), asked).await
            else {
                continue;
            };
            match role.first() {
                Some(redis::Value::BulkString(r)) if r == b"master" => {
                    primaries.push((name.clone(), *port))
                }
                Some(redis::Value::BulkString(r)) if r == b"slave" => {
                    replicas.push((name.clone(), *port))
                }
                _ => {}
            }
        }
        (primaries, replicas)
    }

    /// Asks the replica on `port` to take over from its primary
    /// (`CLUSTER FAILOVER`, the operators' planned failover).
    pub async fn redis_failover(&self, port: u16) -> anyhow::Result<()> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let _: () = redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query_async(&mut conn)
            .await?;
        Ok(())
    }
}

pub fn alive(pid: u32) -> bool {
    // A zombie (killed, not yet reaped) counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
                .unwrap_or(false)
        })
        .unwrap_or(false)
}

/// PID and every process below it.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
                continue;
            };
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse().ok());
            if let Some(parent) = parent {
                parents.push((child, parent));
            }
        }
    }
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let p = all[i];
        all.extend(parents.iter().filter(|(_, up)| *up == p).map(|(c, _)| *c));
        i += 1;
    }
    all
}

/// Sends `signal` to each pid; those already gone are skipped.
pub fn signal(pids: &[u32], signal: i32) {
    for pid in pids {
        // SAFETY: kill(2) has no memory preconditions. The pids come from
        // pid files checked against their program, or from /proc just
        // before; one reused in between is the only wrong target possible.
        unsafe {
            libc::kill(*pid as i32, signal);
        }
    }
}
