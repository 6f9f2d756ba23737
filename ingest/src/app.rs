//! The ingest process as a value: built from a [`Config`], run until a
//! shutdown signal, then drained.

use std::time::Duration;

use ratewire_service::compatibility;
use ratewire_service::operator::OperatorGate;
use ratewire_service::periodic::every;
use ratewire_service::{Listeners, Readiness};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::board_records::BoardRecords;
use crate::config::Config;
use crate::db;
use crate::error::Result;
use crate::outbox;
use crate::publisher::Publisher;
use crate::routes::{self, AppState, PublisherGate};

pub struct Application {
    config: Config,
    listeners: Listeners,
    state: AppState,
}

impl Application {
    pub async fn build(config: Config) -> Result<Self> {
        // Installed before anything is counted.
        ratewire_service::metrics::recorder();
        ratewire_service::metrics::register(crate::metrics::DOCUMENTED);
        let listeners = Listeners::bind(config.listen, config.operator_listen).await?;
        let state = state(&config)?;
        Ok(Self {
            config,
            listeners,
            state,
        })
    }

    /// The public listener's port.
    pub fn port(&self) -> u16 {
        self.listeners.public.port()
    }

    pub fn operator_port(&self) -> u16 {
        self.listeners.operator.port()
    }

    /// Serves at once (503 until prepared), prepares the schema and topic
    /// (retrying while a dependency is down), serves until `shutdown`, then
    /// flushes the producer.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> Result<()> {
        let (config, state) = (&self.config, &self.state);
        info!(
            public = %config.listen,
            operator = %config.operator_listen,
            "ingest listening; preparing Postgres and the topic"
        );
        let servers = self.listeners.serve(
            routes::public(state.clone()),
            routes::operator(state.clone()),
            config.serving.limits,
            &shutdown,
        );
        let prepared = state
            .readiness
            .prepare(
                "preparing Postgres, the topic and the bank registry",
                &shutdown,
                || prepare(config, state),
            )
            .await;
        let background = prepared.then(|| {
            info!("ingest ready");
            let (pool, publisher) = (state.pool.clone(), state.publisher.clone());
            let drain = tokio::spawn(every(
                "publishing waiting bank changes",
                outbox::DRAIN_EVERY,
                shutdown.clone(),
                move || {
                    let (pool, publisher) = (pool.clone(), publisher.clone());
                    async move { outbox::drain(&pool, &publisher).await.map(|_| ()) }
                },
            ));
            let purge = tokio::spawn(purge_expired(
                state.pool.clone(),
                config.retention.interval(),
                config.retraction_window(),
                shutdown.clone(),
            ));
            [drain, purge]
        });
        let served = servers.stopped().await;
        // In-flight requests have had their answers; make sure nothing
        // acknowledged-in-progress is dropped on exit.
        state.publisher.flush(Duration::from_secs(5));
        for task in background.into_iter().flatten() {
            let _ = task.await;
        }
        served?;
        info!("ingest stopped");
        Ok(())
    }
}

/// What the routers share, wired from `config`; nothing is connected yet.
pub fn state(config: &Config) -> Result<AppState> {
    let pool = db::pool(&config.common.database_url, &config.schema)?;
    let publisher = Publisher::new(config)?.announcing(pool.clone());
    Ok(AppState {
        board_records: BoardRecords::spawn(pool.clone()),
        pool,
        publisher,
        operators: OperatorGate::new(
            config.serving.operators.token(),
            config.serving.clients.clone(),
        ),
        publishers: PublisherGate::new(
            config.serving.clients.clone(),
            config.auth_failures_per_minute,
        ),
        body_limit: config.body_limit,
        as_of_horizon: config.as_of_horizon,
        retraction_window: config.retraction_window(),
        readiness: Readiness::default(),
    })
}

/// Migrations, then the topic (when ingest creates it), then the banks the
/// log has that ingest's tables lack: nothing is taken before ingest knows
/// every id and code the log has.
async fn prepare(config: &Config, state: &AppState) -> Result<()> {
    compatibility::require_postgres(&state.pool).await?;
    db::migrate(&state.pool, &config.schema).await?;
    if config.create_topic {
        state.publisher.ensure_topic(config).await?;
    } else {
        state.publisher.check_timestamp_type(config).await?;
    }
    crate::log_registry::reconcile(
        &state.pool,
        state.publisher.settings(),
        &config.topic,
        Duration::from_secs(10),
    )
    .await?;
    Ok(())
}

/// Forgets idempotency keys past their retention and boards past the
/// retraction window, until shutdown.
async fn purge_expired(
    pool: sqlx::PgPool,
    interval: Duration,
    retraction_window: chrono::Duration,
    shutdown: CancellationToken,
) {
    every("purging expired records", interval, shutdown, || async {
        let purged = crate::idempotency::purge(&pool).await?;
        if purged > 0 {
            info!(purged, "expired idempotency keys purged");
        }
        let purged = crate::retraction::purge(&pool, retraction_window).await?;
        if purged > 0 {
            info!(purged, "boards past the retraction window forgotten");
        }
        Ok::<_, crate::Error>(())
    })
    .await;
}
