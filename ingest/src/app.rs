//! The ingest process as a value: built from a [`Config`], run until a
//! shutdown signal, then drained.

use std::future::IntoFuture;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ratewire_proto::runtime::retry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::Config;
use crate::db;
use crate::error::Result;
use crate::publisher::{self, Publisher};
use crate::routes::{self, AppState};

pub struct Application {
    config: Config,
    listener: TcpListener,
    state: AppState,
}

impl Application {
    pub async fn build(config: Config) -> Result<Self> {
        // Installed before anything is counted.
        ratewire_proto::runtime::metrics();
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| crate::Error::Startup(format!("binding {}: {e}", config.listen)))?;
        let pool = db::pool(&config.database_url, &config.schema)?;
        let publisher = Publisher::new(&config)?;
        let state = AppState {
            pool,
            publisher,
            admin_token: config
                .admin_token
                .as_deref()
                .filter(|t| !t.is_empty())
                .map(Into::into),
            body_limit: config.body_limit,
            prepared: Arc::new(AtomicBool::new(false)),
        };
        Ok(Self {
            config,
            listener,
            state,
        })
    }

    pub fn port(&self) -> u16 {
        self.listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_default()
    }

    /// Serves at once (503 until prepared), prepares the schema and topic
    /// (retrying while a dependency is down), serves until `shutdown`, then
    /// flushes the producer.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> Result<()> {
        let Application {
            config,
            listener,
            state,
        } = self;
        info!(addr = %config.listen, "ingest listening; preparing Postgres and the topic");
        let stop = shutdown.clone();
        let server = tokio::spawn(
            axum::serve(listener, routes::router(state.clone()))
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .into_future(),
        );
        let prepared = prepare(&config, &state, &shutdown).await;
        let purge = prepared.then(|| {
            state.prepared.store(true, Ordering::Release);
            info!("ingest ready");
            tokio::spawn(purge_idempotency_keys(state.pool.clone(), shutdown.clone()))
        });
        let served = server.await;
        // In-flight requests have had their answers; make sure nothing
        // acknowledged-in-progress is dropped on exit.
        state.publisher.flush(Duration::from_secs(5));
        if let Some(purge) = purge {
            let _ = purge.await;
        }
        served
            .map_err(|e| crate::Error::Startup(format!("server task: {e}")))?
            .map_err(|e| crate::Error::Startup(format!("server: {e}")))?;
        info!("ingest stopped");
        Ok(())
    }
}

/// Migrations, then the topic; false when shutdown came first.
async fn prepare(config: &Config, state: &AppState, shutdown: &CancellationToken) -> bool {
    if retry("applying migrations", shutdown, || {
        db::migrate(&state.pool, &config.schema)
    })
    .await
    .is_none()
    {
        return false;
    }
    !config.create_topic
        || retry("creating the topic", shutdown, || {
            publisher::ensure_topic(config)
        })
        .await
        .is_some()
}

/// Forgets idempotency keys past their retention, hourly, until shutdown.
async fn purge_idempotency_keys(pool: sqlx::PgPool, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match crate::idempotency::purge(&pool).await {
            Ok(0) => {}
            Ok(purged) => info!(purged, "expired idempotency keys purged"),
            Err(e) => tracing::warn!(error = %e, "purging idempotency keys failed; will retry"),
        }
    }
}
