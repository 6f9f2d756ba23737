//! The projector's loop: take a batch from the consumer, fold it into
//! Postgres (with its offsets, in one transaction), hand the changed banks
//! to the view tasks; and once a second, follow a generation switch,
//! re-assign partitions when needed and keep the views complete.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::consumer::{Log, LogConsumer, LogQueries};
use futures_util::future::maybe_done;
use ratewire_readmodel::continuity::Continuity;
use ratewire_readmodel::db;
use ratewire_readmodel::generation::{self, Generation};
use ratewire_readmodel::store::Version;
use ratewire_service::{compatibility, retry};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, info_span, warn, Instrument};

use crate::aggregates::Aggregates;
use crate::bank_views::BankViews;
use crate::config::Config;
use crate::consumer;
use crate::error::Result;
use crate::fold::{self, Incoming};
use crate::group::Ownership;
use crate::holes::{Reads, Rewind, Start};
use crate::http::Status;
use crate::idle::{self, Doorbell, Pacing};
use crate::metrics::{self as report, Progress};
use crate::redis_views::{RedisViews, Target};
use crate::restore_marks::RestoreMarks;
use crate::retention;

/// How long a new group member waits for its first partitions before it
/// reports ready with none.
const FIRST_ASSIGNMENT_WITHIN: Duration = Duration::from_secs(15);

/// How often the unresolved dead letters are counted.
const DEAD_LETTERS_EVERY: Duration = Duration::from_secs(10);

/// What became of a received batch.
enum Applied {
    Done,
    /// Some partition's messages did not start at its stored position (read
    /// before a re-assignment); the rest of them were left for re-reading.
    Gap,
    /// Shutdown came first; nothing of the batch was kept.
    Stopped,
}

pub struct FoldLoop {
    config: Config,
    /// The generation folded into: its schema and identity, a pool on the
    /// schema, its views.
    generation: Generation,
    pool: PgPool,
    views: RedisViews,
    control: PgPool,
    redis: ratewire_readmodel::redis::Connection,
    consumer: Arc<LogConsumer>,
    /// The broker's answers about the log, on a client of their own.
    queries: LogQueries,
    status: Arc<Status>,
    /// Writes the views of banks whose boards changed, and hands them on
    /// to the views over all banks.
    bank_views: BankViews,
    /// Rebuild every view from Postgres at the next chance (start, flush).
    rebuild: bool,
    /// Shared with the reporter task beside the fold.
    progress: Arc<std::sync::Mutex<Progress>>,
    /// The last retention purge: when it started, and its task.
    retention: Option<(Instant, tokio::task::JoinHandle<()>)>,
    /// Notices a Redis that lost its data or went back in time.
    continuity: Continuity,
    /// Marks that tell a restored Postgres (see `restore_marks`).
    restore_marks: RestoreMarks,
    /// When the unresolved dead letters were last counted.
    dead_letters_counted: Option<Instant>,
    /// The partitions the consumer is assigned.
    partitions: Vec<i32>,
    /// With `auto`: what the consumer group gives, and where to say what is
    /// read and where it stands.
    ownership: Option<Ownership>,
    /// What each partition's read delivered since the last assignment.
    reads: Reads,
    /// Partitions to start further back than their stored positions.
    rewind: Rewind,
    /// Ingest's notices of new events, and when reads pause for a quiet log.
    doorbell: Doorbell,
    pacing: Pacing,
}

impl FoldLoop {
    /// Starts on `RATEWIRE_READ_SCHEMA` ([`FoldLoop::run`] finds the active
    /// generation first), with its view tasks running.
    pub fn new(
        config: Config,
        control: PgPool,
        redis: ratewire_readmodel::redis::Connection,
        log: Log,
        status: Arc<Status>,
        ownership: Option<Ownership>,
        shutdown: &CancellationToken,
    ) -> Result<Self> {
        // Until `run` reads the active one.
        let generation = Generation {
            schema: config.read_model.read_schema.clone(),
            identity: String::new(),
        };
        let continuity = Continuity::new(
            &config.read_model.redis_prefix,
            &config.read_model.control_schema,
        );
        let doorbell = match config.idle_after() {
            Some(_) => Doorbell::spawn(
                config.common.database_url.clone(),
                config.topic.clone(),
                shutdown.clone(),
            ),
            None => Doorbell::default(),
        };
        let pacing = Pacing::new(config.idle_after());
        let restore_marks = RestoreMarks::new(&config.read_model.control_schema);
        Ok(Self {
            pool: db::pool(
                &config.common.database_url,
                &generation.schema,
                config.pool_size(),
            )?,
            views: RedisViews::for_generation(redis.clone(), &config.read_model, &generation),
            generation,
            config,
            control,
            redis,
            consumer: log.consumer,
            queries: log.queries,
            status,
            bank_views: BankViews::spawn(Aggregates::spawn(shutdown.clone())),
            rebuild: true,
            progress: Arc::default(),
            retention: None,
            continuity,
            restore_marks,
            dead_letters_counted: None,
            partitions: Vec::new(),
            ownership,
            reads: Reads::default(),
            rewind: Rewind::default(),
            doorbell,
            pacing,
        })
    }

    /// Waits for the bank views task to write what it was handed.
    pub async fn finish(self) {
        self.bank_views.finish().await;
    }

    pub async fn run(&mut self, shutdown: &CancellationToken) -> Result<()> {
        let (control, name, default) = (
            self.control.clone(),
            self.config.read_model.control_schema.clone(),
            self.config.read_model.read_schema.clone(),
        );
        let Some(active) = retry("reading the active generation", shutdown, || async {
            generation::prepare(&control, &name, &default).await?;
            generation::active(&control, &name, &default).await
        })
        .await
        else {
            return Ok(());
        };
        self.use_generation(active)?;
        let (schema, pool) = (self.generation.schema.clone(), self.pool.clone());
        if retry("applying migrations", shutdown, || async {
            compatibility::require_postgres(&pool).await?;
            db::migrate(&pool, &schema).await
        })
        .await
        .is_none()
        {
            return Ok(());
        }
        let control = self.control.clone();
        if retry("preparing the continuity marks", shutdown, || async {
            self.continuity.prepare(&control).await?;
            self.restore_marks.prepare(&control).await
        })
        .await
        .is_none()
        {
            return Ok(());
        }
        // Checked now if Redis answers (views need Redis 7; the projector
        // also starts without it and writes the views when it comes).
        let _ = ratewire_readmodel::redis::require_version(self.redis.clone()).await;
        let topic = self.config.topic.clone();
        // In the group the partitions come and go (from none at start); by
        // hand they are found once.
        let mut desired = self.ownership.as_ref().map(|o| o.desired.clone());
        self.partitions = match desired.as_mut() {
            Some(desired) => {
                // Not consuming (nor ready) before the group's first
                // assignment, unless none comes: a member beyond the
                // partition count may be given nothing, and is ready idle.
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    changed = desired.changed() => if changed.is_err() { return Ok(()) },
                    _ = tokio::time::sleep(FIRST_ASSIGNMENT_WITHIN) => {
                        info!("no partitions from the group yet; ready, folding none");
                    }
                }
                desired.borrow_and_update().iter().copied().collect()
            }
            None => {
                let Some(partitions) = retry("finding the topic's partitions", shutdown, || {
                    self.queries
                        .owned_partitions(&topic, &self.config.partitions)
                })
                .await
                else {
                    return Ok(());
                };
                partitions
            }
        };
        while !self.reassign().await {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        self.maintain_views().await;
        self.status.consuming.store(true, Ordering::Relaxed);
        let reporter = tokio::spawn(report_progress(
            Arc::clone(&self.progress),
            self.queries.clone(),
            topic.clone(),
            Arc::clone(&self.status),
            shutdown.clone(),
        ));

        let limits = consumer::BatchLimits::of(&self.config);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        // A long batch must not be followed by a burst of missed ticks.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reassign = false;
        // One receive in progress at a time, kept across ticks: dropping it
        // half-filled would drop messages already taken from the consumer.
        // After a re-assignment it is dropped on purpose: every partition is
        // read again from its stored position, and a hole is proven only by
        // messages of one read (see `holes`). It runs on while a batch is
        // applied, and keeps what it received until that batch is done.
        let receive = |consumer: Arc<LogConsumer>| {
            maybe_done(async move { consumer::next_batch(&consumer, limits).await })
        };
        let mut next = Box::pin(receive(Arc::clone(&self.consumer)));
        let doorbell = self.doorbell.clone();
        loop {
            tokio::select! {
                // In this order: a batch already received must win over
                // pausing reads, or librdkafka would drop and fetch it again.
                biased;
                _ = shutdown.cancelled() => break,
                changed = ownership_change(&mut desired) => {
                    match changed {
                        Some(wanted) => {
                            self.partitions = wanted;
                            reassign = !self.read_again(&mut next, receive).await;
                        }
                        // The group member is gone (shutting down).
                        None => desired = None,
                    }
                }
                _ = tick.tick() => {
                    if self.follow_switch().await {
                        reassign = true;
                    }
                    // Paused, yet the log moved on without a notice (or its
                    // watermarks are unknown): read again.
                    if self.pacing.paused() && !self.caught_up() {
                        self.pacing.resume_for("lag");
                        reassign = true;
                    }
                    if reassign {
                        reassign = !self.read_again(&mut next, receive).await;
                    }
                    self.maintain_views().await;
                    self.schedule_retention();
                    self.count_dead_letters().await;
                }
                () = &mut next => {
                    let batch = next.as_mut().take_output().expect("a received batch");
                    next.set(receive(Arc::clone(&self.consumer)));
                    match batch {
                        Ok(batch) => {
                            let applied = self.apply(&batch, shutdown);
                            match consumer::alongside(applied, &mut next).await {
                                Applied::Stopped => break,
                                // Read again at once (further back where a read
                                // began past its position).
                                Applied::Gap => {
                                    reassign = !self.read_again(&mut next, receive).await;
                                }
                                Applied::Done => {}
                            }
                        }
                        Err(e) => {
                            // librdkafka can come out of a connection failure with
                            // its fetchers idle; starting the partitions again from
                            // the stored offsets is always safe.
                            reassign = true;
                            warn!(error = %e, "kafka receive failed; partitions will be re-assigned");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                    // Quiet is counted from the end of the work, not its start.
                    self.pacing.received();
                }
                _ = idle::until(self.pacing.due()) => {
                    if self.pacing.quiet(&doorbell, self.caught_up()) {
                        self.stop_reading();
                    }
                }
                _ = doorbell.rung() => {
                    if self.pacing.paused() {
                        self.pacing.resume_for("notice");
                        reassign = !self.read_again(&mut next, receive).await;
                    } else {
                        // Its events may not be fetched yet: not quiet now.
                        self.pacing.received();
                    }
                }
            }
        }
        reporter.abort();
        Ok(())
    }

    /// Starts a retention purge of the current generation when one is due
    /// and none is running; it runs beside the fold.
    fn schedule_retention(&mut self) {
        if let Some((started, task)) = &self.retention {
            if !task.is_finished() || started.elapsed() < self.config.retention.interval() {
                return;
            }
        }
        let (pool, policy) = (self.pool.clone(), self.config.retention_policy());
        let task = tokio::spawn(async move {
            if let Err(e) = retention::purge(&pool, policy).await {
                warn!(error = %e, "purging old bookkeeping failed; will retry");
            }
        });
        self.retention = Some((Instant::now(), task));
    }

    /// Every few seconds, the gauge of dead letters waiting for an operator.
    async fn count_dead_letters(&mut self) {
        if self
            .dead_letters_counted
            .is_some_and(|at| at.elapsed() < DEAD_LETTERS_EVERY)
        {
            return;
        }
        self.dead_letters_counted = Some(Instant::now());
        match crate::dead_letters::unresolved(&self.pool).await {
            Ok(count) => {
                metrics::gauge!("ratewire_projector_dead_letters_unresolved").set(count as f64)
            }
            Err(e) => warn!(error = %e, "counting dead letters failed; will retry"),
        }
    }

    /// Points the fold at `generation`.
    fn use_generation(&mut self, generation: Generation) -> Result<()> {
        self.pool = db::pool(
            &self.config.common.database_url,
            &generation.schema,
            self.config.pool_size(),
        )?;
        self.views =
            RedisViews::for_generation(self.redis.clone(), &self.config.read_model, &generation);
        self.generation = generation;
        Ok(())
    }

    /// Follows a replay's switch to another generation, or a new identity
    /// of this one (another Postgres, or a new epoch); true when the schema
    /// changed and this projector must read on from its offsets.
    async fn follow_switch(&mut self) -> bool {
        let active = generation::active(
            &self.control,
            &self.config.read_model.control_schema,
            &self.config.read_model.read_schema,
        )
        .await;
        let active = match active {
            Ok(active) if active != self.generation => active,
            Ok(_) => return false,
            Err(e) => {
                warn!(error = %e, "reading the active generation failed; will retry");
                return false;
            }
        };
        let schema_changed = active.schema != self.generation.schema;
        if schema_changed {
            info!(
                from = self.generation.schema,
                to = active.schema,
                "following the switch to another read-model generation"
            );
        } else {
            // Views under the new identity are written from Postgres.
            warn!(
                from = self.generation.identity,
                to = active.identity,
                "the read model has another identity (another Postgres, or a restore); rebuilding the views"
            );
            self.rebuild = true;
        }
        if let Err(e) = self.use_generation(active) {
            error!(error = %e, "switching generation failed");
            return false;
        }
        schema_changed
    }

    /// [`FoldLoop::reassign`], and on success drops the receive in flight
    /// for a new one: what it took was read before the assignment.
    async fn read_again<F>(
        &mut self,
        next: &mut Pin<Box<F>>,
        receive: impl Fn(Arc<LogConsumer>) -> F,
    ) -> bool {
        let assigned = self.reassign().await;
        if assigned {
            next.set(receive(Arc::clone(&self.consumer)));
        }
        assigned
    }

    /// Starts the owned partitions again at their stored offsets (further
    /// back for those whose reads began past them); false when that failed
    /// (tried again on the next tick).
    async fn reassign(&mut self) -> bool {
        let topic = self.config.topic.clone();
        let partitions = self.partitions.clone();
        let assigned = async {
            let positions = fold::positions(&self.pool, &topic, &partitions).await?;
            let (positions, lows) = self.skip_deleted(positions).await?;
            let starts: std::collections::BTreeMap<i32, Start> = positions
                .iter()
                .map(|(p, position)| {
                    let low = lows.get(p).copied().unwrap_or(0);
                    (*p, self.rewind.start(*p, *position, low))
                })
                .collect();
            let offsets = starts.iter().map(|(p, s)| (*p, s.offset)).collect();
            consumer::assign(&self.consumer, &topic, &offsets)?;
            self.reads.started(&starts);
            Ok::<_, crate::Error>((positions, offsets))
        }
        .await;
        match assigned {
            Ok((positions, starts)) => {
                if self.pacing.paused() {
                    // Reading again after a quiet spell: as often as once a
                    // second, not news.
                    tracing::debug!(?positions, "reading the log again");
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
    fn caught_up(&self) -> bool {
        self.progress.lock().expect("progress lock").caught_up()
    }

    /// Unassigns the partitions while the log is quiet (see [`idle`]); the
    /// group, lag report and readiness still count them as this instance's.
    fn stop_reading(&mut self) {
        use rdkafka::consumer::Consumer;
        match self.consumer.unassign() {
            Ok(()) => {
                tracing::debug!("the log is quiet; reads paused");
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
    fn assigned(&mut self, positions: std::collections::BTreeMap<i32, i64>) {
        let now: std::collections::BTreeSet<i32> = positions.keys().copied().collect();
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

    /// Positions the broker no longer holds (deleted by retention before they
    /// were applied) cannot be read again: move them to the log's start, loudly,
    /// instead of re-reading from a gap forever.
    /// Also answers where the log now begins in each partition.
    async fn skip_deleted(
        &self,
        mut positions: std::collections::BTreeMap<i32, i64>,
    ) -> Result<(
        std::collections::BTreeMap<i32, i64>,
        std::collections::BTreeMap<i32, i64>,
    )> {
        let topic = &self.config.topic;
        let partitions: Vec<i32> = positions.keys().copied().collect();
        let marks = self
            .queries
            .watermarks(topic, &partitions, Duration::from_secs(5))
            .await?;
        for (partition, position) in positions.iter_mut() {
            let Some((low, _)) = marks.get(partition) else {
                continue;
            };
            if *low > *position {
                error!(partition, from = *position, to = *low,
                    "events were deleted from the log before they were applied; skipping to the log's start");
                fold::move_position(&self.pool, topic, *partition, *low).await?;
                *position = *low;
            }
        }
        let lows = marks.iter().map(|(p, (low, _))| (*p, *low)).collect();
        Ok((positions, lows))
    }

    /// Applies one batch, retrying while Postgres is unavailable (consumption
    /// pauses meanwhile). False if shutdown came first: the batch is then
    /// unapplied and its offsets unmoved, so the next start reads it again.
    async fn apply(&mut self, batch: &[Incoming], shutdown: &CancellationToken) -> Applied {
        // Messages taken before a partition was given up are its new
        // owner's to apply.
        let kept: Vec<Incoming>;
        let batch = if batch.iter().all(|m| self.partitions.contains(&m.partition)) {
            batch
        } else {
            kept = batch
                .iter()
                .filter(|m| self.partitions.contains(&m.partition))
                .cloned()
                .collect();
            &kept[..]
        };
        let Some(first) = batch.first() else {
            return Applied::Done;
        };
        let holes = self
            .reads
            .holes(batch.iter().map(|m| (m.partition, m.offset)));
        let span = info_span!(
            "batch",
            size = batch.len(),
            partition = first.partition,
            offset = first.offset
        );
        let pool = self.pool.clone();
        let topic = self.config.topic.clone();
        let lanes = self.config.lanes as usize;
        let started = std::time::Instant::now();
        let applied = retry("applying a batch", shutdown, || async {
            let applied = fold::apply_lanes(&pool, &topic, batch, &holes, lanes).await;
            if applied.is_err() {
                report::postgres_error();
            }
            applied
        })
        .instrument(span.clone())
        .await;
        let Some(outcome) = applied else {
            return Applied::Stopped;
        };
        report::batch_applied(&outcome, started.elapsed());
        {
            let mut progress = self.progress.lock().expect("progress lock");
            progress.record(&outcome);
            if let Some(ownership) = &self.ownership {
                ownership.positions.send_replace(progress.positions.clone());
            }
        }
        let _entered = span.enter();
        tracing::debug!(
            applied = outcome.applied,
            skipped = outcome.skipped,
            dead = outcome.dead_lettered,
            "batch applied"
        );
        if outcome.dead_lettered > 0 {
            warn!(count = outcome.dead_lettered, "messages dead-lettered");
            // Counted again at the next tick.
            self.dead_letters_counted = None;
        }
        for gap in &outcome.gaps {
            self.rewind.missed(gap.partition, gap.expected);
            warn!(
                partition = gap.partition,
                expected = gap.expected,
                found = gap.found,
                "a read began past the stored position; reading again from further back"
            );
        }
        for hole in &outcome.crossed {
            info!(
                partition = hole.partition,
                from = hole.from,
                to = hole.to,
                "the log holds no message at these offsets; the position steps over them"
            );
        }
        drop(_entered);
        // Bank views at once, then the views over all banks; each by a
        // task of its own.
        self.bank_views.changed(
            &self.target(),
            outcome.banks,
            outcome.currencies,
            outcome.occurred,
        );
        if outcome.gaps.is_empty() {
            Applied::Done
        } else {
            Applied::Gap
        }
    }

    /// Where the current generation's views go.
    fn target(&self) -> Target {
        Target {
            generation: format!("{}.{}", self.generation.schema, self.generation.identity),
            pool: self.pool.clone(),
            views: self.views.clone(),
        }
    }

    /// Why the views were written after what Postgres holds (it went back
    /// in time: a restore), if they were: they carry a mark Postgres lacks,
    /// or a snapshot position it has not reached.
    async fn postgres_went_back(&mut self) -> Result<Option<String>> {
        if !self
            .restore_marks
            .postgres_has_views_mark(&self.control, &mut self.views)
            .await?
        {
            return Ok(Some("the views carry a mark postgres does not have".into()));
        }
        let now = {
            let mut conn = self.pool.acquire().await?;
            Version::of(&mut conn).await?
        };
        Ok(self.views.ahead_of(now).await?.map(|high| {
            format!(
                "the views were written at snapshot position {high}, postgres is at {}",
                now.xmax
            )
        }))
    }

    /// The periodic housekeeping: rebuild everything when Redis lost the
    /// views (flush, restart, first start), else retry what failed before.
    async fn maintain_views(&mut self) {
        let check = self.restore_marks.due();
        let went_back = match check {
            true => self.postgres_went_back().await,
            false => Ok(None),
        };
        match went_back {
            Ok(None) => {}
            Ok(Some(why)) => {
                warn!(
                    why,
                    "the views are newer than postgres: it was restored from a backup; \
                     giving the read model a new epoch and rebuilding the views"
                );
                if let Err(e) =
                    generation::new_epoch(&self.control, &self.config.read_model.control_schema)
                        .await
                {
                    warn!(error = %e, "a new epoch could not be recorded; will retry");
                    return;
                }
                self.follow_switch().await;
            }
            Err(e) => {
                warn!(error = %e, "redis or postgres unavailable; views will catch up when they return");
                return;
            }
        }
        match self
            .continuity
            .check(&self.control, self.redis.clone())
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                warn!(
                    "redis lost its data or went back in time; rebuilding the views from postgres"
                );
                self.rebuild = true;
            }
            Err(e) => {
                warn!(error = %e, "redis or postgres unavailable; views will catch up when they return");
                return;
            }
        }
        if !self.rebuild {
            match self.views.present().await {
                Ok(true) => {}
                Ok(false) => {
                    warn!("redis views are missing; rebuilding them from postgres");
                    self.rebuild = true;
                }
                Err(e) => {
                    warn!(error = %e, "redis unavailable; views will catch up when it returns");
                    return;
                }
            }
        }
        if self.rebuild {
            match self.bank_views.rebuild(&self.target()).await {
                Ok(count) => {
                    info!(banks = count, "views rebuilt from postgres");
                    self.rebuild = false;
                }
                Err(e) => error!(error = %e, "rebuilding views failed; will retry"),
            }
        }
        if check && !self.rebuild {
            if let Err(e) = self
                .restore_marks
                .write(&self.control, &mut self.views)
                .await
            {
                warn!(error = %e, "writing a restore mark failed; will retry");
            }
        }
    }
}

/// The next set of partitions the group gives (`None` once the member is
/// gone); never resolves outside a group.
async fn ownership_change(
    desired: &mut Option<tokio::sync::watch::Receiver<std::collections::BTreeSet<i32>>>,
) -> Option<Vec<i32>> {
    match desired {
        Some(desired) => match desired.changed().await {
            Ok(()) => Some(desired.borrow_and_update().iter().copied().collect()),
            Err(_) => None,
        },
        None => std::future::pending().await,
    }
}

/// Every second, beside the fold (so a stuck batch shows as growing lag):
/// the lag and age gauges, the position log line, and readiness.
async fn report_progress(
    progress: Arc<std::sync::Mutex<Progress>>,
    queries: LogQueries,
    topic: String,
    status: Arc<Status>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {
                let lag = Progress::report(&progress, &queries, &topic).await;
                status.lag.store(lag.unwrap_or(-1), Ordering::Relaxed);
            }
        }
    }
}
