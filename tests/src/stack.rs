//! A stack's processes and the world they run in: its database, Redis
//! prefix (or Redis of its own), topic and broker, each started, stopped,
//! frozen or cut on purpose; dropped, it removes what it made.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::support::{eventually, free_port};
use crate::{
    broker, contract, proxy, ADMIN_TOKEN, OWN_BROKER, OWN_POSTGRES, OWN_REDIS, POSTGRES,
    POSTGRES_PROXY, PROCESSES, READ_REPLICA, REDIS, SASL_SSL_BROKER, SASL_USER,
};

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
    processes: Vec<(String, Child)>,
    pub(crate) contract: Option<contract::Contract>,
    /// The port of this stack's own Redis, when it has one.
    own_redis: Option<u16>,
    /// The Redis the processes use.
    pub redis_url: String,
    /// The broker's bootstrap address.
    brokers: String,
    /// The ports (client, controller) of this stack's own broker, when it
    /// has one ([`OWN_BROKER`]).
    own_broker: Option<(u16, u16)>,
    /// What `deploy/stack kafka-exec` is given besides its ports (a secured
    /// listener's properties and SCRAM user).
    broker_env: Vec<(String, String)>,
    /// The environment every ratewire process of this stack gets.
    pub(crate) env: Vec<(String, String)>,
    postgres_proxy: Option<proxy::Proxy>,
    replica_proxy: Option<proxy::Proxy>,
    /// The Postgres this harness reads and sets up directly (the processes
    /// may reach it through a proxy).
    pub(crate) postgres: String,
    /// This stack's own cluster, when it has one ([`OWN_POSTGRES`]).
    pub(crate) own_postgres: Option<crate::own_postgres::Cluster>,
}

/// A broker listener taking SCRAM over TLS ([`SASL_SSL_BROKER`]).
struct Secured {
    listener: u16,
    /// For `deploy/stack kafka-exec`: the listener's properties and user.
    broker_env: Vec<(String, String)>,
    /// The processes' connection settings.
    clients: Vec<(&'static str, String)>,
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

        let own_postgres = match settings.iter().any(|(name, _)| *name == OWN_POSTGRES) {
            true => {
                let cluster = crate::own_postgres::Cluster::new(&id, free_port());
                cluster.start()?;
                Some(cluster)
            }
            false => None,
        };
        let direct = own_postgres
            .as_ref()
            .map_or_else(|| POSTGRES.to_owned(), |c| c.url());
        let admin = sqlx::PgPool::connect(&format!("{direct}/postgres"))
            .await
            .with_context(|| format!("postgres at {direct}"))?;
        sqlx::query(&format!("CREATE DATABASE {database}"))
            .execute(&admin)
            .await?;
        admin.close().await;

        let (api_port, ingest_port, projector_port) = (free_port(), free_port(), free_port());
        let (api_operator_port, ingest_operator_port) = (free_port(), free_port());
        let mut stack = Stack {
            api_url: format!("http://127.0.0.1:{api_port}"),
            api_operator_url: format!("http://127.0.0.1:{api_operator_port}"),
            ingest_url: format!("http://127.0.0.1:{ingest_port}"),
            ingest_operator_url: format!("http://127.0.0.1:{ingest_operator_port}"),
            projector_url: format!("http://127.0.0.1:{projector_port}"),
            redis_prefix: format!("rwe2e:{id}:"),
            topic: format!("rw-e2e-{id}"),
            group: format!("rw-e2e-{id}-projectors"),
            database,
            logs,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(15))
                // Below the servers' keep-alive idle timeout (10 s): a
                // connection is never reused just as the server closes it.
                .pool_idle_timeout(Duration::from_secs(5))
                .build()?,
            processes: Vec::new(),
            contract: None,
            own_redis: None,
            redis_url: REDIS.to_owned(),
            brokers: String::new(),
            own_broker: None,
            broker_env: Vec::new(),
            env: Vec::new(),
            postgres_proxy: None,
            replica_proxy: None,
            postgres: direct,
            own_postgres,
        };
        let postgres = match settings.iter().find(|(name, _)| *name == POSTGRES_PROXY) {
            Some(_) => {
                let mut proxy = proxy::Proxy::new(free_port(), "127.0.0.1:5432");
                proxy.up().await?;
                let url = format!("postgres://postgres@127.0.0.1:{}", proxy.port);
                stack.postgres_proxy = Some(proxy);
                url
            }
            None => stack.postgres.clone(),
        };
        let mut replica = Vec::new();
        if settings.iter().any(|(name, _)| *name == READ_REPLICA) {
            let mut proxy = proxy::Proxy::new(free_port(), "127.0.0.1:5432");
            proxy.up().await?;
            replica.push((
                "RATEWIRE_READ_DATABASE_URL",
                format!(
                    "postgres://postgres@127.0.0.1:{}/{}",
                    proxy.port, stack.database
                ),
            ));
            stack.replica_proxy = Some(proxy);
        }
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

        let mut secured = Vec::new();
        if settings.iter().any(|(name, _)| *name == SASL_SSL_BROKER) {
            let ports = (free_port(), free_port());
            stack.own_broker = Some(ports);
            let listener = stack.sasl_ssl(ports)?;
            stack.broker_env = listener.broker_env;
            stack.brokers = format!("127.0.0.1:{}", listener.listener);
            secured = listener.clients;
            stack.start_broker()?;
        } else if settings.iter().any(|(name, _)| *name == OWN_BROKER) {
            let ports = (free_port(), free_port());
            stack.own_broker = Some(ports);
            stack.brokers = format!("127.0.0.1:{}", ports.0);
            stack.start_broker()?;
        } else {
            stack.brokers = broker::shared()?;
        }
        let env = [
            (
                "RATEWIRE_DATABASE_URL",
                format!("{postgres}/{}", stack.database),
            ),
            ("RATEWIRE_REDIS_URL", redis_url),
            ("RATEWIRE_REDIS_PREFIX", stack.redis_prefix.clone()),
            ("RATEWIRE_KAFKA_BROKERS", stack.brokers.clone()),
            ("RATEWIRE_TOPIC", stack.topic.clone()),
            ("RATEWIRE_KAFKA_GROUP", stack.group.clone()),
            ("RATEWIRE_ADMIN_TOKEN", ADMIN_TOKEN.to_owned()),
            ("RATEWIRE_API_LISTEN", format!("127.0.0.1:{api_port}")),
            (
                "RATEWIRE_API_OPERATOR_LISTEN",
                format!("127.0.0.1:{api_operator_port}"),
            ),
            ("RATEWIRE_INGEST_LISTEN", format!("127.0.0.1:{ingest_port}")),
            (
                "RATEWIRE_INGEST_OPERATOR_LISTEN",
                format!("127.0.0.1:{ingest_operator_port}"),
            ),
            (
                "RATEWIRE_INGEST_URL",
                format!("http://127.0.0.1:{ingest_port}"),
            ),
            (
                "RATEWIRE_INGEST_OPERATOR_URL",
                format!("http://127.0.0.1:{ingest_operator_port}"),
            ),
            (
                "RATEWIRE_PROJECTOR_LISTEN",
                format!("127.0.0.1:{projector_port}"),
            ),
            ("RUST_LOG", "info,ratewire_projector=debug".to_owned()),
            (
                "RATEWIRE_WEBHOOK_SECRETS_KEY",
                crate::WEBHOOK_SECRETS_KEY.to_owned(),
            ),
            // Receivers are on loopback.
            ("RATEWIRE_WEBHOOK_ALLOW_PRIVATE", "true".to_owned()),
        ];
        stack.env = env
            .into_iter()
            .chain(replica)
            .chain(secured)
            .filter(|(name, _)| !settings.iter().any(|(n, _)| n == name))
            .map(|(n, v)| (n.to_owned(), v))
            .chain(
                settings
                    .iter()
                    .filter(|(n, _)| {
                        ![
                            OWN_REDIS,
                            OWN_BROKER,
                            SASL_SSL_BROKER,
                            POSTGRES_PROXY,
                            READ_REPLICA,
                            OWN_POSTGRES,
                        ]
                        .contains(n)
                    })
                    .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
            )
            .collect();
        for name in PROCESSES {
            stack.start_process(name)?;
        }
        stack.wait_ready().await?;
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

    /// Waits until the three processes report ready.
    pub async fn wait_ready(&self) -> Result<()> {
        for url in [&self.ingest_url, &self.projector_url, &self.api_url] {
            let ready = format!("{url}/readyz");
            eventually(&ready, Duration::from_secs(60), || async {
                let response = self.http.get(&ready).send().await.ok()?;
                response.status().is_success().then_some(())
            })
            .await
            .with_context(|| {
                format!(
                    "stack did not become ready; logs in {}",
                    self.logs.display()
                )
            })?;
        }
        Ok(())
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

    /// Starts (again) this stack's own broker on its ports, with the log it
    /// kept, and waits until it takes connections.
    pub fn start_broker(&mut self) -> Result<()> {
        let (port, controller) = self.own_broker.context("start the stack with OWN_BROKER")?;
        let log_path = self.logs.join("broker.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let mut child = broker::command(&self.logs.join("broker"), port, controller)
            .envs(
                self.broker_env
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str())),
            )
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting deploy/stack kafka-exec")?;
        let listening = broker::wait_listening(&mut child, port, &log_path);
        self.processes.push(("broker".to_owned(), child));
        listening
    }

    /// Makes a CA and the broker's certificate (for 127.0.0.1) with
    /// openssl, and the broker properties of a SASL_SSL listener taking
    /// SCRAM-SHA-512; returns that listener's port, the broker's
    /// environment and the processes' connection settings.
    fn sasl_ssl(&self, (port, controller): (u16, u16)) -> Result<Secured> {
        let tls = self.logs.join("tls");
        std::fs::create_dir_all(&tls)?;
        let openssl = |args: &[&str]| -> Result<()> {
            let output = Command::new("openssl")
                .current_dir(&tls)
                .args(args)
                .output()
                .context("running openssl")?;
            anyhow::ensure!(
                output.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            Ok(())
        };
        let subject_ca = "/CN=ratewire-e2e-ca";
        openssl(&[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", subject_ca,
        ])?;
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "broker.key",
            "-out",
            "broker.csr",
            "-subj",
            "/CN=localhost",
        ])?;
        std::fs::write(
            tls.join("san.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            "broker.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "broker.crt",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ])?;
        let pem = std::fs::read_to_string(tls.join("broker.key"))?
            + &std::fs::read_to_string(tls.join("broker.crt"))?;
        std::fs::write(tls.join("broker.pem"), pem)?;
        let password = uuid::Uuid::new_v4().simple().to_string();
        std::fs::write(tls.join("password"), format!("{password}\n"))?;

        let secured = free_port();
        let properties = format!(
            "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},SASL_SSL://127.0.0.1:{secured}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{secured}\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL\n\
             sasl.enabled.mechanisms=SCRAM-SHA-512\n\
             listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
             listener.name.sasl_ssl.ssl.keystore.type=PEM\n\
             listener.name.sasl_ssl.ssl.keystore.location={}\n",
            tls.join("broker.pem").display()
        );
        std::fs::write(tls.join("broker.properties"), properties)?;
        let broker_env = vec![
            (
                "RATEWIRE_KAFKA_EXTRA_CONFIG".to_owned(),
                tls.join("broker.properties").display().to_string(),
            ),
            (
                "RATEWIRE_KAFKA_SCRAM".to_owned(),
                format!("SCRAM-SHA-512=[name={SASL_USER},password={password}]"),
            ),
        ];
        let clients = [
            ("RATEWIRE_KAFKA_SECURITY_PROTOCOL", "sasl_ssl".to_owned()),
            ("RATEWIRE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512".to_owned()),
            ("RATEWIRE_KAFKA_SASL_USERNAME", SASL_USER.to_owned()),
            (
                "RATEWIRE_KAFKA_SASL_PASSWORD_FILE",
                tls.join("password").display().to_string(),
            ),
            (
                "RATEWIRE_KAFKA_SSL_CA_LOCATION",
                tls.join("ca.crt").display().to_string(),
            ),
        ]
        .into();
        Ok(Secured {
            listener: secured,
            broker_env,
            clients,
        })
    }

    /// The file holding the SASL password of a [`SASL_SSL_BROKER`] stack.
    pub fn sasl_password_file(&self) -> PathBuf {
        self.logs.join("tls/password")
    }

    /// Freezes (`true`) or thaws the broker process: it keeps its
    /// connections and state but answers nothing, as a hung broker would.
    pub fn pause_broker(&self, paused: bool) -> Result<()> {
        self.own_broker.context("start the stack with OWN_BROKER")?;
        self.signal("broker", if paused { "STOP" } else { "CONT" })
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

    /// Stops the broker at once, as a crash would.
    pub fn stop_broker(&mut self) -> Result<()> {
        self.own_broker.context("start the stack with OWN_BROKER")?;
        self.kill("broker")
    }

    /// Stops this stack's own Redis at once, as a crash would.
    pub fn stop_redis(&mut self) -> Result<()> {
        self.kill("redis")
    }

    /// The broker's bootstrap address.
    pub fn kafka_brokers(&self) -> String {
        self.brokers.clone()
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
        let ready = format!("{}/readyz", urls.0);
        eventually(&ready, Duration::from_secs(30), || async {
            let response = self.http.get(&ready).send().await.ok()?;
            response.status().is_success().then_some(())
        })
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

    /// Whether the projector has written `bank`'s /rates element to Redis
    /// (the API may render it from Postgres before): the change it made is
    /// then on the live stream's log too.
    pub async fn bank_view_written(&self, bank: i64) -> Result<bool> {
        let client = redis::Client::open(self.redis_url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let key = format!("{}view:rates:bank:{bank}:00", self.views_prefix().await?);
        Ok(redis::cmd("EXISTS").arg(key).query_async(&mut conn).await?)
    }

    /// Every stored view of the active generation, by key, its JSON parsed
    /// and with what a rendering stamps with its own time (the best rates'
    /// `timestamp`) removed, so two renderings of the same data compare
    /// equal.
    pub async fn stored_views(&self) -> Result<std::collections::BTreeMap<String, Value>> {
        let client = redis::Client::open(self.redis_url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let prefix = format!("{}view:", self.views_prefix().await?);
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(&mut conn)
            .await?;
        let mut views = std::collections::BTreeMap::new();
        for key in keys {
            let name = key.trim_start_matches(&prefix).to_owned();
            let value: Value = match name.as_str() {
                // Bookkeeping, not a view.
                "versions" | "etags" => continue,
                "banks:active" => {
                    let ids: Vec<String> = redis::cmd("ZRANGE")
                        .arg(&key)
                        .arg(0)
                        .arg(-1)
                        .query_async(&mut conn)
                        .await?;
                    Value::from(ids)
                }
                _ => {
                    let text: String = redis::cmd("GET").arg(&key).query_async(&mut conn).await?;
                    let mut value: Value = serde_json::from_str(&format!("[{text}]"))
                        .with_context(|| format!("{key} holds no JSON"))?;
                    if name.starts_with("best:") {
                        value[0] = crate::support::without_computed_time(value[0].take());
                    }
                    value
                }
            };
            views.insert(name, value);
        }
        Ok(views)
    }

    /// Runs a command on this stack's own Redis (`redis-cli`).
    pub fn redis_cli(&self, args: &[&str]) -> Result<String> {
        let port = self
            .own_redis
            .context("this stack shares the machine's redis")?
            .to_string();
        let output = Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .context("running redis-cli")?;
        anyhow::ensure!(output.status.success(), "redis-cli {args:?} failed");
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
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

    /// Cuts the API off its read replica (see [`READ_REPLICA`]).
    pub fn replica_down(&mut self) -> Result<()> {
        self.replica_proxy
            .as_mut()
            .context("start the stack with READ_REPLICA")?
            .down();
        Ok(())
    }

    /// Gives the API its read replica back.
    pub async fn replica_up(&mut self) -> Result<()> {
        self.replica_proxy
            .as_mut()
            .context("start the stack with READ_REPLICA")?
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
        // Drop may run inside the test's runtime, so clean up on a thread
        // with a runtime of its own.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                match own_postgres {
                    Some(cluster) => cluster.remove(),
                    None => {
                        if let Ok(admin) =
                            sqlx::PgPool::connect(&format!("{postgres}/postgres")).await
                        {
                            let _ = sqlx::query(&format!(
                                "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
                            ))
                            .execute(&admin)
                            .await;
                        }
                    }
                }
                let _ = flush_prefix(&prefix).await;
            });
            Some(())
        })
        .join();
    }
}
