//! The end-to-end harness: a whole ratewire per test.
//!
//! [`Stack::start`] gives each test its own world: a fresh broker process on
//! a free port (tansu, in memory), its own Postgres database, Redis key
//! prefix and topic, and the three real binaries (`ratewire-ingest`,
//! `ratewire-projector`, `ratewire-api`) on free ports. Dropping the stack
//! stops the processes and removes the database and keys.
//!
//! Binaries come from the same target directory as the test; build them
//! first (`cargo build --workspace --bins`, which the test command does).
//! The broker binary comes from `RATEWIRE_TANSU_BIN`, or the stack script's
//! cache (`$RATEWIRE_CACHE_DIR`, default `~/.cache/ratewire`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub mod contract;
pub mod fold_check;
pub mod proxy;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

pub const ADMIN_TOKEN: &str = "e2e-operator-token";
/// A setting for [`Stack::start_with`]: give the stack a Redis of its own,
/// which the test may stop and start.
pub const OWN_REDIS: &str = "own redis";
/// A setting for [`Stack::start_with`]: the broker stores to a file, so the
/// test may stop and start it without losing the topic.
pub const DURABLE_BROKER: &str = "durable broker";
/// A setting for [`Stack::start_with`]: the processes reach Postgres through
/// a proxy the test may cut ([`Stack::postgres_down`]) and restore.
pub const POSTGRES_PROXY: &str = "postgres through a proxy";
/// The three processes of a stack, in start order.
pub const PROCESSES: [&str; 3] = ["ratewire-ingest", "ratewire-projector", "ratewire-api"];
pub(crate) const POSTGRES: &str = "postgres://postgres@127.0.0.1:5432";
pub(crate) const REDIS: &str = "redis://127.0.0.1:6379/0";

pub struct Stack {
    pub api_url: String,
    pub ingest_url: String,
    pub projector_url: String,
    pub database: String,
    pub redis_prefix: String,
    pub topic: String,
    pub logs: PathBuf,
    http: reqwest::Client,
    processes: Vec<(String, Child)>,
    contract: Option<contract::Contract>,
    /// The port of this stack's own Redis, when it has one.
    own_redis: Option<u16>,
    /// The Redis the processes use.
    pub redis_url: String,
    broker_port: u16,
    /// The broker keeps its data in a file, so it survives a restart.
    durable_broker: bool,
    /// The environment every ratewire process of this stack gets.
    env: Vec<(String, String)>,
    postgres_proxy: Option<proxy::Proxy>,
}

/// A free loopback port below the kernel's ephemeral range (32768 and up),
/// so that no outgoing connection (clients reconnect constantly) can take it
/// between this check and the process binding it. Never the same port twice
/// in one test process: stacks of tests running in parallel pick their ports
/// before their processes bind them, and two picks of one free port made a
/// process fail with "address in use" while the test talked to another
/// stack's process on it.
pub fn free_port() -> u16 {
    use rand::Rng;
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut rng = rand::thread_rng();
    loop {
        let port = rng.gen_range(20_000..32_000);
        let mut given = GIVEN.lock().expect("ports given");
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
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

pub fn tansu_binary() -> Result<PathBuf> {
    if let Ok(path) = std::env::var("RATEWIRE_TANSU_BIN") {
        return Ok(PathBuf::from(path));
    }
    let cache = std::env::var("RATEWIRE_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/ratewire")
        });
    let path = cache.join("tansu-0.6.0/bin/tansu");
    if !path.exists() {
        bail!(
            "the broker is not installed at {}: run `deploy/stack test`, which installs it",
            path.display()
        );
    }
    Ok(path)
}

/// The date `days` days before today (UTC), as `YYYY-MM-DD`.
pub fn day(days: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::days(days))
        .format("%Y-%m-%d")
        .to_string()
}

/// `hour` o'clock (UTC) on [`day`]`(days)`, as RFC 3339.
pub fn at(days: i64, hour: u32) -> String {
    format!("{}T{hour:02}:00:00Z", day(days))
}

/// An RFC 3339 time `days` days and `hours` hours before now, at whole
/// seconds: boards in tests must not be in the future, and the best-rates
/// series only reaches 30 days back.
pub fn ago(days: i64, hours: i64) -> String {
    let t = chrono::Utc::now() - chrono::Duration::days(days) - chrono::Duration::hours(hours);
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Waits until at least `needed` seconds are left in the current minute, so
/// that requests a test counts fall into one fixed rate-limit window.
pub async fn room_in_this_minute(needed: u32) {
    use chrono::Timelike;
    while 60 - chrono::Utc::now().second() < needed {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How long a test waits for the projector to show what it published.
pub const VISIBLE_WITHIN: Duration = Duration::from_secs(10);

/// Polls `check` until it yields a value or `timeout` passes.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

impl Stack {
    pub async fn start() -> Result<Stack> {
        Self::start_with(&[]).await
    }

    /// A stack whose processes get `settings` on top of the test defaults.
    pub async fn start_with(settings: &[(&str, &str)]) -> Result<Stack> {
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let database = format!("rw_e2e_{id}");
        let logs = binary("ratewire-api")?
            .parent()
            .unwrap()
            .join("e2e-logs")
            .join(&id);
        std::fs::create_dir_all(&logs)?;

        let admin = sqlx::PgPool::connect(&format!("{POSTGRES}/postgres"))
            .await
            .context("postgres at 127.0.0.1:5432")?;
        sqlx::query(&format!("CREATE DATABASE {database}"))
            .execute(&admin)
            .await?;
        admin.close().await;

        let (broker_port, api_port, ingest_port, projector_port) =
            (free_port(), free_port(), free_port(), free_port());
        let mut stack = Stack {
            api_url: format!("http://127.0.0.1:{api_port}"),
            ingest_url: format!("http://127.0.0.1:{ingest_port}"),
            projector_url: format!("http://127.0.0.1:{projector_port}"),
            redis_prefix: format!("rwe2e:{id}:"),
            topic: format!("rw-e2e-{id}"),
            database,
            logs,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(15))
                .build()?,
            processes: Vec::new(),
            contract: None,
            own_redis: None,
            redis_url: REDIS.to_owned(),
            broker_port: 0,
            durable_broker: false,
            env: Vec::new(),
            postgres_proxy: None,
        };
        let postgres = match settings.iter().find(|(name, _)| *name == POSTGRES_PROXY) {
            Some(_) => {
                let mut proxy = proxy::Proxy::new(free_port(), "127.0.0.1:5432");
                proxy.up().await?;
                let url = format!("postgres://postgres@127.0.0.1:{}", proxy.port);
                stack.postgres_proxy = Some(proxy);
                url
            }
            None => POSTGRES.to_owned(),
        };
        let redis_url = match settings.iter().find(|(name, _)| *name == OWN_REDIS) {
            Some(_) => {
                let port = free_port();
                stack.own_redis = Some(port);
                stack.start_redis()?;
                eventually("its own redis", Duration::from_secs(10), || async {
                    std::net::TcpStream::connect(("127.0.0.1", port))
                        .ok()
                        .map(|_| ())
                })
                .await?;
                format!("redis://127.0.0.1:{port}/0")
            }
            None => REDIS.to_owned(),
        };
        stack.redis_url = redis_url.clone();

        stack.broker_port = broker_port;
        stack.durable_broker = settings.iter().any(|(name, _)| *name == DURABLE_BROKER);
        stack.start_broker()?;
        let env = [
            (
                "RATEWIRE_DATABASE_URL",
                format!("{postgres}/{}", stack.database),
            ),
            ("RATEWIRE_REDIS_URL", redis_url),
            ("RATEWIRE_REDIS_PREFIX", stack.redis_prefix.clone()),
            ("RATEWIRE_KAFKA_BROKERS", format!("127.0.0.1:{broker_port}")),
            ("RATEWIRE_TOPIC", stack.topic.clone()),
            ("RATEWIRE_ADMIN_TOKEN", ADMIN_TOKEN.to_owned()),
            ("RATEWIRE_API_LISTEN", format!("127.0.0.1:{api_port}")),
            ("RATEWIRE_INGEST_LISTEN", format!("127.0.0.1:{ingest_port}")),
            (
                "RATEWIRE_PROJECTOR_LISTEN",
                format!("127.0.0.1:{projector_port}"),
            ),
            ("RUST_LOG", "info,ratewire_projector=debug".to_owned()),
            // tansu holds every fetch for the full wait, data or not.
            ("RATEWIRE_PROJECTOR_FETCH_WAIT_MS", "2".to_owned()),
        ];
        stack.env = env
            .into_iter()
            .filter(|(name, _)| !settings.iter().any(|(n, _)| n == name))
            .map(|(n, v)| (n.to_owned(), v))
            .chain(
                settings
                    .iter()
                    .filter(|(n, _)| ![OWN_REDIS, DURABLE_BROKER, POSTGRES_PROXY].contains(n))
                    .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
            )
            .collect();
        for name in PROCESSES {
            stack.start_process(name)?;
        }
        for url in [&stack.ingest_url, &stack.projector_url, &stack.api_url] {
            let ready = format!("{url}/readyz");
            eventually(&ready, Duration::from_secs(60), || async {
                let response = stack.http.get(&ready).send().await.ok()?;
                response.status().is_success().then_some(())
            })
            .await
            .with_context(|| {
                format!(
                    "stack did not become ready; logs in {}",
                    stack.logs.display()
                )
            })?;
        }
        let document: Value = stack
            .http
            .get(format!("{}/api/v1/openapi.json", stack.api_url))
            .send()
            .await?
            .json()
            .await?;
        stack.contract = Some(contract::Contract::new(document));
        Ok(stack)
    }

    /// Starts (again) this stack's own Redis, without persistence, as the
    /// machine's Redis runs.
    pub fn start_redis(&mut self) -> Result<()> {
        let port = self
            .own_redis
            .context("this stack shares the machine's redis")?
            .to_string();
        let args = [
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ];
        self.spawn("redis", Path::new("redis-server"), &args, &[])
    }

    /// Starts (again) this stack's broker on its port.
    pub fn start_broker(&mut self) -> Result<()> {
        let listener = format!("tcp://127.0.0.1:{}", self.broker_port);
        let storage = if self.durable_broker {
            // tansu resolves the file against its working directory, the
            // test's own directory (see `spawn`).
            "sqlite://broker.db".to_owned()
        } else {
            "memory://tansu/".to_owned()
        };
        let args = [
            "broker",
            "--listener-url",
            &listener,
            "--advertised-listener-url",
            &listener,
            "--storage-engine",
            &storage,
        ];
        let program = tansu_binary()?;
        self.spawn("broker", &program, &args, &[])
    }

    /// Freezes (`true`) or thaws the broker process: it keeps its
    /// connections and state but answers nothing, as a hung broker would.
    pub fn pause_broker(&self, paused: bool) -> Result<()> {
        self.signal("broker", if paused { "STOP" } else { "CONT" })
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

    /// Stops the broker at once, as a crash would.
    pub fn stop_broker(&mut self) -> Result<()> {
        self.kill("broker")
    }

    /// Stops this stack's own Redis at once, as a crash would.
    pub fn stop_redis(&mut self) -> Result<()> {
        self.kill("redis")
    }

    /// The broker's bootstrap address.
    pub fn kafka_brokers(&self) -> String {
        format!("127.0.0.1:{}", self.broker_port)
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

    /// Runs a ratewire command-line binary (e.g. `ratewire-ingest banks
    /// list`) with the stack's settings plus `env`, to completion.
    pub async fn run(
        &self,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<std::process::Output> {
        let output = tokio::process::Command::new(binary(name)?)
            .current_dir(&self.logs)
            .args(args)
            .envs(self.env.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .await
            .with_context(|| format!("running {name}"))?;
        Ok(output)
    }

    /// Starts (again) a projector process named `name` with the stack's
    /// settings plus `overrides` (e.g. its partitions and listen address).
    pub fn start_projector_as(&mut self, name: &str, overrides: &[(&str, String)]) -> Result<()> {
        let settings = self.env.clone();
        let env: Vec<(&str, String)> = settings
            .iter()
            .filter(|(n, _)| !overrides.iter().any(|(o, _)| o == n))
            .map(|(n, v)| (n.as_str(), v.clone()))
            .chain(overrides.iter().map(|(n, v)| (*n, v.clone())))
            .collect();
        self.spawn(name, &binary("ratewire-projector")?, &[], &env)
    }

    /// Publishes `boards` boards for each of `banks` (id, token), banks in
    /// parallel, each board quoting `currencies` currencies at its own past
    /// as-of. A push answered 503 or not at all is retried with its
    /// Idempotency-Key until accepted, as a careful publisher would. The
    /// task yields the number of boards accepted.
    pub fn spawn_stream(
        &self,
        banks: Vec<(i64, String)>,
        boards: usize,
        currencies: usize,
    ) -> tokio::task::JoinHandle<Result<usize>> {
        let http = self.http.clone();
        let ingest = self.ingest_url.clone();
        tokio::spawn(async move {
            let base = chrono::Utc::now() - chrono::Duration::days(2);
            let pushes = banks.into_iter().map(|(bank, token)| {
                let (http, ingest) = (http.clone(), ingest.clone());
                async move {
                    for i in 0..boards {
                        let as_of = (base + chrono::Duration::seconds(i as i64))
                            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                        let rates: Vec<String> = STREAM_CURRENCIES
                            .iter()
                            .take(currencies)
                            .enumerate()
                            .map(|(c, code)| {
                                let buying = 100 + (bank as usize * 7 + i * 3 + c) % 50;
                                format!(
                                    r#"{{"currency":"{code}","cashBuying":{buying}.25,"cashSelling":{}.75}}"#,
                                    buying + 2
                                )
                            })
                            .collect();
                        let body = format!(r#"{{"asOf":"{as_of}","rates":[{}]}}"#, rates.join(","));
                        push_until_accepted(&http, &ingest, bank, &token, &format!("s-{i}"), body)
                            .await?;
                    }
                    anyhow::Ok(boards)
                }
            });
            let done = futures_util::future::try_join_all(pushes).await?;
            Ok(done.into_iter().sum())
        })
    }

    /// Waits until the active generation has applied `expected` events.
    pub async fn wait_applied(&self, expected: i64, timeout: Duration) -> Result<()> {
        let schema = self.active_generation().await?;
        let query = format!("SELECT count(*) FROM {schema}.applied_events");
        self.wait_count("every event applied", &query, expected, timeout)
            .await
    }

    /// Waits until `query` (a count) yields `expected`; the error names the
    /// last count seen.
    pub async fn wait_count(
        &self,
        what: &str,
        query: &str,
        expected: i64,
        timeout: Duration,
    ) -> Result<()> {
        let waited = eventually(what, timeout, || async {
            let count = self.sql_number(query).await.ok()??;
            (count == expected).then_some(())
        })
        .await;
        if waited.is_err() {
            let seen = self.sql_number(query).await?;
            bail!("{what}: expected {expected}, saw {seen:?}");
        }
        Ok(())
    }

    /// Waits until `/api/v1/rates?bankId={bank}` answers 200 with a body
    /// containing `needle`.
    pub async fn wait_served(&self, what: &str, bank: i64, key: &str, needle: &str) -> Result<()> {
        let path = format!("/api/v1/rates?bankId={bank}");
        eventually(what, VISIBLE_WITHIN, || async {
            let (status, raw) = self.get_raw(&path, Some(key)).await.ok()?;
            (status == 200 && raw.contains(needle)).then_some(())
        })
        .await
    }

    /// Cuts this stack's processes off Postgres: new connections are
    /// refused and open ones severed.
    pub fn postgres_down(&mut self) -> Result<()> {
        self.postgres_proxy
            .as_mut()
            .context("start the stack with POSTGRES_PROXY")?
            .down();
        Ok(())
    }

    /// Gives this stack's processes Postgres back.
    pub async fn postgres_up(&mut self) -> Result<()> {
        self.postgres_proxy
            .as_mut()
            .context("start the stack with POSTGRES_PROXY")?
            .up()
            .await
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

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Registers a bank through the operator endpoint; returns its id.
    pub async fn register_bank(&self, code: &str, name: &str) -> Result<i64> {
        let response = self
            .http
            .post(format!("{}/v1/admin/banks", self.ingest_url))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({
                "code": code,
                "name": name,
                "imageUrl": format!("https://img.test/{code}.png"),
                "socialLinks": [{"platform": "telegram", "url": format!("https://t.me/{code}")}],
            }))
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if status != 201 {
            bail!("registering {code}: {status} {body}");
        }
        body["id"].as_i64().context("no id")
    }

    /// Changes a bank through the operator endpoint (`{"active": false}`
    /// deactivates it).
    pub async fn update_bank(&self, bank_id: i64, patch: Value) -> Result<Value> {
        let response = self
            .http
            .patch(format!("{}/v1/admin/banks/{bank_id}", self.ingest_url))
            .bearer_auth(ADMIN_TOKEN)
            .json(&patch)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if status != 200 {
            bail!("updating bank {bank_id}: {status} {body}");
        }
        Ok(body)
    }

    /// Registers a bank and takes a publisher token for it.
    pub async fn bank_with_token(&self, code: &str, name: &str) -> Result<(i64, String)> {
        let id = self.register_bank(code, name).await?;
        Ok((id, self.publisher_token(id).await?))
    }

    pub async fn publisher_token(&self, bank_id: i64) -> Result<String> {
        let body: Value = self
            .http
            .post(format!(
                "{}/v1/admin/banks/{bank_id}/tokens",
                self.ingest_url
            ))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(body["token"].as_str().context("no token")?.to_owned())
    }

    /// Pushes a board body (JSON text, so numbers keep their digits).
    pub async fn publish_board(
        &self,
        bank_id: i64,
        token: &str,
        board: &str,
    ) -> Result<(u16, Value)> {
        let response = self
            .http
            .post(format!("{}/v1/banks/{bank_id}/boards", self.ingest_url))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(board.to_owned())
            .send()
            .await?;
        Ok((response.status().as_u16(), response.json().await?))
    }

    /// A key on the enterprise plan, so that polling never hits a limit.
    pub async fn api_key(&self, name: &str) -> Result<String> {
        self.api_key_on(name, "enterprise").await
    }

    pub async fn api_key_on(&self, name: &str, plan: &str) -> Result<String> {
        let body: Value = self
            .http
            .post(format!("{}/v1/admin/keys", self.api_url))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"name": name, "plan": plan}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(body["key"].as_str().context("no key")?.to_owned())
    }

    /// GET on the API; returns the status and the body as raw text.
    pub async fn get_raw(&self, path_and_query: &str, key: Option<&str>) -> Result<(u16, String)> {
        let mut request = self.http.get(format!("{}{path_and_query}", self.api_url));
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        let response = request.send().await?;
        Ok((response.status().as_u16(), response.text().await?))
    }

    /// GET on the API, parsed, and checked against the served OpenAPI
    /// document. A response the document does not describe panics, so the
    /// test fails at once even inside a polling loop.
    pub async fn get(&self, path_and_query: &str, key: Option<&str>) -> Result<(u16, Value)> {
        let (status, text) = self.get_raw(path_and_query, key).await?;
        let body = serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))?;
        self.conforms(path_and_query, status, &body);
        Ok((status, body))
    }

    /// Panics when a response of `GET path_and_query` does not match the
    /// served OpenAPI document.
    pub fn conforms(&self, path_and_query: &str, status: u16, body: &Value) {
        if let Some(contract) = &self.contract {
            let path = path_and_query.split('?').next().unwrap_or_default();
            if let Err(violation) = contract.check(path, status, body) {
                panic!("{violation:#}");
            }
        }
    }

    /// Runs one SQL statement in this stack's database (to break things on
    /// purpose).
    pub async fn sql(&self, statement: &str) -> Result<()> {
        let pool = sqlx::PgPool::connect(&format!("{POSTGRES}/{}", self.database)).await?;
        sqlx::query(statement).execute(&pool).await?;
        pool.close().await;
        Ok(())
    }

    /// The first column of the first row of `query` as a number, if any.
    pub async fn sql_number(&self, query: &str) -> Result<Option<i64>> {
        let pool = sqlx::PgPool::connect(&format!("{POSTGRES}/{}", self.database)).await?;
        let value: Option<i64> = sqlx::query_scalar(query).fetch_optional(&pool).await?;
        pool.close().await;
        Ok(value)
    }

    /// Deletes every Redis key of this stack, as a flush would.
    pub async fn flush_redis(&self) -> Result<()> {
        flush_prefix(&self.redis_prefix).await
    }
}

/// Currencies the stream quotes, in order.
const STREAM_CURRENCIES: [&str; 10] = [
    "USD", "EUR", "GBP", "SAR", "AED", "CNY", "CHF", "JPY", "CAD", "KES",
];

/// Pushes a board until ingest accepts it (retrying 503s and lost
/// connections with the same Idempotency-Key, for up to two minutes).
async fn push_until_accepted(
    http: &reqwest::Client,
    ingest: &str,
    bank: i64,
    token: &str,
    key: &str,
    body: String,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let answer = http
            .post(format!("{ingest}/v1/banks/{bank}/boards"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(body.clone())
            .send()
            .await;
        match answer {
            Ok(response) if response.status() == 202 => return Ok(()),
            Ok(response) if response.status() != 503 => {
                let status = response.status();
                bail!(
                    "push refused: {status} {}",
                    response.text().await.unwrap_or_default()
                );
            }
            _ if Instant::now() > deadline => bail!("push not accepted within two minutes"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

async fn flush_prefix(prefix: &str) -> Result<()> {
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

impl Drop for Stack {
    fn drop(&mut self) {
        for (_, child) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
        let database = self.database.clone();
        let prefix = self.redis_prefix.clone();
        // Drop may run inside the test's runtime, so clean up on a thread
        // with a runtime of its own.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                if let Ok(admin) = sqlx::PgPool::connect(&format!("{POSTGRES}/postgres")).await {
                    let _ =
                        sqlx::query(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
                            .execute(&admin)
                            .await;
                }
                let _ = flush_prefix(&prefix).await;
            });
            Some(())
        })
        .join();
    }
}
