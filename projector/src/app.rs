//! The projector process as a value: built from a [`Config`], then run until
//! a shutdown signal.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ratewire_proto::runtime::retry;
use ratewire_proto::BankId;
use rdkafka::consumer::StreamConsumer;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, info_span, warn, Instrument};

use crate::config::Config;
use crate::error::Result;
use crate::fold::{self, Incoming};
use crate::http::{self, HealthState, Status};
use crate::redis_views::{self, RedisViews};
use crate::{consumer, db, store};

pub struct Application {
    config: Config,
    listener: TcpListener,
    pool: PgPool,
    redis: redis::aio::ConnectionManager,
    consumer: Arc<StreamConsumer>,
    status: Arc<Status>,
}

impl Application {
    /// Binds the health listener and prepares clients; connects lazily, so a
    /// dependency that is down delays readiness instead of failing start.
    pub async fn build(config: Config) -> Result<Self> {
        let listener = TcpListener::bind(config.listen).await?;
        let pool = db::pool(&config.database_url, &config.read_schema, 8)?;
        let redis = redis_views::connect(&config.redis_url)?;
        let consumer = consumer::create(&config)?;
        Ok(Self {
            config,
            listener,
            pool,
            redis,
            consumer,
            status: Arc::default(),
        })
    }

    pub fn port(&self) -> u16 {
        self.listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_default()
    }

    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> Result<()> {
        let Application {
            config,
            listener,
            pool,
            redis,
            consumer,
            status,
        } = self;
        let health = http::router(HealthState {
            pool: pool.clone(),
            redis: redis.clone(),
            status: status.clone(),
        });
        let server_shutdown = shutdown.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, health)
                .with_graceful_shutdown(async move { server_shutdown.cancelled().await })
                .await
        });

        let views = RedisViews::new(redis, &config.redis_prefix, config.view_style());
        let mut projector = Projector {
            config,
            pool,
            consumer,
            views,
            status,
            dirty: BTreeSet::new(),
            rebuild: true,
        };
        let result = projector.run(&shutdown).await;
        shutdown.cancel();
        let _ = server.await;
        info!("projector stopped");
        result
    }
}

struct Projector {
    config: Config,
    pool: PgPool,
    consumer: Arc<StreamConsumer>,
    views: RedisViews,
    status: Arc<Status>,
    /// Banks whose views failed to reach Redis; retried on the next tick.
    dirty: BTreeSet<BankId>,
    /// Rebuild every view from Postgres at the next chance (start, flush).
    rebuild: bool,
}

impl Projector {
    async fn run(&mut self, shutdown: &CancellationToken) -> Result<()> {
        let schema = self.config.read_schema.clone();
        let pool = self.pool.clone();
        if retry("applying migrations", shutdown, || {
            db::migrate(&pool, &schema)
        })
        .await
        .is_none()
        {
            return Ok(());
        }
        let topic = self.config.topic.clone();
        let Some(partitions) = retry("finding the topic's partitions", shutdown, || {
            consumer::owned_partitions(&self.consumer, &topic, &self.config.partitions)
        })
        .await
        else {
            return Ok(());
        };
        let Some(positions) = retry("reading stored offsets", shutdown, || {
            fold::positions(&pool, &topic, &partitions)
        })
        .await
        else {
            return Ok(());
        };
        consumer::assign(&self.consumer, &topic, &positions)?;
        info!(
            topic,
            ?positions,
            "assigned partitions at their stored offsets"
        );
        self.maintain_views().await;
        self.status.consuming.store(true, Ordering::Relaxed);

        let max = self.config.batch_max as usize;
        let wait = self.config.batch_wait();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            let consumer = Arc::clone(&self.consumer);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => self.maintain_views().await,
                batch = consumer::next_batch(&consumer, max, wait) => match batch {
                    Ok(batch) => {
                        if !self.apply(&batch, shutdown).await {
                            break;
                        }
                    }
                    Err(e) => {
                        warn!(error = %e, "kafka receive failed");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                },
            }
        }
        Ok(())
    }

    /// Applies one batch, retrying while Postgres is unavailable (consumption
    /// pauses meanwhile). False if shutdown came first: the batch is then
    /// unapplied and its offsets unmoved, so the next start reads it again.
    async fn apply(&mut self, batch: &[Incoming], shutdown: &CancellationToken) -> bool {
        let first = &batch[0];
        let span = info_span!(
            "batch",
            size = batch.len(),
            partition = first.partition,
            offset = first.offset
        );
        let pool = self.pool.clone();
        let topic = self.config.topic.clone();
        let applied = retry("applying a batch", shutdown, || {
            fold::apply_batch(&pool, &topic, batch)
        })
        .instrument(span.clone())
        .await;
        let Some(outcome) = applied else { return false };
        let _entered = span.enter();
        tracing::debug!(
            applied = outcome.applied,
            skipped = outcome.skipped,
            dead = outcome.dead_lettered,
            "batch applied"
        );
        if outcome.dead_lettered > 0 {
            warn!(count = outcome.dead_lettered, "messages dead-lettered");
        }
        drop(_entered);
        self.dirty.extend(outcome.banks);
        self.refresh_dirty().await;
        true
    }

    /// Re-renders the views of the banks marked dirty.
    async fn refresh_dirty(&mut self) {
        if self.dirty.is_empty() {
            return;
        }
        let ids: Vec<BankId> = self.dirty.iter().copied().collect();
        match self.publish(&ids).await {
            Ok(()) => self.dirty.clear(),
            Err(e) => warn!(error = %e, banks = ids.len(), "views not refreshed; will retry"),
        }
    }

    async fn publish(&mut self, ids: &[BankId]) -> Result<()> {
        let mut views = Vec::with_capacity(ids.len());
        for id in ids {
            views.push((*id, store::bank_view(&self.pool, *id).await?));
        }
        self.views.publish(&views).await
    }

    /// The periodic housekeeping: rebuild everything when Redis lost the
    /// views (flush, restart, first start), else retry what failed before.
    async fn maintain_views(&mut self) {
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
            match rebuild_views(&self.pool, &mut self.views).await {
                Ok(count) => {
                    info!(banks = count, "views rebuilt from postgres");
                    self.rebuild = false;
                }
                Err(e) => error!(error = %e, "rebuilding views failed; will retry"),
            }
        }
        self.refresh_dirty().await;
    }
}

/// Renders every bank's views from Postgres into Redis; returns the number
/// of banks.
pub async fn rebuild_views(pool: &PgPool, views: &mut RedisViews) -> Result<usize> {
    let ids = store::bank_ids(pool).await?;
    let mut rendered = Vec::with_capacity(ids.len());
    for id in &ids {
        rendered.push((*id, store::bank_view(pool, *id).await?));
    }
    views.publish(&rendered).await?;
    Ok(ids.len())
}

/// The `rebuild` command: views from Postgres, then exit.
pub async fn rebuild_once(config: &Config) -> Result<usize> {
    let pool = db::pool(&config.database_url, &config.read_schema, 2)?;
    db::migrate(&pool, &config.read_schema).await?;
    let redis = redis_views::connect(&config.redis_url)?;
    let mut views = RedisViews::new(redis, &config.redis_prefix, config.view_style());
    rebuild_views(&pool, &mut views).await
}
