//! The projector's settings, from `RATEWIRE_*` environment variables.
//!
//! clap reads and checks them at start: a bad value stops the process with a
//! message naming the variable; `ratewire-projector --help` lists them all
//! with their defaults. Those every process has are in
//! `ratewire_service::settings::Common`, those the API shares in
//! `ratewire_readmodel::ReadModelSettings`.

use std::net::SocketAddr;
use std::time::Duration;

use ratewire_alerts::{AlertSettings, DeliverySettings};
use ratewire_proto::DEFAULT_TOPIC;
use ratewire_readmodel::ReadModelSettings;

use crate::retention::{RawHistory, RetentionPolicy};
use ratewire_service::kafka::KafkaConnection;
use ratewire_service::settings::{Common, RetentionSchedule};
use ratewire_service::ListenerLimits;

#[derive(clap::Args, Debug, Clone)]
pub struct Config {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub read_model: ReadModelSettings,
    #[command(flatten)]
    pub alerts: AlertSettings,
    #[command(flatten)]
    pub delivery: DeliverySettings,
    #[command(flatten)]
    pub kafka: KafkaConnection,
    /// The event topic.
    #[arg(long, env = "RATEWIRE_TOPIC", default_value = DEFAULT_TOPIC)]
    pub topic: String,
    /// The consumer group the projectors share the partitions in (with
    /// `auto`); the positions committed there are for lag tools only, the
    /// authoritative offsets live in Postgres.
    #[arg(
        long,
        env = "RATEWIRE_KAFKA_GROUP",
        default_value = "ratewire-projector"
    )]
    pub group_id: String,
    /// How the group shares the partitions: `consumer` (KIP-848: the
    /// broker's coordinator assigns them; Apache Kafka 4.0 or later) or
    /// `classic` (the members agree through the broker, cooperative-sticky;
    /// for brokers without KIP-848).
    #[arg(long, env = "RATEWIRE_KAFKA_GROUP_PROTOCOL", default_value = "consumer", value_parser = ["consumer", "classic"])]
    pub group_protocol: String,
    /// With `classic`: how long the broker waits for a silent member before
    /// its partitions move (with `consumer` the broker's
    /// `group.consumer.session.timeout.ms` decides).
    #[arg(long, env = "RATEWIRE_KAFKA_SESSION_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1_000..=300_000))]
    pub session_timeout_ms: u64,
    /// Which partitions this instance folds: `auto` (live instances share
    /// them through Kafka's consumer group `RATEWIRE_KAFKA_GROUP`), or by
    /// hand: `all`, `slice:I/N` (those whose number modulo N is I) or a
    /// comma-separated list such as `0,2`. Do not mix `auto` instances with
    /// fixed ones on one topic.
    #[arg(long, env = "RATEWIRE_PROJECTOR_PARTITIONS", default_value = "auto", value_parser = parse_partitions)]
    pub partitions: Partitions,
    /// Most messages applied in one batch (one Postgres transaction per
    /// lane). Larger batches spread over more partitions, so more lanes
    /// work at once on a backlog.
    #[arg(long, env = "RATEWIRE_PROJECTOR_BATCH_MAX", default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub batch_max: u32,
    /// Most payload bytes in one batch (a batch always takes at least one
    /// message): what bounds its memory, since a board can be up to
    /// ingest's body limit. A batch in flight takes about six times its
    /// payload.
    #[arg(long, env = "RATEWIRE_PROJECTOR_BATCH_BYTES", default_value_t = 16 << 20, value_parser = clap::value_parser!(u64).range(1024..=1 << 30))]
    pub batch_bytes: u64,
    /// Most transactions a batch is applied in at once, each over its own
    /// partitions (a bank's events stay in order in its partition's
    /// transaction). More lanes fold a backlog faster while Postgres has
    /// cores to spare; 1 applies each batch in one transaction.
    #[arg(long, env = "RATEWIRE_PROJECTOR_LANES", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub lanes: u32,
    /// Longest wait, in milliseconds, for a batch to fill before applying it.
    /// 0 applies what has arrived at once: batches still grow under load
    /// (messages queue up while one is applied), without a fixed delay on
    /// every board when the log is quiet.
    #[arg(long, env = "RATEWIRE_PROJECTOR_BATCH_WAIT_MS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=5_000))]
    pub batch_wait_ms: u64,
    /// Longest time, in milliseconds, the broker may hold a fetch while it
    /// has no new data. Kafka answers a fetch as soon as data arrives, so
    /// this only sets how often a quiet log is asked again (a short wait
    /// keeps the broker busy answering empty fetches). Brokers that hold
    /// every fetch for its full wait add up to this much to
    /// publish-to-visible latency: lower it there, or set
    /// `RATEWIRE_PROJECTOR_IDLE_AFTER_MS`.
    #[arg(long, env = "RATEWIRE_PROJECTOR_FETCH_WAIT_MS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=5_000))]
    pub fetch_wait_ms: u64,
    /// Milliseconds without a new message after which the partitions are
    /// no longer read (no fetches at all) until ingest says the log has new
    /// events, or the lag report (every second) shows that it has; 0 never
    /// pauses. For brokers that hold every fetch for its full wait, where
    /// reading with a short wait to stay fresh keeps the broker busy while
    /// the log is quiet. Ingest's notices come by Postgres NOTIFY, so only
    /// to projectors on its database; events without one wait a second or
    /// two.
    #[arg(long, env = "RATEWIRE_PROJECTOR_IDLE_AFTER_MS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub idle_after_ms: u64,
    /// Milliseconds the broker's clock may be ahead of this process's: a
    /// partition read to its end at time W counts as settled only up to W
    /// less this (an answer as known at T is final once every partition is
    /// settled past T).
    #[arg(long, env = "RATEWIRE_KNOWN_AT_SKEW_MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub known_at_skew_ms: u64,
    /// Most messages this instance may be behind the log and still report
    /// ready on /readyz.
    #[arg(long, env = "RATEWIRE_PROJECTOR_READY_LAG", default_value_t = 1000)]
    pub ready_lag: u64,
    /// Address of the projector's health and metrics endpoint.
    #[arg(
        long,
        env = "RATEWIRE_PROJECTOR_LISTEN",
        default_value = "127.0.0.1:8082"
    )]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub limits: ListenerLimits,
    /// Days an applied event's id is remembered to skip a duplicate of it
    /// (a producer retry arrives within seconds).
    #[arg(long, env = "RATEWIRE_APPLIED_EVENTS_RETENTION_DAYS", default_value_t = 7, value_parser = clap::value_parser!(u64).range(1..=3_650))]
    pub applied_events_retention_days: u64,
    /// Days a resolved dead letter is kept (unresolved ones are kept).
    #[arg(long, env = "RATEWIRE_DEAD_LETTERS_RETENTION_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3_650))]
    pub dead_letters_retention_days: u64,
    /// How long the raw history (every board version) is kept: `forever`,
    /// or `N months` (2 to 1200), after which whole months are dropped
    /// (docs/operations.md).
    #[arg(
        long,
        env = "RATEWIRE_RAW_HISTORY_RETENTION",
        default_value = "forever"
    )]
    pub raw_history_retention: RawHistory,
    #[command(flatten)]
    pub retention: RetentionSchedule,
}

impl Config {
    pub fn retention_policy(&self) -> RetentionPolicy {
        let days = |n: u64| Duration::from_secs(n * 86_400);
        RetentionPolicy {
            applied_events: days(self.applied_events_retention_days),
            resolved_dead_letters: days(self.dead_letters_retention_days),
            raw_history: self.raw_history_retention,
        }
    }

    /// Connections to the read model: one per lane, and a few for the
    /// views, reports and housekeeping beside the fold.
    pub fn pool_size(&self) -> u32 {
        8.max(self.lanes + 4)
    }

    pub fn batch_wait(&self) -> Duration {
        Duration::from_millis(self.batch_wait_ms)
    }

    /// How long the log may be quiet before reads pause; `None`: never.
    pub fn idle_after(&self) -> Option<Duration> {
        (self.idle_after_ms > 0).then(|| Duration::from_millis(self.idle_after_ms))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partitions {
    /// Shared with the other live instances through the consumer group.
    Auto,
    All,
    Only(Vec<i32>),
    /// Every partition whose number modulo `of` is `index`: replicas that
    /// differ only in their index (a StatefulSet's pod index) split any
    /// partition count between them without a list per replica.
    Slice {
        index: u32,
        of: u32,
    },
}

impl Partitions {
    pub fn includes(&self, partition: i32) -> bool {
        match self {
            Partitions::Auto | Partitions::All => true,
            Partitions::Only(list) => list.contains(&partition),
            Partitions::Slice { index, of } => {
                u32::try_from(partition).is_ok_and(|p| p % of == *index)
            }
        }
    }
}

fn parse_partitions(s: &str) -> Result<Partitions, String> {
    match s.trim() {
        "auto" => return Ok(Partitions::Auto),
        "all" => return Ok(Partitions::All),
        _ => {}
    }
    if let Some(slice) = s.trim().strip_prefix("slice:") {
        let parsed = slice
            .split_once('/')
            .and_then(|(i, n)| Some((i.trim().parse::<u32>().ok()?, n.trim().parse::<u32>().ok()?)))
            .filter(|(i, n)| i < n);
        return parsed
            .map(|(index, of)| Partitions::Slice { index, of })
            .ok_or_else(|| {
                format!("expected `slice:I/N` with I < N, like `slice:0/2`, got {s:?}")
            });
    }
    let list = s
        .split(',')
        .map(|p| p.trim().parse::<i32>().ok().filter(|p| *p >= 0))
        .collect::<Option<Vec<_>>>()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| {
            format!(
                "expected `auto`, `all`, `slice:I/N` or a list of partition numbers like `0,1`, got {s:?}"
            )
        })?;
    Ok(Partitions::Only(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_all_or_a_list() {
        assert_eq!(parse_partitions("all"), Ok(Partitions::All));
        assert_eq!(parse_partitions("auto"), Ok(Partitions::Auto));
        assert_eq!(parse_partitions("0, 2"), Ok(Partitions::Only(vec![0, 2])));
        assert!(parse_partitions("").is_err());
        assert!(parse_partitions("-1").is_err());
        assert!(parse_partitions("a").is_err());
        let second = parse_partitions("slice:1/2").unwrap();
        assert_eq!(second, Partitions::Slice { index: 1, of: 2 });
        assert_eq!(
            (0..5).filter(|p| second.includes(*p)).collect::<Vec<_>>(),
            [1, 3]
        );
        assert!(parse_partitions("slice:2/2").is_err());
        assert!(parse_partitions("slice:0/0").is_err());
        assert!(parse_partitions("slice:x").is_err());
    }
}
