//! A stack's processes and the world they run in: its database, Redis
//! prefix (or Redis of its own), topic and broker, each started, stopped,
//! frozen or cut on purpose; dropped, it removes what it made.
//!
//! - [`builder`]: what a test asks of its stack, and starting it;
//! - [`services`]: the services a stack may own (Redis, broker, the ways
//!   to Postgres), stopped, frozen or cut on purpose;
//! - [`inspect`]: what the stack's Redis holds.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::support::{eventually, free_port};
use crate::{contract, proxy, REDIS};

pub mod builder;
mod cluster;
mod inspect;
mod services;

pub use builder::StackBuilder;

pub struct Stack {
    /// The API's public listener.
    pub api_url: String,
    /// The API's operator listener (keys, `/metrics`).
    pub api_operator_url: String,
    /// Ingest's public listener (board pushes).
    pub ingest_url: String,
    /// Ingest's operator listener (banks, tokens, `/metrics`).
    pub ingest_operator_url: String,
    pub projector_url: String,
    pub database: String,
    pub redis_prefix: String,
    pub topic: String,
    /// The projectors' consumer group: one per test, like the topic, so
    /// one test's members never join another's group on a shared broker.
    pub group: String,
    pub logs: PathBuf,
    pub(crate) http: reqwest::Client,
    pub(super) processes: Vec<(String, Child)>,
    /// Every projector started with the stack or by
    /// [`Stack::start_another_projector`]: its name and health listener.
    projectors: Vec<(String, String)>,
    pub(crate) contract: Option<contract::Contract>,
    /// The port of this stack's own Redis, when it has one.
    own_redis: Option<u16>,
    /// The Redis the processes use.
    pub redis_url: String,
    /// The broker's bootstrap address.
    brokers: String,
    /// The ports (client, controller) of this stack's own broker, when it
    /// has one ([`StackBuilder::own_broker`]).
    own_broker: Option<(u16, u16)>,
    /// This stack's own Kafka cluster, when it has one
    /// ([`StackBuilder::broker_cluster`]).
    cluster: Option<cluster::Cluster>,
    /// What `deploy/stack kafka-exec` is given besides its ports (a secured
    /// listener's properties and SCRAM user).
    broker_env: Vec<(String, String)>,
    /// The environment every ratewire process of this stack gets.
    pub(crate) env: Vec<(String, String)>,
    postgres_proxy: Option<proxy::Proxy>,
    replica_proxy: Option<proxy::Proxy>,
    /// The harness's own key for its waits on the API, made when first
    /// needed.
    pub(crate) harness_key: tokio::sync::OnceCell<String>,
    /// The Postgres this harness reads and sets up directly (the processes
    /// may reach it through a proxy).
    pub(crate) postgres: String,
    /// This stack's own cluster, when it has one
    /// ([`StackBuilder::own_postgres`]).
    pub(crate) own_postgres: Option<crate::own_postgres::Cluster>,
}

/// Where cargo put this test's sibling binaries (`target/<profile>/`).
pub fn binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .context("test binary has no target dir")?;
    let path = dir.join(name);
    if !path.exists() {
        bail!(
            "{} is missing: run `cargo build --workspace --bins` first",
            path.display()
        );
    }
    Ok(path)
}

impl Stack {
    /// A stack as the test asks: see [`StackBuilder`]'s options.
    pub fn builder() -> StackBuilder {
        StackBuilder::default()
    }

    /// A stack with the test defaults and nothing of its own.
    pub async fn start() -> Result<Stack> {
        Self::builder().start().await
    }

    /// Waits until the three processes report ready.
    pub async fn wait_ready(&self) -> Result<()> {
        for url in [&self.ingest_url, &self.projector_url, &self.api_url] {
            self.wait_process_ready(url, Duration::from_secs(60))
                .await
                .context("stack did not become ready")?;
        }
        Ok(())
    }

    /// Starts another projector in the stack's group, named `name`, with a
    /// health listener of its own (its URL is returned); like
    /// [`Stack::start_process`], it does not wait for it to be ready.
    pub fn start_another_projector(&mut self, name: &str) -> Result<String> {
        let port = free_port();
        self.start_projector_as(
            name,
            &[("RATEWIRE_PROJECTOR_LISTEN", format!("127.0.0.1:{port}"))],
        )?;
        let url = format!("http://127.0.0.1:{port}");
        self.projectors.retain(|(n, _)| n != name);
        self.projectors.push((name.to_owned(), url.clone()));
        Ok(url)
    }

    /// The health listener of the projector named `name`.
    pub fn projector_url_of(&self, name: &str) -> Result<String> {
        self.projectors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, url)| url.clone())
            .with_context(|| format!("no projector named {name}"))
    }

    /// Waits until the process whose listener is `url` reports ready.
    pub(crate) async fn wait_process_ready(&self, url: &str, within: Duration) -> Result<()> {
        let ready = format!("{url}/readyz");
        eventually(&ready, within, || async {
            let response = self.http.get(&ready).send().await.ok()?;
            response.status().is_success().then_some(())
        })
        .await
        .with_context(|| format!("not ready; logs in {}", self.logs.display()))
    }

    /// The resident memory of one of the stack's processes, in KiB.
    pub fn rss_kib(&self, name: &str) -> Result<u64> {
        let (_, child) = self
            .processes
            .iter()
            .find(|(n, _)| n == name)
            .with_context(|| format!("no {name} running"))?;
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .context("no VmRSS line")
    }

    /// Sends a signal (`TERM`, `STOP`, ...) to one of the stack's processes.
    pub fn signal(&self, name: &str, signal: &str) -> Result<()> {
        let (_, child) = self
            .processes
            .iter()
            .find(|(n, _)| n == name)
            .with_context(|| format!("no {name} running"))?;
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -{signal} {name} failed");
        Ok(())
    }

    /// Starts (again) one of the ratewire processes with the stack's settings.
    pub fn start_process(&mut self, name: &str) -> Result<()> {
        let settings = self.env.clone();
        let env: Vec<(&str, String)> = settings
            .iter()
            .map(|(n, v)| (n.as_str(), v.clone()))
            .collect();
        self.spawn(name, &binary(name)?, &[], &env)
    }

    fn take_process(&mut self, name: &str) -> Result<Child> {
        let index = self
            .processes
            .iter()
            .position(|(n, _)| n == name)
            .with_context(|| format!("no {name} running"))?;
        Ok(self.processes.remove(index).1)
    }

    /// Kills a process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self, name: &str) -> Result<()> {
        let mut child = self.take_process(name)?;
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    /// Sends SIGTERM to a process and returns its exit status, failing when
    /// it has not exited within `timeout`. The process stays in the stack
    /// (for `is_running` checks) until it exits.
    pub async fn terminate(&mut self, name: &str, timeout: Duration) -> Result<ExitStatus> {
        self.signal(name, "TERM")?;
        self.wait_exit(name, timeout).await
    }

    /// Waits for a process to exit by itself and returns its status.
    pub async fn wait_exit(&mut self, name: &str, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let (_, child) = self
                .processes
                .iter_mut()
                .find(|(n, _)| n == name)
                .with_context(|| format!("no {name} running"))?;
            if let Some(status) = child.try_wait()? {
                self.take_process(name)?;
                return Ok(status);
            }
            if Instant::now() > deadline {
                bail!("{name} did not exit within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A ratewire command-line binary with the stack's settings, run in
    /// the stack's directory, for a test to start and stop as it needs
    /// (it is killed when dropped).
    pub fn command(&self, name: &str) -> Result<tokio::process::Command> {
        let mut command = tokio::process::Command::new(binary(name)?);
        command
            .current_dir(&self.logs)
            .envs(self.env.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        Ok(command)
    }

    /// Runs a ratewire command-line binary (e.g. `ratewire-ingest banks
    /// list`) with the stack's settings plus `env`, to completion.
    pub async fn run(
        &self,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<std::process::Output> {
        let output = self
            .command(name)?
            .args(args)
            .envs(env.iter().copied())
            .output()
            .await
            .with_context(|| format!("running {name}"))?;
        Ok(output)
    }

    /// Starts (again) a projector process named `name` with the stack's
    /// settings plus `overrides` (e.g. its partitions and listen address).
    pub fn start_projector_as(&mut self, name: &str, overrides: &[(&str, String)]) -> Result<()> {
        self.start_another(name, "ratewire-projector", overrides)
    }

    /// Starts a second API instance named `name`, sharing the stack's
    /// Postgres and Redis, on ports of its own; returns its public and
    /// operator URLs.
    pub async fn start_api_as(&mut self, name: &str) -> Result<(String, String)> {
        self.start_api_with(name, &[]).await
    }

    /// [`Stack::start_api_as`], with `overrides` of the stack's settings.
    pub async fn start_api_with(
        &mut self,
        name: &str,
        overrides: &[(&str, String)],
    ) -> Result<(String, String)> {
        let (public, operator) = (free_port(), free_port());
        let listen = [
            ("RATEWIRE_API_LISTEN", format!("127.0.0.1:{public}")),
            (
                "RATEWIRE_API_OPERATOR_LISTEN",
                format!("127.0.0.1:{operator}"),
            ),
        ];
        let overrides: Vec<(&str, String)> = listen
            .into_iter()
            .chain(overrides.iter().cloned())
            .collect();
        self.start_another(name, "ratewire-api", &overrides)?;
        let urls = (
            format!("http://127.0.0.1:{public}"),
            format!("http://127.0.0.1:{operator}"),
        );
        self.wait_process_ready(&urls.0, Duration::from_secs(30))
            .await?;
        Ok(urls)
    }

    /// Starts another process of `binary`, named `name`, with the stack's
    /// settings plus `overrides`.
    fn start_another(
        &mut self,
        name: &str,
        binary_name: &str,
        overrides: &[(&str, String)],
    ) -> Result<()> {
        let settings = self.env.clone();
        let env: Vec<(&str, String)> = settings
            .iter()
            .filter(|(n, _)| !overrides.iter().any(|(o, _)| o == n))
            .map(|(n, v)| (n.as_str(), v.clone()))
            .chain(overrides.iter().map(|(n, v)| (*n, v.clone())))
            .collect();
        self.spawn(name, &binary(binary_name)?, &[], &env)
    }

    fn spawn(
        &mut self,
        name: &str,
        program: &Path,
        args: &[&str],
        env: &[(&str, String)],
    ) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("{name}.log")))?;
        let child = Command::new(program)
            .current_dir(&self.logs)
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        self.processes.push((name.to_owned(), child));
        Ok(())
    }
}

pub(crate) async fn flush_prefix(prefix: &str) -> Result<()> {
    let client = redis::Client::open(REDIS)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await?;
    if !keys.is_empty() {
        redis::cmd("DEL")
            .arg(keys)
            .query_async::<()>(&mut conn)
            .await?;
    }
    Ok(())
}

/// Drops `database` from the Postgres at `postgres`, whoever is connected.
pub(crate) async fn drop_database(postgres: &str, database: &str) {
    if let Ok(admin) = sqlx::PgPool::connect(&format!("{postgres}/postgres")).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            .execute(&admin)
            .await;
        admin.close().await;
    }
}

/// Drops a test's database from the machine's Postgres and its keys from
/// the machine's Redis, when what used them (an in-process world) drops.
pub fn forget(database: &str, redis_prefix: &str) {
    let (database, prefix) = (database.to_owned(), redis_prefix.to_owned());
    clean_up(async move {
        drop_database(crate::POSTGRES, &database).await;
        let _ = flush_prefix(&prefix).await;
    });
}

/// Runs `cleanup` to its end on a thread with a runtime of its own: a drop
/// may run inside the test's runtime, which cannot be blocked on.
pub(crate) fn clean_up(cleanup: impl std::future::Future<Output = ()> + Send + 'static) {
    let _ = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(cleanup);
        Some(())
    })
    .join();
}

impl Drop for Stack {
    fn drop(&mut self) {
        for (_, child) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
        let database = self.database.clone();
        let prefix = self.redis_prefix.clone();
        let postgres = self.postgres.clone();
        let own_postgres = self.own_postgres.take();
        clean_up(async move {
            match own_postgres {
                Some(cluster) => cluster.remove(),
                None => drop_database(&postgres, &database).await,
            }
            let _ = flush_prefix(&prefix).await;
        });
    }
}
