//! Which read-model generation the API serves: its Postgres schema (history
//! and fallback) and its Redis views, swapped without a restart when a
//! replay switches generations (see `ratewire_readmodel::generation`).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use ratewire_readmodel::generation;
use ratewire_readmodel::redis::Keys;
use ratewire_service::periodic::every;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::Config;
use crate::error::Result;

/// One generation as the API reads it.
pub struct ReadModel {
    pub schema: String,
    /// A pool whose `search_path` is the generation's schema.
    pub pool: PgPool,
    pub views: Keys,
}

#[derive(Clone)]
pub struct ReadModels {
    current: Arc<ArcSwap<ReadModel>>,
    database_url: String,
    redis_prefix: String,
    control: String,
    default: String,
}

/// How often each instance looks for a switch.
const WATCH_EVERY: Duration = Duration::from_secs(1);

impl ReadModels {
    /// Starts on `RATEWIRE_READ_SCHEMA`; [`ReadModels::refresh`] finds the
    /// active generation.
    pub fn new(config: &Config) -> Result<Self> {
        let settings = &config.read_model;
        let initial = model(
            &config.common.database_url,
            &settings.redis_prefix,
            &settings.read_schema,
        )?;
        Ok(Self {
            current: Arc::new(ArcSwap::from_pointee(initial)),
            database_url: config.common.database_url.clone(),
            redis_prefix: settings.redis_prefix.clone(),
            control: settings.control_schema.clone(),
            default: settings.read_schema.clone(),
        })
    }

    /// The generation to serve this request from.
    pub fn current(&self) -> Arc<ReadModel> {
        self.current.load_full()
    }

    /// Reads the control row and switches when it names another generation.
    pub async fn refresh(&self, pool: &PgPool) -> Result<()> {
        let active = generation::active(pool, &self.control, &self.default).await?;
        if active != self.current().schema {
            info!(
                from = self.current().schema,
                to = active,
                "serving another read-model generation"
            );
            let next = model(&self.database_url, &self.redis_prefix, &active)?;
            self.current.store(Arc::new(next));
        }
        Ok(())
    }

    /// Follows switches until shutdown.
    pub async fn watch(self, pool: PgPool, shutdown: CancellationToken) {
        every(
            "reading the active read-model generation",
            WATCH_EVERY,
            shutdown,
            || self.refresh(&pool),
        )
        .await;
    }
}

fn model(database_url: &str, redis_prefix: &str, schema: &str) -> Result<ReadModel> {
    Ok(ReadModel {
        schema: schema.to_owned(),
        pool: ratewire_readmodel::db::pool(database_url, schema, 16)?,
        views: Keys::new(&generation::views_prefix(redis_prefix, schema)),
    })
}
