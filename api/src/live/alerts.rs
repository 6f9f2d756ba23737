//! The alerts' stream: crossings the projectors offer (see the projector's
//! `delivery::stream`), followed from its newest entry by one task per
//! process and handed to the subscribers of the key that owns each.
//! Live only: a reconnecting client does not get them again.

use std::time::Duration;

use ratewire_readmodel::redis::Connection;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::live::delivery::{frame, Delivery};
use crate::live::Relay;

/// Entries read per blocking read.
const READ_AT_MOST: usize = 512;

type Entries = Option<Vec<(String, Vec<(String, Vec<(String, String)>)>)>>;

impl Relay {
    /// Follows the alerts' stream `key` until shutdown, with `blocking` (a
    /// connection of its own: a blocking read holds it).
    pub async fn follow_alerts(
        self,
        blocking: Connection,
        key: String,
        shutdown: CancellationToken,
    ) {
        // "$": only what comes from now on.
        let mut from = "$".to_owned();
        let mut failing = false;
        loop {
            let read = async {
                let mut conn = blocking.clone();
                redis::cmd("XREAD")
                    .arg("COUNT")
                    .arg(READ_AT_MOST)
                    .arg("BLOCK")
                    .arg(1_000)
                    .arg("STREAMS")
                    .arg(&key)
                    .arg(&from)
                    .query_async::<Entries>(&mut conn)
                    .await
            };
            let entries = tokio::select! {
                _ = shutdown.cancelled() => return,
                entries = read => entries,
            };
            match entries {
                Ok(streams) => {
                    if failing {
                        info!("following the alerts' stream again");
                        failing = false;
                    }
                    for (id, fields) in streams.into_iter().flatten().flat_map(|(_, e)| e) {
                        from = id;
                        let field = |name: &str| {
                            fields
                                .iter()
                                .find(|(n, _)| n == name)
                                .map(|(_, v)| v.clone())
                        };
                        if let (Some(owner), Some(data)) = (field("owner"), field("data")) {
                            metrics::counter!("ratewire_api_stream_alerts_total").increment(1);
                            self.offer(Delivery::Alert {
                                owner,
                                frame: frame("alert", None, &data),
                            });
                        }
                    }
                }
                Err(e) => {
                    if !failing {
                        warn!(error = %e, "following the alerts' stream failed; alert events wait until Redis answers");
                        failing = true;
                    }
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    }
                }
            }
        }
    }
}
