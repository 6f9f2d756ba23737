//! What the fold loop does once a second besides folding: keep the views
//! complete (rebuilt from Postgres when Redis lost them, a new epoch when
//! Postgres went back in time), purge old bookkeeping, and count the dead
//! letters waiting for an operator.

use std::time::{Duration, Instant};

use ratewire_readmodel::continuity::Continuity;
use ratewire_readmodel::generation;
use ratewire_readmodel::store::Version;
use sqlx::PgPool;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::config::Config;
use crate::dead_letters;
use crate::error::Result;
use crate::restore_marks::RestoreMarks;
use crate::retention::{self, RetentionPolicy};
use crate::views::{BankViews, RedisViews, Target};

/// How often the unresolved dead letters are counted.
const DEAD_LETTERS_EVERY: Duration = Duration::from_secs(10);

/// Whether Postgres went back in time behind the views (see
/// [`Housekeeping::restored`]).
pub enum Restored {
    No,
    /// It did; a new epoch is recorded and the loop must follow it.
    NewEpoch,
    /// Redis or Postgres did not answer; try again at the next tick.
    Unknown,
}

pub struct Housekeeping {
    control: PgPool,
    control_schema: String,
    redis: ratewire_readmodel::redis::Connection,
    /// Rebuild every view from Postgres at the next chance (start, flush).
    rebuild: bool,
    /// Notices a Redis that lost its data or went back in time.
    continuity: Continuity,
    /// Marks that tell a restored Postgres (see `restore_marks`).
    restore_marks: RestoreMarks,
    /// Whether this round checked the restore marks (and writes one).
    marks_checked: bool,
    retention_every: Duration,
    retention_policy: RetentionPolicy,
    /// The last retention purge: when it started, and its task.
    retention: Option<(Instant, JoinHandle<()>)>,
    /// When the unresolved dead letters were last counted.
    dead_letters_counted: Option<Instant>,
}

impl Housekeeping {
    pub fn new(
        config: &Config,
        control: PgPool,
        redis: ratewire_readmodel::redis::Connection,
    ) -> Self {
        let schema = &config.read_model.control_schema;
        Self {
            control,
            control_schema: schema.clone(),
            redis,
            rebuild: true,
            continuity: Continuity::new(&config.read_model.redis_prefix, schema),
            restore_marks: RestoreMarks::new(schema),
            marks_checked: false,
            retention_every: config.retention.interval(),
            retention_policy: config.retention_policy(),
            retention: None,
            dead_letters_counted: None,
        }
    }

    /// Creates the tables of the continuity and restore marks.
    pub async fn prepare(&self) -> Result<()> {
        self.continuity.prepare(&self.control).await?;
        self.restore_marks.prepare(&self.control).await
    }

    /// Every view is rendered again from Postgres at the next round (the
    /// read model has another identity).
    pub fn rebuild_views(&mut self) {
        self.rebuild = true;
    }

    /// Every few seconds: whether Postgres (`pool`) was restored from a
    /// backup behind `views`; then the read model gets a new epoch.
    pub async fn restored(&mut self, pool: &PgPool, views: &mut RedisViews) -> Restored {
        self.marks_checked = self.restore_marks.due();
        if !self.marks_checked {
            return Restored::No;
        }
        match self.postgres_went_back(pool, views).await {
            Ok(None) => Restored::No,
            Ok(Some(why)) => {
                warn!(
                    why,
                    "the views are newer than postgres: it was restored from a backup; \
                     giving the read model a new epoch and rebuilding the views"
                );
                match generation::new_epoch(&self.control, &self.control_schema).await {
                    Ok(()) => Restored::NewEpoch,
                    Err(e) => {
                        warn!(error = %e, "a new epoch could not be recorded; will retry");
                        Restored::Unknown
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "redis or postgres unavailable; views will catch up when they return");
                Restored::Unknown
            }
        }
    }

    /// Why the views were written after what Postgres holds (it went back
    /// in time: a restore), if they were: they carry a mark Postgres lacks,
    /// or a snapshot position it has not reached.
    async fn postgres_went_back(
        &mut self,
        pool: &PgPool,
        views: &mut RedisViews,
    ) -> Result<Option<String>> {
        if !self
            .restore_marks
            .postgres_has_views_mark(&self.control, views)
            .await?
        {
            return Ok(Some("the views carry a mark postgres does not have".into()));
        }
        let now = {
            let mut conn = pool.acquire().await?;
            Version::of(&mut conn).await?
        };
        Ok(views.ahead_of(now).await?.map(|high| {
            format!(
                "the views were written at snapshot position {high}, postgres is at {}",
                now.xmax
            )
        }))
    }

    /// Rebuilds every view when Redis lost them (flush, restart, first
    /// start) or another identity asked for it; else retries what failed
    /// before. Ends the round of [`Housekeeping::restored`] with a new
    /// restore mark.
    pub async fn complete_views(&mut self, bank_views: &BankViews, target: &Target) {
        let mut views = target.views.clone();
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
            match views.present().await {
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
            match bank_views.rebuild(target).await {
                Ok(count) => {
                    info!(banks = count, "views rebuilt from postgres");
                    self.rebuild = false;
                }
                Err(e) => error!(error = %e, "rebuilding views failed; will retry"),
            }
        }
        if self.marks_checked && !self.rebuild {
            if let Err(e) = self.restore_marks.write(&self.control, &mut views).await {
                warn!(error = %e, "writing a restore mark failed; will retry");
            }
        }
    }

    /// Starts a retention purge of `pool` when one is due and none is
    /// running; it runs beside the fold.
    pub fn schedule_retention(&mut self, pool: &PgPool) {
        if let Some((started, task)) = &self.retention {
            if !task.is_finished() || started.elapsed() < self.retention_every {
                return;
            }
        }
        let (pool, policy) = (pool.clone(), self.retention_policy);
        let task = tokio::spawn(async move {
            if let Err(e) = retention::purge(&pool, policy).await {
                warn!(error = %e, "purging old bookkeeping failed; will retry");
            }
        });
        self.retention = Some((Instant::now(), task));
    }

    /// New dead letters: counted again at the next round.
    pub fn dead_lettered(&mut self) {
        self.dead_letters_counted = None;
    }

    /// Every few seconds, the gauge of dead letters waiting for an operator.
    pub async fn count_dead_letters(&mut self, pool: &PgPool) {
        if self
            .dead_letters_counted
            .is_some_and(|at| at.elapsed() < DEAD_LETTERS_EVERY)
        {
            return;
        }
        self.dead_letters_counted = Some(Instant::now());
        match dead_letters::unresolved(pool).await {
            Ok(count) => {
                metrics::gauge!("ratewire_projector_dead_letters_unresolved").set(count as f64)
            }
            Err(e) => warn!(error = %e, "counting dead letters failed; will retry"),
        }
    }
}
