//! The API process as a value: built from a [`Config`], run until shutdown.

use std::future::IntoFuture;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ratewire_projector::redis_views;
use ratewire_proto::runtime::retry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::Config;
use crate::db;
use crate::error::{Error, Result};
use crate::keys::KeyStore;
use crate::limits::Limiter;
use crate::read_model::ReadModels;
use crate::routes::{self, AppState, Shared};
use crate::usage_sync::UsageSync;

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
            .map_err(|e| Error::Startup(format!("binding {}: {e}", config.listen)))?;
        let pool = db::pool(&config.database_url, &config.schema)?;
        let redis = redis_views::connect(&config.redis_url)?;
        let state = AppState::new(Shared {
            key_store: KeyStore::new(pool.clone(), redis.clone(), &config.redis_prefix),
            limiter: Arc::new(Limiter::new(
                redis.clone(),
                &config.redis_prefix,
                config.timezone,
            )),
            pool,
            redis,
            read: ReadModels::new(&config)?,
            style: Arc::new(config.view_style()),
            admin_token: config
                .admin_token
                .as_deref()
                .filter(|t| !t.is_empty())
                .map(Into::into),
            timezone: config.timezone,
            plans: Arc::new(config.plans.clone()),
            trusted_proxies: config.trusted_proxies.iter().map(|p| p.0).collect(),
            anonymous_access: config.anonymous_access,
            rate_limits: config.rate_limits,
            prepared: Arc::new(AtomicBool::new(false)),
        });
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

    /// Serves at once (503 until Postgres is migrated), then until
    /// `shutdown`, finishing in-flight requests.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> Result<()> {
        let Application {
            config,
            listener,
            state,
        } = self;
        info!(addr = %config.listen, "api listening; preparing Postgres");
        let app = routes::router(state.clone())
            .into_make_service_with_connect_info::<std::net::SocketAddr>();
        let stop = shutdown.clone();
        let server = tokio::spawn(
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .into_future(),
        );
        // The key table must exist, and the active generation be known,
        // before the first request; wait for Postgres.
        let migrated = retry("applying migrations", &shutdown, || async {
            db::migrate(&state.pool, &config.schema).await?;
            state.read.refresh(&state.pool).await
        })
        .await;
        let sync = migrated.map(|()| {
            state.prepared.store(true, Ordering::Release);
            info!("api ready");
            let sync = UsageSync {
                pool: state.pool.clone(),
                redis: state.redis.clone(),
                prefix: config.redis_prefix.clone(),
                timezone: config.timezone,
                interval: std::time::Duration::from_secs(config.usage_sync_secs),
            };
            tokio::spawn(
                state
                    .read
                    .clone()
                    .watch(state.pool.clone(), shutdown.clone()),
            );
            tokio::spawn(sync.run(shutdown.clone()))
        });
        let served = server.await;
        if let Some(sync) = sync {
            let _ = sync.await;
        }
        served
            .map_err(|e| Error::Startup(format!("server task: {e}")))?
            .map_err(|e| Error::Startup(format!("server: {e}")))?;
        info!("api stopped");
        Ok(())
    }
}
