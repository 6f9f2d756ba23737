//! Says on Postgres that the log has new events ([`APPENDED_CHANNEL`]), so a
//! projector that pauses its reads while the log is quiet reads at once.
//!
//! Rings are coalesced: one notification covers every event acknowledged
//! while the previous one was being sent, so a burst of publishes costs a
//! round trip or two, not one each. A notification that fails is only
//! logged: the projector also looks at the log on a timer.

use ratewire_proto::APPENDED_CHANNEL;
use sqlx::PgPool;
use tokio::sync::mpsc;

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
            }
        });
        Self { ring }
    }

    /// After an acknowledged publish; never waits.
    pub fn ring(&self) {
        let _ = self.ring.try_send(());
    }
}
