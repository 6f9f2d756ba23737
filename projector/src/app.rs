//! The projector process as a value: built from a [`Config`], then run until
//! a shutdown signal. It serves the health listener and runs the
//! [`FoldLoop`] beside it.

use std::sync::Arc;

use ratewire_readmodel::{db, redis};
use ratewire_service::Listener;
use rdkafka::consumer::StreamConsumer;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::{Config, Partitions};
use crate::consumer;
use crate::error::Result;
use crate::fold_loop::FoldLoop;
use crate::http::{self, HealthState, Status};
use crate::leases::{self, Membership};

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
            // For health checks, the control tables and the leases; folding
            // uses a pool per generation.
            pool: db::pool(
                &config.common.database_url,
                &config.read_model.control_schema,
                4,
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
        // With `auto`, a task beside the fold holds this instance's share
        // of the partitions.
        let membership = (self.config.partitions == Partitions::Auto).then(|| {
            Membership::new(
                health.pool.clone(),
                &self.config.read_model.control_schema,
                &self.config.topic,
                self.config.lease(),
            )
        });
        let (ownership, keeper) = match &membership {
            Some(membership) => {
                let _ = health.status.member.set(membership.member.clone());
                info!(
                    member = membership.member,
                    "sharing the topic's partitions through leases"
                );
                let (ownership, task) = leases::spawn(
                    membership.clone(),
                    Arc::clone(&self.consumer),
                    shutdown.clone(),
                );
                (Some(ownership), Some(task))
            }
            None => (None, None),
        };
        let mut fold = FoldLoop::new(
            self.config,
            health.pool,
            health.redis,
            self.consumer,
            health.status,
            ownership,
            &shutdown,
        )?;
        let result = fold.run(&shutdown).await;
        shutdown.cancel();
        fold.finish().await;
        if let (Some(membership), Some(keeper)) = (membership, keeper) {
            let _ = keeper.await;
            // Nothing is folded here any more: hand everything over now
            // rather than when the leases lapse.
            match tokio::time::timeout(std::time::Duration::from_secs(5), membership.leave()).await
            {
                Ok(Ok(())) => info!("left; partitions released"),
                Ok(Err(e)) => {
                    warn!(error = %e, "releasing partitions failed; they lapse with their leases")
                }
                Err(_) => warn!("releasing partitions timed out; they lapse with their leases"),
            }
        }
        let _ = server.stopped().await;
        info!("projector stopped");
        result
    }
}
