//! The alerts' stream: crossings the projectors offer (see the projector's
//! `delivery::stream`), followed from its newest entry by one task per
//! process and handed to the subscribers of the key that owns each.
//! Live only: a reconnecting client does not get them again.

use ratewire_readmodel::redis::Connection;
use tokio_util::sync::CancellationToken;

use crate::live::delivery::{frame, Delivery};
use crate::live::follower::Follower;
use crate::live::Relay;

impl Relay {
    /// Follows the alerts' stream `key` until shutdown, with `blocking` (a
    /// connection of its own: a blocking read holds it).
    pub async fn follow_alerts(
        self,
        blocking: Connection,
        key: String,
        shutdown: CancellationToken,
    ) {
        let mut follower = Follower::new(
            blocking,
            shutdown,
            "the alerts' stream",
            "alert events wait",
        );
        // "$": only what comes from now on.
        let mut from = "$".to_owned();
        while let Some(read) = follower.read(&key, &from).await {
            let entries = match read {
                Ok(entries) => entries,
                Err(e) if follower.back_off(&e).await => continue,
                Err(_) => return,
            };
            follower.answered();
            for (id, fields) in entries {
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
    }
}
