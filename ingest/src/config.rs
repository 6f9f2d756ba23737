//! Ingest's settings, from `RATEWIRE_*` environment variables (clap checks
//! them at start; `ratewire-ingest --help` lists them with defaults). Those
//! every process has are in `ratewire_service::settings`.

use std::net::SocketAddr;
use std::time::Duration;

use chrono::{DateTime, Utc};

use ratewire_proto::DEFAULT_TOPIC;
use ratewire_service::kafka::KafkaConnection;
use ratewire_service::settings::{parse_schema, Common, RetentionSchedule, Serving};

#[derive(clap::Args, Debug, Clone)]
pub struct Config {
    /// Address of the public listener (publishers' board pushes, probes).
    #[arg(long, env = "RATEWIRE_INGEST_LISTEN", default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// Address of the operator listener (banks, tokens, `/metrics`,
    /// probes); keep it off any public network.
    #[arg(
        long,
        env = "RATEWIRE_INGEST_OPERATOR_LISTEN",
        default_value = "127.0.0.1:9081"
    )]
    pub operator_listen: SocketAddr,
    #[command(flatten)]
    pub retention: RetentionSchedule,
    /// Failed publisher authentications a client may make per minute; past
    /// them it gets 429 until the minute ends, without its token being
    /// checked (so made-up tokens cost no database work).
    #[arg(long, env = "RATEWIRE_AUTH_FAILURES_PER_MINUTE", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub auth_failures_per_minute: u32,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub serving: Serving,
    /// Postgres schema for ingest's own tables (banks, publisher tokens).
    #[arg(long, env = "RATEWIRE_INGEST_SCHEMA", default_value = "ingest", value_parser = parse_schema)]
    pub schema: String,
    #[command(flatten)]
    pub kafka: KafkaConnection,
    /// The event topic.
    #[arg(long, env = "RATEWIRE_TOPIC", default_value = DEFAULT_TOPIC)]
    pub topic: String,
    /// Create the topic at start when it does not exist (with unlimited
    /// retention: the log is the system of record).
    #[arg(long, env = "RATEWIRE_CREATE_TOPIC", default_value_t = true, action = clap::ArgAction::Set)]
    pub create_topic: bool,
    /// Partitions of a topic created at start.
    #[arg(long, env = "RATEWIRE_TOPIC_PARTITIONS", default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=10_000))]
    pub topic_partitions: i32,
    /// Replication factor of a topic created at start.
    #[arg(long, env = "RATEWIRE_TOPIC_REPLICATION", default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..=16))]
    pub topic_replication: i32,
    /// `min.insync.replicas` of a topic created at start: how many replicas
    /// must hold an event before the broker acknowledges it (acks=all).
    /// Default: the replication factor minus one, at least 1.
    #[arg(long, env = "RATEWIRE_TOPIC_MIN_INSYNC_REPLICAS", value_parser = clap::value_parser!(i32).range(1..=16))]
    pub topic_min_insync_replicas: Option<i32>,
    /// The earliest as-of time a board may carry (RFC 3339, or a date such
    /// as 1990-01-01 for its midnight UTC); not before the contract's own
    /// horizon, 1990-01-01, which the projector enforces on the log.
    #[arg(long, env = "RATEWIRE_AS_OF_HORIZON", default_value = "1990-01-01", value_parser = parse_horizon)]
    pub as_of_horizon: DateTime<Utc>,
    /// Longest wait, in milliseconds, for the broker's acknowledgement before
    /// a publisher gets 503.
    #[arg(long, env = "RATEWIRE_PUBLISH_TIMEOUT_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..=120_000))]
    pub publish_timeout_ms: u64,
    /// Days a board can be retracted after it was accepted (its record is
    /// kept that long, see docs/publishers.md).
    #[arg(long, env = "RATEWIRE_RETRACTION_WINDOW_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3_650))]
    pub retraction_window_days: u64,
    /// Largest accepted request body, in bytes (413 above).
    #[arg(long, env = "RATEWIRE_INGEST_BODY_LIMIT", default_value_t = 262_144, value_parser = clap::value_parser!(u64).range(1024..=16_777_216))]
    pub body_limit: u64,
}

impl Config {
    pub fn retraction_window(&self) -> chrono::Duration {
        chrono::Duration::days(self.retraction_window_days as i64)
    }

    pub fn publish_timeout(&self) -> Duration {
        Duration::from_millis(self.publish_timeout_ms)
    }

    /// The topic's `min.insync.replicas`: as configured, else the
    /// replication factor minus one, at least 1 (a topic of 3 replicas
    /// acknowledges once 2 hold an event, and survives losing one).
    pub fn min_insync_replicas(&self) -> i32 {
        self.topic_min_insync_replicas
            .unwrap_or((self.topic_replication - 1).max(1))
            .min(self.topic_replication)
    }
}

fn parse_horizon(s: &str) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .or_else(|_| {
            chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map(|d| d.and_time(chrono::NaiveTime::MIN).and_utc())
        })
        .map_err(|_| format!("{s:?} is neither an RFC 3339 time nor a date like 1990-01-01"))
        .and_then(|t| {
            let contract = ratewire_proto::rules::earliest_as_of();
            if t < contract {
                Err(format!(
                    "{s:?} is before 1990-01-01, the earliest as-of time the log's contract allows"
                ))
            } else {
                Ok(t)
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_horizon_is_a_date_or_a_time() {
        assert_eq!(
            parse_horizon("1990-01-01").unwrap().to_rfc3339(),
            "1990-01-01T00:00:00+00:00"
        );
        assert!(parse_horizon("2001-02-03T04:05:06Z").is_ok());
        assert!(parse_horizon("yesterday").is_err());
        assert!(
            parse_horizon("1989-12-31").is_err(),
            "never earlier than the contract's"
        );
    }
}
