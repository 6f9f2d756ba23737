//! What a test asks of its stack, typed: which services are its own (to
//! stop, freeze, cut or restore), how many projectors run, and the
//! settings its processes get on top of the test defaults.

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use super::{binary, services, Stack};
use crate::support::{eventually, free_port};
use crate::{broker, contract, proxy, ADMIN_TOKEN, POSTGRES, PROCESSES, REDIS};

/// The stack's signing key, in its directory.
const SIGNING_KEY_FILE: &str = "signing-key.pem";

/// Where a stack's broker runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Broker {
    /// The broker tests share, a topic each.
    #[default]
    Shared,
    /// A broker of the stack's own, to pause, kill and start again.
    Own,
    /// A broker of the stack's own whose clients' listener takes only
    /// SCRAM-SHA-512 over TLS.
    SaslSsl,
    /// Three nodes of the stack's own, the topic replicated on each.
    Cluster,
}

/// A stack to start: [`Stack::builder`], then options, then
/// [`StackBuilder::start`].
#[derive(Debug, Clone)]
#[must_use = "a builder starts nothing until `start` is awaited"]
pub struct StackBuilder {
    own_redis: bool,
    broker: Broker,
    own_postgres: bool,
    postgres_proxy: bool,
    read_replica: bool,
    projectors: usize,
    env: Vec<(String, String)>,
}

impl Default for StackBuilder {
    fn default() -> Self {
        Self {
            own_redis: false,
            broker: Broker::Shared,
            own_postgres: false,
            postgres_proxy: false,
            read_replica: false,
            projectors: 1,
            env: Vec::new(),
        }
    }
}

impl StackBuilder {
    /// A Redis of the stack's own, which the test may stop and start
    /// ([`Stack::stop_redis`], [`Stack::start_redis`], [`Stack::redis_cli`]).
    pub fn own_redis(mut self) -> Self {
        self.own_redis = true;
        self
    }

    /// A broker of the stack's own, which the test may pause
    /// ([`Stack::pause_broker`]), kill and start again with its log kept.
    /// Other stacks share one broker, a topic each.
    pub fn own_broker(mut self) -> Self {
        self.broker = Broker::Own;
        self
    }

    /// A broker of the stack's own whose clients' listener takes only
    /// SCRAM-SHA-512 over TLS, with certificates the test makes; the
    /// processes connect there as [`crate::SASL_USER`], their password in a
    /// file ([`Stack::sasl_password_file`]).
    pub fn sasl_ssl_broker(mut self) -> Self {
        self.broker = Broker::SaslSsl;
        self
    }

    /// A Kafka cluster of the stack's own in the production shape: three
    /// nodes, the topic in 6 partitions replicated on each, with
    /// `min.insync.replicas` 2. The test may kill and start its nodes
    /// ([`Stack::kill_cluster_node`], [`Stack::partition_leader`]).
    pub fn broker_cluster(mut self) -> Self {
        self.broker = Broker::Cluster;
        self
    }

    /// A PostgreSQL cluster of the stack's own (`deploy/stack
    /// postgres-cluster`), which the test may back up, restore
    /// ([`Stack::restore_postgres`]) or replace with an empty one.
    pub fn own_postgres(mut self) -> Self {
        self.own_postgres = true;
        self
    }

    /// The processes reach Postgres through a proxy the test may cut
    /// ([`Stack::postgres_down`]) and restore.
    pub fn postgres_through_proxy(mut self) -> Self {
        self.postgres_proxy = true;
        self
    }

    /// The API reads history and series through `RATEWIRE_READ_DATABASE_URL`,
    /// a second way to the same database (standing in for a replica) that
    /// the test may cut ([`Stack::replica_down`]) and restore.
    pub fn read_replica(mut self) -> Self {
        self.read_replica = true;
        self
    }

    /// `count` projectors in one group: `ratewire-projector`, then
    /// `projector-b`, `projector-c`, ... each with a health listener of its
    /// own ([`Stack::projector_url_of`]); the stack waits until all are ready.
    pub fn projectors(mut self, count: usize) -> Self {
        assert!(count >= 1, "a stack runs at least one projector");
        self.projectors = count;
        self
    }

    /// A setting every process of the stack gets, replacing the test
    /// default of the same name.
    pub fn env(mut self, name: &str, value: impl Into<String>) -> Self {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.to_owned(), value.into()));
        self
    }

    /// Starts the world and the processes, and waits until they are ready.
    pub async fn start(self) -> Result<Stack> {
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let database = format!("rw_e2e_{id}");
        let logs = binary("ratewire-api")?
            .parent()
            .context("the binaries' directory")?
            .join("e2e-logs")
            .join(&id);
        std::fs::create_dir_all(&logs)?;
        std::fs::write(logs.join(SIGNING_KEY_FILE), crate::SIGNING_KEY_PEM)?;

        let own_postgres = match self.own_postgres {
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

        let ports = Ports::free();
        let mut stack = Stack {
            api_url: format!("http://127.0.0.1:{}", ports.api),
            api_operator_url: format!("http://127.0.0.1:{}", ports.api_operator),
            ingest_url: format!("http://127.0.0.1:{}", ports.ingest),
            ingest_operator_url: format!("http://127.0.0.1:{}", ports.ingest_operator),
            projector_url: format!("http://127.0.0.1:{}", ports.projector),
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
            projectors: Vec::new(),
            contract: None,
            own_redis: None,
            redis_url: REDIS.to_owned(),
            brokers: String::new(),
            own_broker: None,
            cluster: None,
            broker_env: Vec::new(),
            env: Vec::new(),
            postgres_proxy: None,
            replica_proxy: None,
            harness_key: Default::default(),
            postgres: direct,
            own_postgres,
        };

        let mut env = Vec::new();
        let postgres = match self.postgres_proxy {
            true => {
                let mut proxy = proxy::Proxy::new(free_port(), "127.0.0.1:5432");
                proxy.up().await?;
                let url = format!("postgres://postgres@127.0.0.1:{}", proxy.port);
                stack.postgres_proxy = Some(proxy);
                url
            }
            false => stack.postgres.clone(),
        };
        if self.read_replica {
            let mut proxy = proxy::Proxy::new(free_port(), "127.0.0.1:5432");
            proxy.up().await?;
            env.push((
                "RATEWIRE_READ_DATABASE_URL",
                format!(
                    "postgres://postgres@127.0.0.1:{}/{}",
                    proxy.port, stack.database
                ),
            ));
            stack.replica_proxy = Some(proxy);
        }
        if self.own_redis {
            let port = free_port();
            stack.own_redis = Some(port);
            stack.start_redis()?;
            eventually("its own redis", Duration::from_secs(10), || async {
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .ok()
                    .map(|_| ())
            })
            .await?;
            stack.redis_url = format!("redis://127.0.0.1:{port}/0");
        }
        match self.broker {
            Broker::Shared => stack.brokers = broker::shared()?,
            Broker::Own => {
                let ports = (free_port(), free_port());
                stack.own_broker = Some(ports);
                stack.brokers = format!("127.0.0.1:{}", ports.0);
                stack.start_broker()?;
            }
            Broker::SaslSsl => {
                let ports = (free_port(), free_port());
                stack.own_broker = Some(ports);
                let secured = services::sasl_ssl(&stack.logs, ports)?;
                stack.broker_env = secured.broker_env;
                stack.brokers = format!("127.0.0.1:{}", secured.listener);
                env.extend(secured.clients);
                stack.start_broker()?;
            }
            Broker::Cluster => {
                let cluster = super::cluster::Cluster::new();
                stack.brokers = cluster.brokers();
                stack.cluster = Some(cluster);
                stack.start_cluster()?;
                env.push(("RATEWIRE_TOPIC_PARTITIONS", "6".to_owned()));
                env.push((
                    "RATEWIRE_TOPIC_REPLICATION",
                    super::cluster::NODES.to_string(),
                ));
            }
        }
        env.extend(ports.settings(&stack, &postgres));
        let given = self.env;
        stack.env = env
            .into_iter()
            .filter(|(name, _)| !given.iter().any(|(n, _)| n == name))
            .map(|(n, v)| (n.to_owned(), v))
            .chain(given.iter().cloned())
            .collect();
        for name in PROCESSES {
            stack.start_process(name)?;
        }
        let first = (PROCESSES[1].to_owned(), stack.projector_url.clone());
        stack.projectors.push(first);
        for n in 1..self.projectors {
            let name = format!("projector-{}", char::from(b'a' + n as u8));
            stack.start_another_projector(&name)?;
        }
        stack.wait_ready().await?;
        for (_, url) in stack.projectors.clone().iter().skip(1) {
            stack
                .wait_process_ready(url, Duration::from_secs(60))
                .await?;
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
}

/// The listeners of a stack's first three processes.
struct Ports {
    api: u16,
    api_operator: u16,
    ingest: u16,
    ingest_operator: u16,
    projector: u16,
}

impl Ports {
    fn free() -> Self {
        Self {
            api: free_port(),
            api_operator: free_port(),
            ingest: free_port(),
            ingest_operator: free_port(),
            projector: free_port(),
        }
    }

    /// The test defaults every process of `stack` gets, with Postgres at
    /// `postgres` (direct or through the stack's proxy).
    fn settings(&self, stack: &Stack, postgres: &str) -> Vec<(&'static str, String)> {
        let local = |port: u16| format!("127.0.0.1:{port}");
        vec![
            (
                "RATEWIRE_DATABASE_URL",
                format!("{postgres}/{}", stack.database),
            ),
            ("RATEWIRE_REDIS_URL", stack.redis_url.clone()),
            ("RATEWIRE_REDIS_PREFIX", stack.redis_prefix.clone()),
            ("RATEWIRE_KAFKA_BROKERS", stack.brokers.clone()),
            ("RATEWIRE_TOPIC", stack.topic.clone()),
            ("RATEWIRE_KAFKA_GROUP", stack.group.clone()),
            ("RATEWIRE_ADMIN_TOKEN", ADMIN_TOKEN.to_owned()),
            ("RATEWIRE_API_LISTEN", local(self.api)),
            ("RATEWIRE_API_OPERATOR_LISTEN", local(self.api_operator)),
            ("RATEWIRE_INGEST_LISTEN", local(self.ingest)),
            (
                "RATEWIRE_INGEST_OPERATOR_LISTEN",
                local(self.ingest_operator),
            ),
            ("RATEWIRE_INGEST_URL", stack.ingest_url.clone()),
            (
                "RATEWIRE_INGEST_OPERATOR_URL",
                stack.ingest_operator_url.clone(),
            ),
            ("RATEWIRE_PROJECTOR_LISTEN", local(self.projector)),
            ("RUST_LOG", "info,ratewire_projector=debug".to_owned()),
            (
                "RATEWIRE_WEBHOOK_SECRETS_KEY",
                crate::WEBHOOK_SECRETS_KEY.to_owned(),
            ),
            (
                "RATEWIRE_SIGNING_KEY_FILE",
                stack.logs.join(SIGNING_KEY_FILE).display().to_string(),
            ),
            // Receivers are on loopback.
            ("RATEWIRE_WEBHOOK_ALLOW_PRIVATE", "true".to_owned()),
        ]
    }
}
