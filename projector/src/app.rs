//! The projector process as a value: built from a [`Config`], then run until
//! a shutdown signal. It serves the health listener and runs the
//! [`FoldLoop`] and the webhooks' [`ratewire_alerts::delivery::Deliverer`] beside it.

use std::sync::Arc;

use ratewire_readmodel::{db, redis};
use ratewire_service::Listener;
use rdkafka::consumer::Consumer;

use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::{Config, Partitions};
use crate::consumer::Log;
use crate::error::Result;
use crate::fold_loop::FoldLoop;
use crate::group;
use crate::http::{self, HealthState, Status};

pub struct Application {
    config: Config,
    listener: Listener,
    /// What /readyz checks; its pool (on the control schema) and Redis
    /// connection are the fold's too.
    health: HealthState,
    log: Log,
}

impl Application {
    /// Binds the health listener and prepares clients; connects lazily, so a
    /// dependency that is down delays readiness instead of failing start.
    pub async fn build(config: Config) -> Result<Self> {
        // Installed before anything is counted.
        ratewire_service::metrics::recorder();
        ratewire_service::metrics::register(crate::metrics::DOCUMENTED);
        let listener = Listener::bind(config.listen).await?;
        let health = HealthState {
            // For health checks and the control tables; folding uses a pool
            // per generation.
            pool: db::pool(
                &config.common.database_url,
                &config.read_model.control_schema,
                4,
            )?,
            redis: redis::connect(&config.read_model.redis_url)?,
            status: Arc::new(Status::new(config.ready_lag)),
        };
        let log = Log::connect(&config)?;
        Ok(Self {
            config,
            listener,
            health,
            log,
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
        // With `auto`, a member of the consumer group beside the fold says
        // which partitions this instance folds.
        let (ownership, member) = match self.config.partitions {
            Partitions::Auto => {
                // The member shares the fold consumer's record of having
                // reached the brokers.
                let kafka = self.log.consumer.context().as_ref().clone();
                let (ownership, member) = group::join(&self.config, kafka)?;
                let _ = health.status.member.set(member.client_id.clone());
                (Some(ownership), Some(member))
            }
            _ => (None, None),
        };
        // Webhooks are delivered beside the fold, never in it.
        let deliverer = ratewire_alerts::delivery::Deliverer::new(
            &self.config.common.database_url,
            &self.config.alerts,
            &self.config.delivery,
            &self.config.read_model,
        )?
        .map(|deliverer| tokio::spawn(deliverer.run(shutdown.clone())));
        let mut fold = FoldLoop::new(
            self.config,
            health.pool,
            health.redis,
            self.log,
            health.status,
            ownership,
            &shutdown,
        )?;
        let result = fold.run(&shutdown).await;
        shutdown.cancel();
        fold.finish().await;
        if let Some(deliverer) = deliverer {
            let _ = deliverer.await;
        }
        // Nothing is folded here any more: hand everything over now rather
        // than when the broker ends the session.
        if let Some(member) = member {
            member.leave().await;
        }
        let _ = server.stopped().await;
        info!("projector stopped");
        result
    }
}
