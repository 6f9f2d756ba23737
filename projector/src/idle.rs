//! Reading the log only while there is something to read.
//!
//! Kafka answers a fetch as soon as data arrives, so a long fetch wait costs
//! nothing in freshness there. A broker that holds every fetch for its full
//! wait needs a short one to show a new event within milliseconds, and that
//! makes hundreds of empty fetches a second while the log is quiet, which
//! costs the broker far more than the events do. With `RATEWIRE_PROJECTOR_IDLE_AFTER_MS`
//! set, [`Pacing`] stops reading the partitions (no fetches at all) once
//! nothing has arrived for that long, and reads them again when ingest says
//! the log has new events ([`Doorbell`], a Postgres notification after each
//! acknowledged publish) or when the lag report, which asks the broker for
//! its watermarks every second anyway, shows the log ahead of the stored
//! positions. It never pauses while that report shows events not yet
//! applied.
//!
//! Nothing depends on a notice arriving: events that come without one
//! (another producer, a notice lost to a reconnect) are read within a
//! second or two, and the projector does not pause at all while its
//! listener is not connected. Reading again starts at the positions stored
//! in Postgres, as after any assignment, so no event is skipped or applied
//! twice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ratewire_proto::APPENDED_CHANNEL;
use sqlx::postgres::PgListener;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Ingest's notices that the topic has new events.
#[derive(Clone, Default)]
pub struct Doorbell {
    rung: Arc<Notify>,
    /// Whether notices can arrive now (the listener is connected).
    listening: Arc<AtomicBool>,
}

impl Doorbell {
    /// Listens on `database_url` for notices about `topic`, until shutdown,
    /// connecting again whenever the connection is lost.
    pub fn spawn(database_url: String, topic: String, shutdown: CancellationToken) -> Self {
        let bell = Self::default();
        let task = bell.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = task.listen(&database_url, &topic) => {}
            }
        });
        bell
    }

    async fn listen(&self, url: &str, topic: &str) {
        let mut reported = false;
        loop {
            match Self::connect(url).await {
                Ok(mut listener) => {
                    reported = false;
                    self.listening.store(true, Ordering::Relaxed);
                    debug!("listening for notices of new events");
                    // `None`: the connection was lost.
                    while let Ok(Some(notice)) = listener.try_recv().await {
                        if notice.payload() == topic {
                            self.rung.notify_one();
                        }
                    }
                    self.listening.store(false, Ordering::Relaxed);
                }
                Err(e) if !reported => {
                    reported = true;
                    warn!(error = %e, "cannot listen for notices of new events; reading the log without pausing until it can");
                }
                Err(_) => {}
            }
            // Notices may have been missed meanwhile.
            self.rung.notify_one();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    async fn connect(url: &str) -> sqlx::Result<PgListener> {
        let mut listener = PgListener::connect(url).await?;
        listener.listen(APPENDED_CHANNEL).await?;
        Ok(listener)
    }

    /// Resolves at the next notice (or at once if one came since the last).
    pub async fn rung(&self) {
        self.rung.notified().await;
    }

    fn listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }
}

/// When the consumer's partitions are read and when they are not.
///
/// A pause unassigns the partitions and reading again assigns them at
/// their stored positions, rather than librdkafka's pause and resume: a
/// resumed partition is fetched only when the consumer's broker thread next
/// wakes (up to a second later), while an assignment wakes it at once.
pub struct Pacing {
    /// `None`: never paused.
    after: Option<Duration>,
    /// The last message, the end of work on it, or the last assignment.
    active: Instant,
    paused: bool,
    /// Why the partitions are about to be read again, for the metric.
    cause: Option<&'static str>,
}

impl Pacing {
    pub fn new(after: Option<Duration>) -> Self {
        Self {
            after,
            active: Instant::now(),
            paused: false,
            cause: None,
        }
    }

    /// When [`Pacing::quiet`] is next due; `None`: not while paused, nor
    /// ever when pausing is off.
    pub fn due(&self) -> Option<Instant> {
        let after = self.after?;
        (!self.paused).then_some(self.active + after)
    }

    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Messages arrived, work on them ended, or a notice came while
    /// reading (its events may not be fetched yet).
    pub fn received(&mut self) {
        self.active = Instant::now();
    }

    /// Paused reads are to start again, for `cause` (`notice`, `lag`).
    pub fn resume_for(&mut self, cause: &'static str) {
        self.cause = Some(cause);
    }

    /// The partitions were assigned: they are read from now. If they were
    /// paused, why they are read again: the cause given, or `assignment`
    /// (a change of partitions, a retry after an error).
    pub fn assigned(&mut self) -> Option<&'static str> {
        let cause = self.cause.take();
        let was_paused = std::mem::replace(&mut self.paused, false);
        self.active = Instant::now();
        was_paused.then(|| cause.unwrap_or("assignment"))
    }

    /// The partitions were unassigned for a quiet log.
    pub fn stopped(&mut self) {
        self.paused = true;
    }

    /// At [`Pacing::due`]: whether to pause now. Only if notices can come,
    /// and only when every event the last lag report saw is applied: a
    /// first fetch of a backlog can take longer than the quiet spell, and
    /// pausing then would drop it, again and again. Else asked again after
    /// another quiet spell.
    pub fn quiet(&mut self, doorbell: &Doorbell, caught_up: bool) -> bool {
        if doorbell.listening() && caught_up {
            return true;
        }
        self.active = Instant::now();
        false
    }
}

/// Sleeps until `due`, or forever.
pub async fn until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listening() -> Doorbell {
        let bell = Doorbell::default();
        bell.listening.store(true, Ordering::Relaxed);
        bell
    }

    #[test]
    fn pauses_only_when_quiet_caught_up_and_listening() {
        let mut pacing = Pacing::new(Some(Duration::from_millis(10)));
        assert_eq!(
            pacing.due(),
            Some(pacing.active + Duration::from_millis(10))
        );
        // A backlog whose first fetch outlasts the quiet spell: not paused.
        assert!(!pacing.quiet(&listening(), false));
        // No notices can come: not paused either.
        assert!(!pacing.quiet(&Doorbell::default(), true));
        assert!(pacing.quiet(&listening(), true));
        pacing.stopped();
        assert!(pacing.paused());
        assert_eq!(pacing.due(), None);
    }

    #[test]
    fn a_resume_says_why_and_only_after_a_pause() {
        let mut pacing = Pacing::new(Some(Duration::from_millis(10)));
        assert_eq!(pacing.assigned(), None);
        pacing.stopped();
        pacing.resume_for("notice");
        assert_eq!(pacing.assigned(), Some("notice"));
        pacing.stopped();
        assert_eq!(pacing.assigned(), Some("assignment"));
        assert!(!pacing.paused());
    }

    #[test]
    fn never_due_when_pausing_is_off() {
        assert_eq!(Pacing::new(None).due(), None);
    }
}
