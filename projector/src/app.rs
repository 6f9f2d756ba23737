//! The projector process as a value: built from a [`Config`], then run until
//! a shutdown signal. It serves the health listener and runs the
//! [`FoldLoop`] beside it.

use std::sync::Arc;

use ratewire_readmodel::{db, redis};
use ratewire_service::Listener;
use rdkafka::consumer::StreamConsumer;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::Config;
use crate::consumer;
use crate::error::Result;
use crate::fold_loop::FoldLoop;
use crate::http::{self, HealthState, Status};

pub struct Application {
    config: Config,
    listener: Listener,
    /// What /readyz checks; its pool (on the control schema) and Redis
    /// connection are the fold's too.
    health: HealthState,
    consumer: Arc<StreamConsumer>,
}

impl Application {
    /// Binds the health listener and prepares clients; connects lazily, so a
    /// dependency that is down delays readiness instead of failing start.
    pub async fn build(config: Config) -> Result<Self> {
        // Installed before anything is counted.
        ratewire_service::metrics::recorder();
        let listener = Listener::bind(config.listen).await?;
        let health = HealthState {
            // For health checks and the control table; folding uses a pool
            // per generation.
            pool: db::pool(
                &config.common.database_url,
                &config.read_model.control_schema,
                2,
            )?,
            redis: redis::connect(&config.read_model.redis_url)?,
            status: Arc::new(Status::new(config.ready_lag)),
        };
        let consumer = consumer::create(&config)?;
        Ok(Self {
            config,
            listener,
            health,
            consumer,
        })
    }

    pub fn port(&self) -> u16 {
        self.listener.port()
    }

    /// Serves health checks at once, folds until `shutdown`, then lets the
    /// view tasks finish what they were handed.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> Result<()> {
        let health = self.health;
        let router = http::router(health.clone());
        let limits = self.config.limits;
        let server =
            ratewire_service::serve(self.listener, "health", router, limits, shutdown.clone());
        let mut fold = FoldLoop::new(
            self.config,
            health.pool,
            health.redis,
            self.consumer,
            health.status,
            &shutdown,
        )?;
        let result = fold.run(&shutdown).await;
        shutdown.cancel();
        fold.finish().await;
        let _ = server.stopped().await;
        info!("projector stopped");
        result
    }
}
