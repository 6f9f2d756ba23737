//! Says on Postgres that the log has new events ([`APPENDED_CHANNEL`]), so a
//! projector that pauses its reads while the log is quiet reads at once.
//!
//! Rings are coalesced: one notification covers every event acknowledged
//! while the previous one was being sent or in the `GAP` after it, so a
//! busy log costs a few hundred notifications a second at most, not one a
//! round trip. A notification that fails is only logged: the projector
//! also looks at the log on a timer.

use std::time::Duration;

use ratewire_proto::APPENDED_CHANNEL;
use sqlx::PgPool;
use tokio::sync::mpsc;

/// The least time between two notifications: what the latest event may
/// wait for its ring. Back to back they were a transaction each, about as
/// many a second as the board records' rounds, and a wake-up of every
/// backend listening on the database.
const GAP: Duration = Duration::from_millis(5);

#[derive(Clone)]
pub struct Appended {
    ring: mpsc::Sender<()>,
}

impl Appended {
    /// Starts the task that sends the notifications; it ends when the last
    /// clone is dropped.
    pub fn spawn(pool: PgPool, topic: &str) -> Self {
        // One ring waiting is enough: it covers everything before it.
        let (ring, mut rung) = mpsc::channel(1);
        let topic = topic.to_owned();
        tokio::spawn(async move {
            while rung.recv().await.is_some() {
                let sent = sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(APPENDED_CHANNEL)
                    .bind(&topic)
                    .execute(&pool)
                    .await;
                if let Err(e) = sent {
                    tracing::debug!(error = %e, "could not say that the log has new events");
                }
                tokio::time::sleep(GAP).await;
            }
        });
        Self { ring }
    }

    /// After an acknowledged publish; never waits.
    pub fn ring(&self) {
        let _ = self.ring.try_send(());
    }
}
