//! Which read-model generation the API serves: its Postgres schema (history
//! and fallback) and its Redis views, swapped without a restart when a
//! replay switches generations (see `ratewire_readmodel::generation`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use ratewire_readmodel::generation::{self, Generation};
use ratewire_readmodel::redis::Keys;
use ratewire_service::periodic::every;
use ratewire_service::postgres;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::Result;
use ratewire_readmodel::ReadModelSettings;

/// One generation as the API reads it.
pub struct ReadModel {
    /// Its schema and identity (see `ratewire_readmodel::generation`).
    pub generation: Generation,
    /// A pool whose `search_path` is the generation's schema.
    pub pool: PgPool,
    /// A replica's pool on the same schema, when one is configured.
    replica: Option<PgPool>,
    replica_up: Arc<AtomicBool>,
    pub views: Keys,
}

impl ReadModel {
    /// Where history and series are read: the replica while it answers its
    /// probe, else the primary (a replica outage costs the primary some
    /// reads, not the endpoints).
    pub fn history(&self) -> &PgPool {
        match &self.replica {
            Some(replica) if self.replica_up.load(Ordering::Relaxed) => replica,
            _ => &self.pool,
        }
    }
}

#[derive(Clone)]
pub struct ReadModels {
    current: Arc<ArcSwap<ReadModel>>,
    database_url: String,
    replica_url: Option<String>,
    /// The replica answered its last probe (false until it first does).
    replica_up: Arc<AtomicBool>,
    redis_prefix: String,
    control: String,
    default: String,
}

/// How often each instance looks for a switch.
const WATCH_EVERY: Duration = Duration::from_secs(1);

impl ReadModels {
    /// Starts on `RATEWIRE_READ_SCHEMA`; [`ReadModels::refresh`] finds the
    /// active generation. Reads go to the replica at `replica_url` while
    /// it answers, else to the primary at `database_url`.
    pub fn new(
        database_url: &str,
        replica_url: Option<&str>,
        settings: &ReadModelSettings,
    ) -> Result<Self> {
        let replica_up = Arc::new(AtomicBool::new(false));
        let initial = model(
            database_url,
            replica_url,
            &replica_up,
            &settings.redis_prefix,
            Generation {
                schema: settings.read_schema.clone(),
                identity: String::new(),
            },
        )?;
        Ok(Self {
            current: Arc::new(ArcSwap::from_pointee(initial)),
            database_url: database_url.to_owned(),
            replica_url: replica_url.map(str::to_owned),
            replica_up,
            redis_prefix: settings.redis_prefix.clone(),
            control: settings.control_schema.clone(),
            default: settings.read_schema.clone(),
        })
    }

    /// The generation to serve this request from.
    pub fn current(&self) -> Arc<ReadModel> {
        self.current.load_full()
    }

    /// Reads the control row and switches when it names another generation
    /// or identity: views another identity wrote are never read.
    pub async fn refresh(&self, pool: &PgPool) -> Result<()> {
        let active = generation::active(pool, &self.control, &self.default).await?;
        if active != self.current().generation {
            info!(
                from = ?self.current().generation,
                to = ?active,
                "serving another read-model generation"
            );
            let next = model(
                &self.database_url,
                self.replica_url.as_deref(),
                &self.replica_up,
                &self.redis_prefix,
                active,
            )?;
            self.current.store(Arc::new(next));
        }
        self.probe_replica().await;
        Ok(())
    }

    /// Whether a replica is configured, and if so whether it answers.
    pub fn replica_up(&self) -> Option<bool> {
        self.replica_url
            .as_ref()
            .map(|_| self.replica_up.load(Ordering::Relaxed))
    }

    async fn probe_replica(&self) {
        let current = self.current();
        let Some(replica) = &current.replica else {
            return;
        };
        let up = postgres::ping(replica).await;
        if self.replica_up.swap(up, Ordering::Relaxed) != up {
            if up {
                info!("the read replica answers; history and series read it");
            } else {
                warn!("the read replica does not answer; history and series read the primary");
            }
        }
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

fn model(
    database_url: &str,
    replica_url: Option<&str>,
    replica_up: &Arc<AtomicBool>,
    redis_prefix: &str,
    generation: Generation,
) -> Result<ReadModel> {
    let schema = &generation.schema;
    let replica = replica_url
        .map(|url| ratewire_readmodel::db::pool(url, schema, 16))
        .transpose()?;
    Ok(ReadModel {
        pool: ratewire_readmodel::db::pool(database_url, schema, 16)?,
        replica,
        replica_up: Arc::clone(replica_up),
        views: Keys::new(&generation.views_prefix(redis_prefix)),
        generation,
    })
}
