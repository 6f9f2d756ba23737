//! The API process as a value: built from a [`Config`], run until shutdown.

use std::sync::Arc;
use std::time::Duration;

use ratewire_readmodel::continuity::Continuity;
use ratewire_readmodel::redis;
use ratewire_service::clients::AttemptLimit;
use ratewire_service::compatibility;
use ratewire_service::operator::OperatorGate;
use ratewire_service::periodic::every;
use ratewire_service::settings::RetentionSchedule;
use ratewire_service::{ListenerLimits, Listeners, Readiness};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::access::key_directory::KeyDirectory;
use crate::access::keys::KeyStore;
use crate::access::limits::Limiter;
use crate::access::stream_slots::StreamSlots;
use crate::access::usage_sync::UsageSync;
use crate::access::Access;
use crate::config::Config;
use crate::db;
use crate::error::Result;
use crate::redis_guard::RedisGuard;
use crate::routes;
use crate::state::{AppState, Shared};
use crate::views::read_model::ReadModels;
use crate::views::Views;

pub struct Application {
    listeners: Listeners,
    /// The live stream's blocking reads of the changes stream hold a
    /// connection of their own.
    live_connection: ratewire_readmodel::redis::Connection,
    /// And those of the alerts' stream another.
    alerts_connection: ratewire_readmodel::redis::Connection,
    alerts_stream: String,
    limits: ListenerLimits,
    state: AppState,
    /// The API's own schema (keys, usage), migrated before the first request.
    schema: String,
    /// Started once the API is prepared.
    usage_sync: UsageSync,
    retention: Retention,
}

/// The retention job's settings (see [`crate::access::retention`]).
struct Retention {
    schedule: RetentionSchedule,
    keep_months: u32,
    timezone: chrono_tz::Tz,
}

impl Application {
    /// Binds the listener and wires every client; connects lazily, so a
    /// dependency that is down delays readiness instead of failing start.
    pub async fn build(config: Config) -> Result<Self> {
        // Installed before anything is counted.
        ratewire_service::metrics::recorder();
        ratewire_service::metrics::register(crate::hot_metrics::DOCUMENTED);
        let listeners = Listeners::bind(config.listen, config.operator_listen).await?;
        let pool = db::pool(&config.common.database_url, &config.schema)?;
        let redis = RedisGuard::new(
            redis::connect(&config.read_model.redis_url)?,
            Duration::from_millis(config.redis_budget_ms),
        );
        let prefix = &config.read_model.redis_prefix;
        let usage_sync = UsageSync {
            pool: pool.clone(),
            redis: redis.conn(),
            prefix: prefix.clone(),
            timezone: config.read_model.timezone,
            interval: Duration::from_secs(config.usage_sync_secs),
            continuity: Continuity::new(prefix, &config.read_model.control_schema),
        };
        let state = state(&config, pool, redis.clone())?;
        Ok(Self {
            listeners,
            live_connection: redis::connect(&config.read_model.redis_url)?,
            alerts_connection: redis::connect(&config.read_model.redis_url)?,
            alerts_stream: ratewire_alerts::schema::stream_key(&config.read_model.redis_prefix),
            limits: config.serving.limits,
            state,
            schema: config.schema,
            usage_sync,
            retention: Retention {
                schedule: config.retention,
                keep_months: config.usage_retention_months,
                timezone: config.read_model.timezone,
            },
        })
    }

    /// The public listener's port.
    pub fn port(&self) -> u16 {
        self.listeners.public.port()
    }

    pub fn operator_port(&self) -> u16 {
        self.listeners.operator.port()
    }

    /// Serves at once (503 until Postgres is migrated), then until
    /// `shutdown`, finishing in-flight requests.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> Result<()> {
        let Self {
            listeners,
            live_connection,
            alerts_connection,
            alerts_stream,
            limits,
            state,
            schema,
            usage_sync,
            retention,
        } = self;
        info!(
            public = ?listeners.public.addr(),
            operator = ?listeners.operator.addr(),
            "api listening; preparing Postgres"
        );
        // Checked when Redis answers now; the API also starts without it
        // (degraded), and its probe checks it when Redis comes.
        let _ = redis::require_version(state.redis.conn()).await;
        tokio::spawn(state.redis.clone().watch(shutdown.clone()));
        tokio::spawn(Arc::clone(&state.access.limiter).track_instances(shutdown.clone()));
        tokio::spawn(Arc::clone(&state.access.limiter).reconcile_after_outages(shutdown.clone()));
        tokio::spawn(Arc::clone(&state.access.limiter).return_idle_leases(shutdown.clone()));
        tokio::spawn(Arc::clone(&state.access.stream_slots).renew(shutdown.clone()));
        // Live streams end when the process stops, so the graceful
        // shutdown does not wait for them.
        let streams = state.shutdown.clone();
        let stopping = shutdown.clone();
        tokio::spawn(async move {
            stopping.cancelled().await;
            streams.cancel();
        });
        let servers = listeners.serve_measured(
            routes::public(state.clone()),
            routes::operator(state.clone()),
            limits,
            &shutdown,
        );
        // The key table must exist, and the active generation be known,
        // before the first request; wait for Postgres.
        let prepared = state
            .readiness
            .prepare("applying migrations", &shutdown, || async {
                prepare(&state, &schema).await?;
                usage_sync.continuity.prepare(&state.pool).await?;
                Ok::<(), crate::Error>(())
            })
            .await;
        let sync = prepared.then(|| {
            info!("api ready");
            state
                .access
                .key_store
                .follow_changes(state.pool.clone(), shutdown.clone());
            let read = state.views.read.clone();
            tokio::spawn(read.clone().watch(state.pool.clone(), shutdown.clone()));
            tokio::spawn(
                state
                    .relay
                    .clone()
                    .follow(live_connection, read, shutdown.clone()),
            );
            tokio::spawn(state.relay.clone().follow_alerts(
                alerts_connection,
                alerts_stream,
                shutdown.clone(),
            ));
            let pool = state.pool.clone();
            tokio::spawn(every(
                "purging old usage",
                retention.schedule.interval(),
                shutdown.clone(),
                move || {
                    let pool = pool.clone();
                    async move {
                        let now = chrono::Utc::now();
                        crate::access::retention::purge(
                            &pool,
                            retention.timezone,
                            retention.keep_months,
                            now,
                        )
                        .await
                        .map(|_| ())
                    }
                },
            ));
            tokio::spawn(usage_sync.run(shutdown.clone()))
        });
        let served = servers.stopped().await;
        state.access.limiter.give_back_leases(Duration::ZERO).await;
        if let Some(sync) = sync {
            let _ = sync.await;
        }
        served?;
        info!("api stopped");
        Ok(())
    }
}

/// Everything the routers share, wired from `config` on `pool` (the API's
/// own schema) and `redis`; nothing is connected or started yet.
pub fn state(config: &Config, pool: sqlx::PgPool, redis: RedisGuard) -> Result<AppState> {
    let prefix = &config.read_model.redis_prefix;
    let cache = Arc::new(crate::views::cache::ViewCache::new(
        Duration::from_millis(config.view_cache_ms),
        usize::try_from(config.view_cache_mb << 20).unwrap_or(usize::MAX),
    ));
    let relay = crate::live::Relay::new(
        crate::live::Reader::new(redis.conn()),
        config.stream_buffer as usize,
        Arc::clone(&cache),
    );
    let access = Arc::new(Access {
        key_store: KeyStore::new(pool.clone(), redis.clone(), prefix).with_directory(
            KeyDirectory::new(&config.schema, config.key_directory_max as usize),
        ),
        limiter: Arc::new(Limiter::new(
            redis.clone(),
            prefix,
            config.read_model.timezone,
        )),
        plans: Arc::new(config.plans.clone()),
        clients: config.serving.clients.clone(),
        key_lookups: AttemptLimit::new(
            config.plans.anonymous().per_minute.min(u64::from(u32::MAX)) as u32,
            Duration::from_secs(60),
        ),
        anonymous_access: config.anonymous_access,
        rate_limits: config.rate_limits,
        stream_slots: Arc::new(StreamSlots::new(redis.clone(), prefix)),
    });
    let alerting = Arc::new(crate::alerting::Alerting::new(
        &config.common.database_url,
        &config.alerts,
        config.webhooks_per_key,
        config.read_model.view_style().outliers,
    )?);
    Ok(AppState::new(Shared {
        pool,
        alerting,
        views: Arc::new(Views {
            redis: redis.clone(),
            read: ReadModels::new(
                &config.common.database_url,
                config.read_database_url.as_deref(),
                &config.read_model,
            )?,
            cache,
            lists: Default::default(),
            fallbacks: Default::default(),
            refreshed: Default::default(),
            judged_boards: Default::default(),
            read_back: Default::default(),
            style: Arc::new(config.read_model.view_style()),
        }),
        access,
        redis,
        operators: OperatorGate::new(
            config.serving.operators.token(),
            config.serving.clients.clone(),
        ),
        timezone: config.read_model.timezone,
        stale_after: config.stale_after,
        spread_cap_percent: config.read_model.spread_cap_percent,
        series_page_points: config.series_page_points as usize,
        limits: config.serving.limits,
        cors_origins: config.cors_origins.clone(),
        signing: Arc::new(crate::signing::keys::KeySet {
            current: config.signing_key_file.clone(),
            retired: config
                .signing_retired_keys_file
                .clone()
                .unwrap_or_default()
                .0,
            validity_secs: config.signature_validity.as_secs(),
        }),
        readiness: Readiness::default(),
        relay,
        shutdown: CancellationToken::new(),
    }))
}

/// Makes the API ready to serve: Postgres is recent enough, the API's
/// schema `schema` and the alerts' are migrated, and the active read-model
/// generation known.
pub async fn prepare(state: &AppState, schema: &str) -> Result<()> {
    compatibility::require_postgres(&state.pool).await?;
    db::migrate(&state.pool, schema).await?;
    state.alerting.migrate().await?;
    state.views.read.refresh(&state.pool).await
}
