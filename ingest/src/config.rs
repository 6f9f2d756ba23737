//! Ingest's settings, from `RATEWIRE_*` environment variables (clap checks
//! them at start; `ratewire-ingest --help` lists them with defaults).

use std::net::SocketAddr;
use std::time::Duration;

use ratewire_proto::DEFAULT_TOPIC;

#[derive(clap::Args, Debug, Clone)]
pub struct Config {
    /// Address the ingest HTTP service listens on.
    #[arg(long, env = "RATEWIRE_INGEST_LISTEN", default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// Postgres connection URL (the database must exist).
    #[arg(
        long,
        env = "RATEWIRE_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/ratewire"
    )]
    pub database_url: String,
    /// Postgres schema for ingest's own tables (banks, publisher tokens).
    #[arg(long, env = "RATEWIRE_INGEST_SCHEMA", default_value = "ingest")]
    pub schema: String,
    /// Kafka bootstrap servers, comma separated.
    #[arg(long, env = "RATEWIRE_KAFKA_BROKERS", default_value = "127.0.0.1:9092")]
    pub kafka_brokers: String,
    /// The event topic.
    #[arg(long, env = "RATEWIRE_TOPIC", default_value = DEFAULT_TOPIC)]
    pub topic: String,
    /// Create the topic at start when it does not exist.
    #[arg(long, env = "RATEWIRE_CREATE_TOPIC", default_value_t = true, action = clap::ArgAction::Set)]
    pub create_topic: bool,
    /// Partitions of a topic created at start.
    #[arg(long, env = "RATEWIRE_TOPIC_PARTITIONS", default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=10_000))]
    pub topic_partitions: i32,
    /// Replication factor of a topic created at start.
    #[arg(long, env = "RATEWIRE_TOPIC_REPLICATION", default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..=16))]
    pub topic_replication: i32,
    /// Longest wait, in milliseconds, for the broker's acknowledgement before
    /// a publisher gets 503.
    #[arg(long, env = "RATEWIRE_PUBLISH_TIMEOUT_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..=120_000))]
    pub publish_timeout_ms: u64,
    /// Largest accepted request body, in bytes.
    #[arg(long, env = "RATEWIRE_INGEST_BODY_LIMIT", default_value_t = 262_144, value_parser = clap::value_parser!(u64).range(1024..=16_777_216))]
    pub body_limit: u64,
    /// The operators' bearer token; operator endpoints refuse every call when unset.
    #[arg(long, env = "RATEWIRE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// `text` or `json` log lines.
    #[arg(long, env = "RATEWIRE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

impl Config {
    pub fn publish_timeout(&self) -> Duration {
        Duration::from_millis(self.publish_timeout_ms)
    }
}
