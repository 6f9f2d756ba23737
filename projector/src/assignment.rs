//! Which partitions the fold's consumer reads, and from where: the owned
//! partitions (from the group or set by hand) started at the offsets
//! stored with the read model, further back where a read began past them
//! (see `holes`), and paused while the log is quiet (see `idle`). What is
//! read is reported to the lag reporter, /readyz and the group member.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::Consumer;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::config::Partitions;
use crate::consumer::{self, Log, LogConsumer, LogQueries};
use crate::error::Result;
use crate::fold::{self, BatchOutcome, Incoming};
use crate::group::Ownership;
use crate::holes::{Hole, Reads, Rewind, Start};
use crate::http::Status;
use crate::idle::{Doorbell, Pacing};
use crate::metrics::{self as report, Progress};

/// How long a new group member waits for its first partitions before it
/// reports ready with none.
const FIRST_ASSIGNMENT_WITHIN: Duration = Duration::from_secs(15);

/// The group's wishes, as the fold loop awaits them.
pub type Desired = Option<watch::Receiver<BTreeSet<i32>>>;

pub struct Assignment {
    topic: String,
    pub consumer: Arc<LogConsumer>,
    /// The broker's answers about the log, on a client of their own.
    pub queries: LogQueries,
    /// The partitions the consumer is assigned.
    partitions: Vec<i32>,
    /// With `auto`: what the consumer group gives, and where to say what is
    /// read and where it stands.
    ownership: Option<Ownership>,
    /// What each partition's read delivered since the last assignment.
    reads: Reads,
    /// Partitions to start further back than their stored positions.
    rewind: Rewind,
    /// When reads pause for a quiet log.
    pub pacing: Pacing,
    /// Shared with the reporter task beside the fold.
    pub progress: Arc<Mutex<Progress>>,
    status: Arc<Status>,
}

impl Assignment {
    pub fn new(
        topic: String,
        log: Log,
        ownership: Option<Ownership>,
        status: Arc<Status>,
        pacing: Pacing,
    ) -> Self {
        Self {
            topic,
            consumer: log.consumer,
            queries: log.queries,
            partitions: Vec::new(),
            ownership,
            reads: Reads::default(),
            rewind: Rewind::default(),
            pacing,
            progress: Arc::default(),
            status,
        }
    }

    /// The first partitions to read: in the group, its first assignment
    /// (or none after a while: a member beyond the partition count may be
    /// given nothing, and is ready idle); by hand, found once. Returns the
    /// group's later wishes, `None` if shutdown came first.
    pub async fn first(
        &mut self,
        by_hand: &Partitions,
        shutdown: &CancellationToken,
    ) -> Option<Desired> {
        if let Some(ownership) = &self.ownership {
            // The fold's consumer learns where the partitions are now, so
            // its first read after the assignment needs no broker lookup.
            let (consumer, topic) = (Arc::clone(&self.consumer), self.topic.clone());
            let looked_up = tokio::task::spawn_blocking(move || {
                consumer.fetch_metadata(Some(&topic), Duration::from_secs(5))
            })
            .await;
            if let Ok(Err(e)) = looked_up {
                debug!(error = %e, "the topic's metadata is not known yet");
            }
            let _ = ownership.ready.send(());
        }
        let mut desired = self.ownership.as_ref().map(|o| o.desired.clone());
        self.partitions = match desired.as_mut() {
            Some(desired) => {
                tokio::select! {
                    _ = shutdown.cancelled() => return None,
                    changed = desired.changed() => changed.ok()?,
                    _ = tokio::time::sleep(FIRST_ASSIGNMENT_WITHIN) => {
                        info!("no partitions from the group yet; ready, folding none");
                    }
                }
                desired.borrow_and_update().iter().copied().collect()
            }
            None => {
                ratewire_service::retry("finding the topic's partitions", shutdown, || {
                    self.queries.owned_partitions(&self.topic, by_hand)
                })
                .await?
            }
        };
        Some(desired)
    }

    /// The group gave other partitions; read them from the next
    /// [`Assignment::reassign`].
    pub fn owned(&mut self, partitions: Vec<i32>) {
        self.partitions = partitions;
    }

    /// The messages of `batch` of partitions still owned: those taken
    /// before a partition was given up are its new owner's to apply.
    pub fn kept<'a>(&self, batch: &'a [Incoming]) -> std::borrow::Cow<'a, [Incoming]> {
        if batch.iter().all(|m| self.partitions.contains(&m.partition)) {
            batch.into()
        } else {
            batch
                .iter()
                .filter(|m| self.partitions.contains(&m.partition))
                .cloned()
                .collect::<Vec<_>>()
                .into()
        }
    }

    /// The holes this read proves among `batch`'s offsets (see `holes`).
    pub fn holes(&mut self, batch: &[Incoming]) -> Vec<Hole> {
        self.reads
            .holes(batch.iter().map(|m| (m.partition, m.offset)))
    }

    /// Records an applied batch: where each partition now stands, and the
    /// partitions whose read began past their position, to start again
    /// further back.
    pub fn applied(&mut self, outcome: &BatchOutcome) {
        {
            let mut progress = self.progress.lock().expect("progress lock");
            progress.record(outcome);
            if let Some(ownership) = &self.ownership {
                ownership.positions.send_replace(progress.positions.clone());
            }
        }
        for gap in &outcome.gaps {
            self.rewind.missed(gap.partition, gap.expected);
        }
    }

    /// Starts the owned partitions again at their stored offsets in `pool`
    /// (further back for those whose reads began past them); false when
    /// that failed (tried again on the next tick).
    pub async fn reassign(&mut self, pool: &PgPool) -> bool {
        let assigned = async {
            let positions = fold::positions(pool, &self.topic, &self.partitions).await?;
            let (positions, lows) = self.skip_deleted(pool, positions).await?;
            let starts: BTreeMap<i32, Start> = positions
                .iter()
                .map(|(p, position)| {
                    let low = lows.get(p).copied().unwrap_or(0);
                    (*p, self.rewind.start(*p, *position, low))
                })
                .collect();
            let offsets = starts.iter().map(|(p, s)| (*p, s.offset)).collect();
            consumer::assign(&self.consumer, &self.topic, &offsets)?;
            self.reads.started(&starts);
            Ok::<_, crate::Error>((positions, offsets))
        }
        .await;
        match assigned {
            Ok((positions, starts)) => {
                if self.pacing.paused() {
                    // Reading again after a quiet spell: as often as once a
                    // second, not news.
                    debug!(?positions, "reading the log again");
                } else if starts == positions {
                    info!(?positions, "partitions assigned at their stored offsets");
                } else {
                    info!(
                        ?positions,
                        ?starts,
                        "partitions assigned, some started before their stored offsets"
                    );
                }
                self.assigned(positions);
                true
            }
            Err(e) => {
                warn!(error = %e, "assigning partitions failed; will retry");
                false
            }
        }
    }

    /// Whether the last lag report saw nothing left to apply.
    pub fn caught_up(&self) -> bool {
        self.progress.lock().expect("progress lock").caught_up()
    }

    /// Unassigns the partitions if the log has been quiet long enough (see
    /// `idle`); the group, lag report and readiness still count them as
    /// this instance's.
    pub fn pause_if_quiet(&mut self, doorbell: &Doorbell) {
        if !self.pacing.quiet(doorbell, self.caught_up()) {
            return;
        }
        match self.consumer.unassign() {
            Ok(()) => {
                debug!("the log is quiet; reads paused");
                report::reads_paused(true);
                self.pacing.stopped();
            }
            // Reading on; asked again after the next quiet spell.
            Err(e) => {
                warn!(error = %e, "could not pause reads");
                self.pacing.received();
            }
        }
    }

    /// Records what the consumer now reads: for the lag report, /readyz,
    /// and the group member (which hands a revoked partition back only once
    /// it is no longer read here).
    fn assigned(&mut self, positions: BTreeMap<i32, i64>) {
        let now: BTreeSet<i32> = positions.keys().copied().collect();
        {
            let mut progress = self.progress.lock().expect("progress lock");
            for gone in progress.positions.keys().filter(|p| !now.contains(p)) {
                // Its new owner reports its lag.
                metrics::gauge!("ratewire_projector_consumer_lag", "partition" => gone.to_string())
                    .set(0.0);
            }
            progress.positions = positions;
            // The group learns where a partition taken over stands now, not
            // at its first batch.
            if let Some(ownership) = &self.ownership {
                ownership.positions.send_replace(progress.positions.clone());
            }
        }
        *self.status.partitions.lock().expect("status lock") = now.iter().copied().collect();
        if let Some(cause) = self.pacing.assigned() {
            report::reads_paused(false);
            report::reads_resumed(cause);
        }
        if let Some(ownership) = &self.ownership {
            ownership.assigned.send_replace(now);
        }
    }

    /// Positions the broker no longer holds (deleted by retention before
    /// they were applied) cannot be read again: move them to the log's
    /// start, loudly, instead of re-reading from a gap forever.
    /// Also answers where the log now begins in each partition.
    async fn skip_deleted(
        &self,
        pool: &PgPool,
        mut positions: BTreeMap<i32, i64>,
    ) -> Result<(BTreeMap<i32, i64>, BTreeMap<i32, i64>)> {
        let partitions: Vec<i32> = positions.keys().copied().collect();
        let marks = self
            .queries
            .watermarks(&self.topic, &partitions, Duration::from_secs(5))
            .await?;
        for (partition, position) in positions.iter_mut() {
            let Some((low, _)) = marks.get(partition) else {
                continue;
            };
            if *low > *position {
                error!(partition, from = *position, to = *low,
                    "events were deleted from the log before they were applied; skipping to the log's start");
                fold::move_position(pool, &self.topic, *partition, *low).await?;
                *position = *low;
            }
        }
        let lows = marks.iter().map(|(p, (low, _))| (*p, *low)).collect();
        Ok((positions, lows))
    }
}

/// The next set of partitions the group gives (`None` once the member is
/// gone); never resolves outside a group.
pub async fn ownership_change(desired: &mut Desired) -> Option<Vec<i32>> {
    match desired {
        Some(desired) => match desired.changed().await {
            Ok(()) => Some(desired.borrow_and_update().iter().copied().collect()),
            Err(_) => None,
        },
        None => std::future::pending().await,
    }
}
