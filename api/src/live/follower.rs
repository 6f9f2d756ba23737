//! Following a Redis stream, as the relay's tasks do: one blocking read at
//! a time on a connection of their own, a pause after a failure, a log
//! line when reads start failing and one when they answer again, and an
//! end at shutdown. The relay follows the changes stream with one, and the
//! alerts' stream with another.

use std::time::Duration;

use ratewire_readmodel::redis::Connection;
use redis::{RedisError, RedisResult};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Entries read per blocking read.
const READ_AT_MOST: usize = 512;

/// Milliseconds one read waits for a new entry before it answers empty
/// (and the follower looks at its stream's key again).
const BLOCK_MS: u64 = 1_000;

/// The pause after a failure before the next try: Redis is away or
/// restarting, and a tight loop would only fill the log.
const BACK_OFF: Duration = Duration::from_millis(500);

/// One entry of a stream: its id and its fields.
pub type Entry = (String, Vec<(String, String)>);

/// The follower of one stream.
pub struct Follower {
    /// A blocking read holds its connection: this one is the follower's own.
    blocking: Connection,
    shutdown: CancellationToken,
    /// What is followed, for the log ("the changes stream").
    what: &'static str,
    /// What waits while it fails, for the log.
    meanwhile: &'static str,
    failing: bool,
}

impl Follower {
    pub fn new(
        blocking: Connection,
        shutdown: CancellationToken,
        what: &'static str,
        meanwhile: &'static str,
    ) -> Self {
        Self {
            blocking,
            shutdown,
            what,
            meanwhile,
            failing: false,
        }
    }

    /// Whether the process is stopping.
    pub fn stopping(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// The entries of the stream `key` after `from` (an entry id, or `$`:
    /// only what comes next), waiting up to a second for the first; `None`
    /// once the process stops.
    pub async fn read(&self, key: &str, from: &str) -> Option<RedisResult<Vec<Entry>>> {
        let mut conn = self.blocking.clone();
        let mut command = redis::cmd("XREAD");
        command
            .arg("COUNT")
            .arg(READ_AT_MOST)
            .arg("BLOCK")
            .arg(BLOCK_MS)
            .arg("STREAMS")
            .arg(key)
            .arg(from);
        let read = command.query_async::<Option<Vec<(String, Vec<Entry>)>>>(&mut conn);
        tokio::select! {
            _ = self.shutdown.cancelled() => None,
            streams = read => Some(streams.map(|streams| {
                streams
                    .into_iter()
                    .flatten()
                    .flat_map(|(_, entries)| entries)
                    .collect()
            })),
        }
    }

    /// Notes a failure: logged when it starts a run of them.
    pub fn failed(&mut self, e: &RedisError) {
        if !self.failing {
            warn!(error = %e, "following {} failed; {} until Redis answers", self.what, self.meanwhile);
            self.failing = true;
        }
    }

    /// Notes a success: logged when it ends a run of failures.
    pub fn answered(&mut self) {
        if self.failing {
            info!("following {} again", self.what);
            self.failing = false;
        }
    }

    /// Notes a failure and waits before the next try; `false` once the
    /// process stops.
    pub async fn back_off(&mut self, e: &RedisError) -> bool {
        self.failed(e);
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            _ = tokio::time::sleep(BACK_OFF) => true,
        }
    }
}
