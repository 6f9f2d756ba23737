//! The projector's loop: take a batch from the consumer, fold it into
//! Postgres (with its offsets, in one transaction), hand the changed banks
//! to the view tasks; and once a second, follow a generation switch,
//! re-assign partitions when needed and keep the views complete.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::maybe_done;
use ratewire_readmodel::db;
use ratewire_readmodel::generation::{self, Generation};
use ratewire_service::{compatibility, retry};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, info_span, warn, Instrument};

use crate::assignment::{ownership_change, Assignment};
use crate::config::Config;
use crate::consumer::{self, Log, LogConsumer, LogQueries};
use crate::error::Result;
use crate::fold::{self, Incoming};
use crate::group::Ownership;
use crate::housekeeping::{Housekeeping, Restored};
use crate::http::Status;
use crate::idle::{self, Doorbell, Pacing};
use crate::metrics::{self as report, Progress};
use crate::views::aggregates::Aggregates;
use crate::views::{reference, BankViews, RedisViews, Target};

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
    /// The same pool, for the progress reporter's settled marks (swapped
    /// with the generation).
    settle_pool: Arc<Mutex<PgPool>>,
    views: RedisViews,
    control: PgPool,
    redis: ratewire_readmodel::redis::Connection,
    /// What the consumer reads, and from where.
    assignment: Assignment,
    status: Arc<Status>,
    /// Writes the views of banks whose boards changed, and hands them on
    /// to the views over all banks.
    bank_views: BankViews,
    housekeeping: Housekeeping,
    /// Reference days whose views are still to be written.
    reference: reference::Pending,
    /// Ingest's notices of new events.
    doorbell: Doorbell,
    /// Alerts, evaluated in each batch's transaction.
    alerts: ratewire_alerts::evaluation::Judge,
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
        let doorbell = match config.idle_after() {
            Some(_) => Doorbell::spawn(
                config.common.database_url.clone(),
                config.topic.clone(),
                shutdown.clone(),
            ),
            None => Doorbell::default(),
        };
        let pacing = Pacing::new(config.idle_after());
        let assignment = Assignment::new(
            config.topic.clone(),
            log,
            ownership,
            Arc::clone(&status),
            pacing,
        );
        let pool = db::writer_pool(
            &config.common.database_url,
            &generation.schema,
            config.pool_size(),
        )?;
        Ok(Self {
            alerts: ratewire_alerts::evaluation::Judge::new(&config.alerts.alerts_schema)
                .with_spread_cap(config.read_model.spread_cap_percent)
                .with_outliers(config.read_model.view_style().outliers),
            settle_pool: Arc::new(Mutex::new(pool.clone())),
            pool,
            views: RedisViews::for_generation(redis.clone(), &config.read_model, &generation),
            housekeeping: Housekeeping::new(&config, control.clone(), redis.clone()),
            generation,
            config,
            control,
            redis,
            assignment,
            status,
            bank_views: BankViews::spawn(Aggregates::spawn(shutdown.clone())),
            reference: reference::Pending::default(),
            doorbell,
        })
    }

    /// Waits for the bank views task to write what it was handed.
    pub async fn finish(self) {
        self.bank_views.finish().await;
    }

    pub async fn run(&mut self, shutdown: &CancellationToken) -> Result<()> {
        if !self.prepare(shutdown).await {
            return Ok(());
        }
        // In the group the partitions come and go (from none at start); by
        // hand they are found once.
        let partitions = self.config.partitions.clone();
        let Some(mut desired) = self.assignment.first(&partitions, shutdown).await else {
            return Ok(());
        };
        while !self.assignment.reassign(&self.pool).await {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        self.maintain_views().await;
        self.status.consuming.store(true, Ordering::Relaxed);
        let reporter = tokio::spawn(report_progress(
            Arc::clone(&self.assignment.progress),
            self.assignment.queries.clone(),
            Arc::clone(&self.settle_pool),
            chrono::Duration::milliseconds(self.config.known_at_skew_ms as i64),
            self.config.topic.clone(),
            Arc::clone(&self.status),
            shutdown.clone(),
        ));
        let watchdog = tokio::spawn(judge_missed_slots(
            Arc::clone(&self.settle_pool),
            self.config.alerts.alerts_schema.clone(),
            self.config.read_model.timezone,
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
        let mut next = Box::pin(receive(Arc::clone(&self.assignment.consumer)));
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
                            self.assignment.owned(wanted);
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
                    if self.assignment.pacing.paused() && !self.assignment.caught_up() {
                        self.assignment.pacing.resume_for("lag");
                        reassign = true;
                    }
                    if reassign {
                        reassign = !self.read_again(&mut next, receive).await;
                    }
                    self.maintain_views().await;
                    self.housekeeping.schedule_retention(&self.pool);
                    self.housekeeping.count_dead_letters(&self.pool).await;
                }
                () = &mut next => {
                    let batch = next.as_mut().take_output().expect("a received batch");
                    next.set(receive(Arc::clone(&self.assignment.consumer)));
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
                    self.assignment.pacing.received();
                }
                _ = idle::until(self.assignment.pacing.due()) => {
                    self.assignment.pause_if_quiet(&doorbell);
                }
                _ = doorbell.rung() => {
                    if self.assignment.pacing.paused() {
                        self.assignment.pacing.resume_for("notice");
                        reassign = !self.read_again(&mut next, receive).await;
                    } else {
                        // Its events may not be fetched yet: not quiet now.
                        self.assignment.pacing.received();
                    }
                }
            }
        }
        reporter.abort();
        watchdog.abort();
        Ok(())
    }

    /// Finds the active generation, migrates it and prepares the marks
    /// (retrying while Postgres is away); false if shutdown came first.
    async fn prepare(&mut self, shutdown: &CancellationToken) -> bool {
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
            return false;
        };
        if let Err(e) = self.use_generation(active) {
            error!(error = %e, "the active generation cannot be used");
            return false;
        }
        let (schema, pool) = (self.generation.schema.clone(), self.pool.clone());
        let alerts = self.alerts.schema().to_owned();
        let alerts_pool = match db::pool(&self.config.common.database_url, &alerts, 1) {
            Ok(pool) => pool,
            Err(e) => {
                error!(error = %e, "the alerts schema cannot be reached");
                return false;
            }
        };
        if retry("applying migrations", shutdown, || async {
            compatibility::require_postgres(&pool).await?;
            db::migrate(&pool, &schema).await?;
            ratewire_alerts::migrate(&alerts_pool, &alerts).await
        })
        .await
        .is_none()
        {
            return false;
        }
        let housekeeping = &self.housekeeping;
        if retry("preparing the continuity marks", shutdown, || {
            housekeeping.prepare()
        })
        .await
        .is_none()
        {
            return false;
        }
        // Checked now if Redis answers (views need Redis 7; the projector
        // also starts without it and writes the views when it comes).
        let _ = ratewire_readmodel::redis::require_version(self.redis.clone()).await;
        true
    }

    /// Points the fold at `generation`.
    fn use_generation(&mut self, generation: Generation) -> Result<()> {
        self.pool = db::writer_pool(
            &self.config.common.database_url,
            &generation.schema,
            self.config.pool_size(),
        )?;
        *self.settle_pool.lock().expect("settle pool lock") = self.pool.clone();
        self.views =
            RedisViews::for_generation(self.redis.clone(), &self.config.read_model, &generation);
        self.generation = generation;
        self.reference.all();
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
            self.housekeeping.rebuild_views();
        }
        if let Err(e) = self.use_generation(active) {
            error!(error = %e, "switching generation failed");
            return false;
        }
        schema_changed
    }

    /// Re-assigns the partitions, and on success drops the receive in
    /// flight for a new one: what it took was read before the assignment.
    async fn read_again<F>(
        &mut self,
        next: &mut Pin<Box<F>>,
        receive: impl Fn(Arc<LogConsumer>) -> F,
    ) -> bool {
        let assigned = self.assignment.reassign(&self.pool).await;
        if assigned {
            next.set(receive(Arc::clone(&self.assignment.consumer)));
        }
        assigned
    }

    /// Applies one batch, retrying while Postgres is unavailable (consumption
    /// pauses meanwhile). Stopped if shutdown came first: the batch is then
    /// unapplied and its offsets unmoved, so the next start reads it again.
    async fn apply(&mut self, batch: &[Incoming], shutdown: &CancellationToken) -> Applied {
        let batch = self.assignment.kept(batch);
        let Some(first) = batch.first() else {
            return Applied::Done;
        };
        let holes = self.assignment.holes(&batch);
        let span = info_span!(
            "batch",
            size = batch.len(),
            partition = first.partition,
            offset = first.offset
        );
        let pool = self.pool.clone();
        let topic = self.config.topic.clone();
        let lanes = self.config.lanes as usize;
        let alerts = &self.alerts;
        let started = std::time::Instant::now();
        let applied = retry("applying a batch", shutdown, || async {
            let applied =
                fold::apply_lanes(&pool, &topic, &batch, &holes, Some(alerts), lanes).await;
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
        self.assignment.applied(&outcome);
        let _entered = span.enter();
        tracing::debug!(
            applied = outcome.applied,
            skipped = outcome.skipped,
            dead = outcome.dead_lettered,
            "batch applied"
        );
        if outcome.dead_lettered > 0 {
            warn!(count = outcome.dead_lettered, "messages dead-lettered");
            self.housekeeping.dead_lettered();
        }
        for gap in &outcome.gaps {
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
        self.reference.add(outcome.reference);
        self.reference.write(&self.pool, &mut self.views).await;
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

    /// Keeps the views complete (see `housekeeping`), following a new
    /// epoch first when Postgres went back in time.
    async fn maintain_views(&mut self) {
        match self
            .housekeeping
            .restored(&self.pool, &mut self.views)
            .await
        {
            Restored::No => {}
            Restored::NewEpoch => {
                self.follow_switch().await;
            }
            Restored::Unknown => return,
        }
        let target = self.target();
        self.housekeeping
            .complete_views(&self.bank_views, &target)
            .await;
        self.reference.write(&self.pool, &mut self.views).await;
    }
}

/// How often the missed-slot judge runs.
const MISSED_SLOTS_EVERY: Duration = Duration::from_secs(5);

/// Beside the fold, the missed-slot judge's rounds
/// (`ratewire_alerts::watchdog`): whichever projector takes a round judges
/// every bank.
async fn judge_missed_slots(
    pool: Arc<Mutex<PgPool>>,
    alerts_schema: String,
    zone: chrono_tz::Tz,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(MISSED_SLOTS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {
                let pool = pool.lock().expect("settle pool lock").clone();
                match ratewire_alerts::watchdog::round(&pool, &alerts_schema, zone).await {
                    Ok(0) => {}
                    Ok(told) => tracing::info!(told, "missed publications recorded"),
                    Err(e) => tracing::warn!(error = %e, "could not judge missed publications"),
                }
            }
        }
    }
}

/// Every second, beside the fold (so a stuck batch shows as growing lag):
/// the lag and age gauges, the position log line, readiness, the
/// partitions read to their end marked settled (answers as known at a
/// past instant become final by these marks), and every partition of the
/// topic looked at for stalls, owned here or not.
async fn report_progress(
    progress: Arc<Mutex<Progress>>,
    queries: LogQueries,
    pool: Arc<Mutex<PgPool>>,
    skew: chrono::Duration,
    topic: String,
    status: Arc<Status>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let stalls = Arc::new(Mutex::new(crate::stalls::Stalls::default()));
    let mut topic_partitions: Vec<i32> = Vec::new();
    let mut listed_at: Option<std::time::Instant> = None;
    // Postgres's part, one at a time beside the report: a locked or hung
    // Postgres (when the fold is stuck, say) must not stop the lag and
    // readiness from moving.
    let mut marking: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                if let Some(marking) = marking {
                    marking.abort();
                }
                return;
            }
            _ = tick.tick() => {
                // Partitions are added to a topic seldom, and by hand.
                if listed_at.is_none_or(|at| at.elapsed() >= LIST_PARTITIONS_EVERY) {
                    if let Ok(listed) = queries.partitions(&topic).await {
                        topic_partitions = listed;
                        listed_at = Some(std::time::Instant::now());
                    }
                }
                let asked_at = chrono::Utc::now();
                let (lag, all_highs) =
                    Progress::report(&progress, &queries, &topic, &topic_partitions).await;
                status.lag.store(lag.unwrap_or(-1), Ordering::Relaxed);
                if marking.as_ref().is_some_and(|m| !m.is_finished()) {
                    continue;
                }
                let (highs, owned) = {
                    let progress = progress.lock().expect("progress lock");
                    (progress.highs().clone(), progress.positions.keys().copied().collect())
                };
                let pool = pool.lock().expect("settle pool lock").clone();
                let (topic, stalls) = (topic.clone(), Arc::clone(&stalls));
                marking = Some(tokio::spawn(async move {
                    if let Err(e) = crate::fold::settle(&pool, &topic, &highs, asked_at, skew).await {
                        tracing::debug!(error = %e, "could not mark the settled partitions");
                    }
                    let asked: Vec<i32> = all_highs.keys().copied().collect();
                    match crate::fold::positions(&pool, &topic, &asked).await {
                        Ok(positions) => stalls.lock().expect("stalls lock").report(
                            std::time::Instant::now(),
                            &positions,
                            &all_highs,
                            &owned,
                        ),
                        Err(e) => {
                            tracing::debug!(error = %e, "could not read the partitions' positions")
                        }
                    }
                }));
            }
        }
    }
}

/// How often the reporter lists the topic's partitions again.
const LIST_PARTITIONS_EVERY: Duration = Duration::from_secs(30);
