//! The relay: one task per process follows the changes stream and offers
//! each delivery to the subscribers that follow it.

use std::sync::Arc;

use ratewire_readmodel::redis::Connection;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::live::changes::{parse_entries, Reader};
use crate::live::delivery::{Delivery, Position};
use crate::live::fanout::{Fanout, Interest, Subscriber};
use crate::live::follower::Follower;
use crate::views::cache::ViewCache;
use crate::views::read_model::ReadModels;

/// The fan-out: one task follows the changes stream; subscribers receive
/// the deliveries they follow.
#[derive(Clone)]
pub struct Relay {
    fanout: Arc<Fanout>,
    pub reader: Reader,
    /// The views kept in this process, dropped here as their entries are
    /// read (and suspended while the stream cannot be followed).
    cache: Arc<ViewCache>,
}

impl Relay {
    /// A relay whose subscribers may fall `behind_at_most` deliveries
    /// behind before they are dropped.
    pub fn new(reader: Reader, behind_at_most: usize, cache: Arc<ViewCache>) -> Self {
        Self {
            fanout: Fanout::new(behind_at_most),
            reader,
            cache,
        }
    }

    pub fn subscribe(&self, interest: Interest) -> Subscriber {
        self.fanout.subscribe(interest)
    }

    pub fn subscribers(&self) -> usize {
        self.fanout.subscribers()
    }

    /// Offers one delivery to its subscribers.
    pub(crate) fn offer(&self, delivery: Delivery) {
        self.fanout.send(delivery);
    }

    /// Follows the active generation's changes stream until shutdown, with
    /// `blocking` (a connection of its own: a blocking read holds it).
    pub async fn follow(self, blocking: Connection, read: ReadModels, shutdown: CancellationToken) {
        let mut follower = Follower::new(
            blocking,
            shutdown,
            "the changes stream",
            "live subscribers wait",
        );
        let mut following: Option<(String, Position)> = None;
        while !follower.stopping() {
            let views = read.current().views.clone();
            let key = views.changes();
            let from = match &following {
                Some((followed, at)) if *followed == key => *at,
                _ => match self.reader.newest(&views).await {
                    Ok(newest) => {
                        if following.is_some() {
                            info!("the changes stream moved to another generation; subscribers start again");
                            self.fanout.send(Delivery::Reset);
                        }
                        following = Some((key.clone(), newest));
                        // Every entry from here on is read: views kept from
                        // now are dropped when they change.
                        self.cache.suspend();
                        self.cache.resume();
                        newest
                    }
                    Err(e) => {
                        self.cache.suspend();
                        if !follower.back_off(&e).await {
                            return;
                        }
                        continue;
                    }
                },
            };
            let changes = match follower.read(&key, &from.to_string()).await {
                None => return,
                Some(Ok(entries)) => parse_entries(entries),
                Some(Err(e)) => {
                    self.cache.suspend();
                    if !follower.back_off(&e).await {
                        return;
                    }
                    continue;
                }
            };
            // Before anything else hears of them; the position kept is
            // before these, so no entry after it goes unread.
            for (_, change) in &changes {
                self.cache
                    .drop_views(change.views(&views).iter().map(String::as_str));
            }
            self.cache.resume();
            let Some(last) = changes.last().map(|(at, _)| *at) else {
                continue;
            };
            match self.reader.deliveries(&views, &changes).await {
                Ok(deliveries) => {
                    follower.answered();
                    metrics::counter!("ratewire_api_stream_changes_total")
                        .increment(deliveries.len() as u64);
                    for delivery in deliveries {
                        self.fanout.send(delivery);
                    }
                    following = Some((key, last));
                }
                Err(e) => follower.failed(&e),
            }
        }
    }
}
