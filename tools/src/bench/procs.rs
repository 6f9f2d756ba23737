//! The processes a scenario runs, and what /proc says of them: a stack of
//! their own (their own broker, database and Redis prefix), started with
//! the bench's settings, each logging to a file of the bench directory,
//! stopped when the scenario ends however it ends.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::{say, Settings};
use crate::feed::client::IngestClient;

pub const DATABASE: &str = "ratewire_bench";
pub const PREFIX: &str = "rwbench:";
pub const TOPIC: &str = "ratewire.bench.v1";
pub const BROKER: u16 = 19092;
pub const API: u16 = 18080;
pub const INGEST: u16 = 18081;
pub const PROJECTOR: u16 = 18082;
pub const API_OPERATOR: u16 = 19080;
pub const INGEST_OPERATOR: u16 = 19081;
pub const BASELINE: u16 = 18099;
pub const ADMIN_TOKEN: &str = "bench-operator-token-0b8e41c7d2f95a63";
pub const POSTGRES: &str = "postgres://postgres@127.0.0.1:5432";
/// A plan large enough never to refuse during a run, beside the usual ones.
pub const PLANS: &str = "bench=1000000000/1000000000000/100000/100000,free=60/10000,pro=1000/1000000,enterprise=100000/1000000000,anonymous=10/1000";

/// The bench stack's ingest, as its publishers and its operator see it.
pub fn ingest_client() -> anyhow::Result<IngestClient> {
    IngestClient::new(
        &format!("http://127.0.0.1:{INGEST}"),
        &format!("http://127.0.0.1:{INGEST_OPERATOR}"),
        Some(ADMIN_TOKEN),
    )
}

/// The settings every process of the bench's stack is started with.
pub fn stack_env() -> Vec<(String, String)> {
    [
        ("RATEWIRE_DATABASE_URL", format!("{POSTGRES}/{DATABASE}")),
        ("RATEWIRE_REDIS_PREFIX", PREFIX.into()),
        ("RATEWIRE_TOPIC", TOPIC.into()),
        ("RATEWIRE_KAFKA_BROKERS", format!("127.0.0.1:{BROKER}")),
        ("RATEWIRE_API_LISTEN", format!("127.0.0.1:{API}")),
        ("RATEWIRE_INGEST_LISTEN", format!("127.0.0.1:{INGEST}")),
        (
            "RATEWIRE_API_OPERATOR_LISTEN",
            format!("127.0.0.1:{API_OPERATOR}"),
        ),
        (
            "RATEWIRE_INGEST_OPERATOR_LISTEN",
            format!("127.0.0.1:{INGEST_OPERATOR}"),
        ),
        (
            "RATEWIRE_PROJECTOR_LISTEN",
            format!("127.0.0.1:{PROJECTOR}"),
        ),
        ("RATEWIRE_ADMIN_TOKEN", ADMIN_TOKEN.into()),
        // A build from before the plans' fourth part (alerts) takes them
        // without it (`deploy/bench reads` against an older checkout).
        (
            "RATEWIRE_PLANS",
            std::env::var("RATEWIRE_BENCH_PLANS").unwrap_or_else(|_| PLANS.into()),
        ),
        ("RATEWIRE_USAGE_SYNC_SECS", "60".into()),
        (
            "RUST_LOG",
            std::env::var("RATEWIRE_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        ),
        ("RATEWIRE_INGEST_URL", format!("http://127.0.0.1:{INGEST}")),
        (
            "RATEWIRE_INGEST_OPERATOR_URL",
            format!("http://127.0.0.1:{INGEST_OPERATOR}"),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The running processes of a scenario, by name; all stopped on drop.
pub struct Procs {
    pub settings: Settings,
    pub dir: PathBuf,
    env: Vec<(String, String)>,
    children: BTreeMap<String, Child>,
}

impl Procs {
    /// A fresh bench directory, a fresh database and Redis prefix, and
    /// the bench's settings (with `extra` over them).
    pub async fn new(settings: &Settings, extra: &[(&str, String)]) -> anyhow::Result<Self> {
        let dir = settings.dir();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut env = stack_env();
        for (key, value) in extra {
            env.retain(|(k, _)| k != key);
            env.push(((*key).to_owned(), value.clone()));
        }
        fresh_database(DATABASE).await?;
        clear_redis(PREFIX).await?;
        Ok(Self {
            settings: settings.clone(),
            dir,
            env,
            children: BTreeMap::new(),
        })
    }

    /// Processes beside the running local stack (`deploy/stack up`), on
    /// its data, with `env` only.
    pub fn beside_local_stack(settings: &Settings, env: &[(&str, String)]) -> anyhow::Result<Self> {
        let dir = settings.dir();
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            settings: settings.clone(),
            dir,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            children: BTreeMap::new(),
        })
    }

    /// A command with the stack's settings, `extra` over them.
    pub fn command(&self, program: &Path, extra: &[(&str, String)]) -> Command {
        let mut command = Command::new(program);
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command.envs(extra.iter().map(|(k, v)| (k, v)));
        command
    }

    /// Starts `program` as `name` in the background, its output appended
    /// to `name.log` in the bench directory.
    pub fn start(
        &mut self,
        name: &str,
        program: &Path,
        args: &[&str],
        extra: &[(&str, String)],
    ) -> anyhow::Result<u32> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))?;
        let child = self
            .command(program, extra)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let pid = child.id();
        self.children.insert(name.to_owned(), child);
        Ok(pid)
    }

    pub fn pid(&self, name: &str) -> u32 {
        self.children.get(name).map_or(0, Child::id)
    }

    /// Stops `name` (SIGTERM) and waits for it to end.
    pub fn stop(&mut self, name: &str) {
        if let Some(mut child) = self.children.remove(name) {
            terminate(&mut child);
        }
    }

    /// Kills `name` with SIGKILL (a crash: it says goodbye to no one).
    pub fn kill(&mut self, name: &str) {
        if let Some(mut child) = self.children.remove(name) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The bench's own Apache Kafka broker (`deploy/stack kafka-exec`) on
    /// an empty log, once it takes connections.
    pub async fn start_broker(&mut self) -> anyhow::Result<()> {
        let data = self.dir.join("broker");
        let stack = self.settings.root.join("deploy/stack");
        let (port, controller) = (BROKER.to_string(), (BROKER + 1).to_string());
        let data = data.to_string_lossy().into_owned();
        self.start(
            "broker",
            &stack,
            &["kafka-exec", &data, &port, &controller],
            &[],
        )?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if tokio::net::TcpStream::connect(("127.0.0.1", BROKER))
                .await
                .is_ok()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "the broker did not start; see {}/broker.log",
            self.dir.display()
        )
    }

    /// Broker, ingest, projector and API, each ready.
    pub async fn start_stack(&mut self) -> anyhow::Result<()> {
        say("starting a stack of its own (its own Kafka broker, database and Redis prefix)");
        self.start_broker().await?;
        let bin = |name: &str| self.settings.bin(name);
        let (ingest, projector, api) = (
            bin("ratewire-ingest"),
            bin("ratewire-projector"),
            bin("ratewire-api"),
        );
        self.start("ingest", &ingest, &[], &[])?;
        wait_url(&format!("http://127.0.0.1:{INGEST}/readyz")).await?;
        self.start("projector", &projector, &[], &[])?;
        // Answers asked to be signed are (the signed /convert row).
        let key = self.dir.join("signing-key.pem");
        let made = Command::new("openssl")
            .args(["genpkey", "-algorithm", "ed25519", "-out"])
            .arg(&key)
            .status()
            .context("making a signing key with openssl")?;
        anyhow::ensure!(made.success(), "openssl genpkey failed");
        let signing = [("RATEWIRE_SIGNING_KEY_FILE", key.display().to_string())];
        self.start("api", &api, &[], &signing)?;
        wait_url(&format!("http://127.0.0.1:{PROJECTOR}/readyz")).await?;
        wait_url(&format!("http://127.0.0.1:{API}/readyz")).await
    }

    /// Runs `program` to its end with the stack's settings; its standard
    /// output, its errors appended to `log` in the bench directory.
    pub fn run(&self, program: &Path, args: &[&str], log: &str) -> anyhow::Result<String> {
        let errors = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(log))?;
        let output = self
            .command(program, &[])
            .args(args)
            .stdin(Stdio::null())
            .stderr(errors)
            .output()
            .with_context(|| format!("running {}", program.display()))?;
        if !output.status.success() {
            bail!(
                "{} {} failed ({}); see {}/{log}",
                program.display(),
                args.join(" "),
                output.status,
                self.dir.display()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// A key of `plan` from the API's command line.
    pub fn api_key(&self, name: &str, plan: &str) -> anyhow::Result<String> {
        let out = self.run(
            &self.settings.bin("ratewire-api"),
            &["keys", "create", "--name", name, "--plan", plan],
            "keys.log",
        )?;
        let created: serde_json::Value = serde_json::from_str(&out).context("the created key")?;
        created["key"]
            .as_str()
            .map(str::to_owned)
            .context("no key in the answer")
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        // The broker last: the others would wait for it while stopping.
        let broker = self.children.remove("broker");
        for mut child in std::mem::take(&mut self.children)
            .into_values()
            .chain(broker)
        {
            terminate(&mut child);
        }
    }
}

fn terminate(child: &mut Child) {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// How many partitions the projector whose health listener is on `port`
/// reads now, as its /readyz says (`None`: no answer).
pub async fn partitions_read(http: &reqwest::Client, port: u16) -> Option<usize> {
    let answer = http
        .get(format!("http://127.0.0.1:{port}/readyz"))
        .send()
        .await
        .ok()?;
    let ready: serde_json::Value = answer.json().await.ok()?;
    Some(ready["partitions"].as_array()?.len())
}

/// Drops and creates `name` on the local Postgres.
pub async fn fresh_database(name: &str) -> anyhow::Result<()> {
    let admin = sqlx::PgPool::connect(&format!("{POSTGRES}/postgres")).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&admin)
        .await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin)
        .await?;
    admin.close().await;
    Ok(())
}

/// A pool on the bench's database.
pub async fn database(name: &str) -> anyhow::Result<sqlx::PgPool> {
    Ok(sqlx::PgPool::connect(&format!("{POSTGRES}/{name}")).await?)
}

/// Deletes every key under `prefix` on the local Redis.
pub async fn clear_redis(prefix: &str) -> anyhow::Result<()> {
    let client = redis::Client::open("redis://127.0.0.1:6379")?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await?;
    for chunk in keys.chunks(1000) {
        let _: () = redis::cmd("DEL").arg(chunk).query_async(&mut conn).await?;
    }
    Ok(())
}

/// Waits until `url` answers 2xx (a minute at most).
pub async fn wait_url(url: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if http
            .get(url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("{url} did not answer")
}

/// The value of `name` on the Prometheus page at `url`, as printed.
pub async fn metric(url: &str, name: &str) -> anyhow::Result<Option<String>> {
    let page = reqwest::get(url).await?.text().await?;
    let prefix = format!("{name} ");
    Ok(page
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().to_owned()))
}

/// Waits until the API at `api` serves bank 1's board to `key`.
pub async fn wait_served(api: &str, key: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let answer = http
            .get(format!("{api}/api/v1/rates?bankId=1"))
            .header("x-api-key", key)
            .send()
            .await?;
        if answer.text().await?.contains("lastRatesUpdatedAt") {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("bank 1's board was not served within a minute")
}

/// A process's resident memory, in MB.
pub fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// A process's name and CPU time so far (user + system), in clock ticks.
fn ticks(pid: u32) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_owned();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13
    // after the name.
    let used = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((name, used))
}

const TICKS_PER_SECOND: f64 = 100.0;

/// The CPU the processes `pids` use together over the next `seconds`, as
/// a % of one core.
pub async fn cpu_pct(seconds: u64, pids: &[u32]) -> f64 {
    let total = |pids: &[u32]| {
        pids.iter()
            .filter_map(|p| ticks(*p))
            .map(|(_, t)| t)
            .sum::<u64>()
    };
    let before = total(pids);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let after = total(pids);
    100.0 * after.saturating_sub(before) as f64 / TICKS_PER_SECOND / seconds as f64
}

/// Every process's name and CPU time, by pid.
pub fn all_ticks() -> BTreeMap<u32, (String, u64)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, ticks(pid)?)))
        .collect()
}

/// Each program's share of the whole machine between two snapshots
/// `seconds` apart (processes of one name summed, new ones counted whole).
pub fn cpu_shares(
    before: &BTreeMap<u32, (String, u64)>,
    after: &BTreeMap<u32, (String, u64)>,
    seconds: u64,
    cores: usize,
) -> BTreeMap<String, f64> {
    let mut used: BTreeMap<String, u64> = BTreeMap::new();
    for (pid, (name, now)) in after {
        let then = before.get(pid).map_or(0, |(_, t)| *t);
        *used.entry(name.clone()).or_default() += now.saturating_sub(then);
    }
    let whole = TICKS_PER_SECOND * cores as f64 * seconds as f64;
    used.into_iter()
        .filter(|(_, t)| *t > 0)
        .map(|(name, t)| (name, 100.0 * t as f64 / whole))
        .collect()
}

/// The peak resident memory of a process, sampled every 200 ms from now
/// until [`Sampler::peak`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<f64>,
}

impl Sampler {
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut peak = 0f64;
            while !stopped.load(Ordering::Relaxed) {
                peak = peak.max(rss_mb(pid));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            peak
        });
        Self { stop, task }
    }

    pub async fn peak(self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or(0.0)
    }
}
