//! `ratewire-projector replay`: folds the whole log, from offset zero, into
//! a fresh generation (a new schema and its own Redis views) while readers
//! keep using the active one, then makes it the active one.
//!
//! Used for a new view or a fix to the fold: deploy the new build, run the
//! replay into a new schema; API instances and running projectors follow
//! the switch by themselves (see `generation`). The old schema stays for a
//! rollback (switch back with another replay, or drop it when done).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratewire_service::progress::Progress;
use tokio_util::sync::CancellationToken;
use tracing::info;

use ratewire_readmodel::{db, generation, redis};

use crate::config::{Config, Partitions};
use crate::consumer::{KafkaContext, Log, LogQueries};
use crate::error::{Error, Result};
use crate::holes::{Reads, Start};
use crate::views::rebuild::rebuild_views;
use crate::views::redis::RedisViews;
use crate::{consumer, fold};

#[derive(Debug, Clone)]
pub struct ReplaySettings {
    /// The new generation's schema; must not hold tables yet.
    pub schema: String,
    /// Make it the active generation once caught up.
    pub switch: bool,
}

/// What a replay did.
#[derive(Debug, Default)]
pub struct ReplayReport {
    pub events: u64,
    pub dead_lettered: u64,
    pub elapsed: Duration,
    pub switched: bool,
    pub positions: BTreeMap<i32, i64>,
}

/// How far behind the log's end the replay may be when it switches: the
/// projectors that follow the switch fold the rest from its stored offsets.
const SWITCH_LAG: i64 = 0;

pub async fn replay(
    config: &Config,
    settings: &ReplaySettings,
    shutdown: &CancellationToken,
) -> Result<ReplayReport> {
    let started = Instant::now();
    let read_model = &config.read_model;
    let control = db::pool(&config.common.database_url, &read_model.control_schema, 2)?;
    generation::prepare(
        &control,
        &read_model.control_schema,
        &read_model.read_schema,
    )
    .await?;
    let active = generation::active(
        &control,
        &read_model.control_schema,
        &read_model.read_schema,
    )
    .await?;
    if settings.schema == active.schema {
        return Err(Error::Config(format!(
            "{} is the active generation; replay into a new schema",
            settings.schema
        )));
    }
    if generation::schema_in_use(&control, &settings.schema).await? {
        return Err(Error::Config(format!(
            "schema {0} already holds tables; replay builds a fresh generation (DROP SCHEMA {0} CASCADE first, or pick another name)",
            settings.schema
        )));
    }
    let pool = db::writer_pool(
        &config.common.database_url,
        &settings.schema,
        config.pool_size(),
    )?;
    db::migrate(&pool, &settings.schema).await?;
    let alerts_schema = &config.alerts.alerts_schema;
    let alerts_pool = db::pool(&config.common.database_url, alerts_schema, 1)?;
    ratewire_alerts::migrate(&alerts_pool, alerts_schema).await?;
    alerts_pool.close().await;
    let redis = redis::connect(&read_model.redis_url)?;
    // The same Postgres as the active generation's, so the same identity.
    let target = generation::Generation {
        schema: settings.schema.clone(),
        identity: active.identity.clone(),
    };
    let mut views = RedisViews::for_generation(redis, read_model, &target);
    let stale = views.clear().await?;
    let prepared = started.elapsed();
    info!(
        from = active.schema,
        into = settings.schema,
        stale_views = stale,
        "replay starting from offset zero"
    );

    // Only questions here: the lanes read, each on a consumer of its own.
    let queries = LogQueries::create(config, KafkaContext::new(config))?;
    let partitions = queries
        .owned_partitions(&config.topic, &Partitions::All)
        .await?;
    let mut positions = fold::positions(&pool, &config.topic, &partitions).await?;
    let marks = queries
        .watermarks(&config.topic, &partitions, Duration::from_secs(5))
        .await?;
    if let Some((partition, (low, _))) = marks.iter().find(|(_, (low, _))| *low > 0) {
        return Err(Error::Config(format!(
            "partition {partition} of {} now starts at offset {low}: retention deleted events, so a replay cannot rebuild the read model",
            config.topic
        )));
    }
    // Each lane has a consumer of its own over some of the partitions, and
    // folds them from their first offset without waiting for the others
    // (see `fold::apply_lanes` for why partitions can go side by side).
    let lanes = (config.lanes as usize).clamp(1, partitions.len());
    let mut shares: Vec<BTreeMap<i32, i64>> = vec![BTreeMap::new(); lanes];
    for (i, (partition, offset)) in positions.iter().enumerate() {
        shares[i % lanes].insert(*partition, *offset);
    }
    let applied = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for share in shares {
        let lane = Lane {
            config: config.clone(),
            pool: pool.clone(),
            positions: share,
            marks: marks.clone(),
            applied: Arc::clone(&applied),
            alerts: ratewire_alerts::evaluation::Judge::for_replay(&config.alerts.alerts_schema)
                .with_spread_cap(config.read_model.spread_cap_percent)
                .with_outliers(config.read_model.view_style().outliers),
        };
        tasks.spawn(lane.run(shutdown.clone()));
    }
    let mut report = ReplayReport::default();
    // The log's messages, nearly all of them events.
    let messages = marks.values().map(|(low, high)| high - low).sum::<i64>();
    let progress = Progress::new("replay", Some(messages.max(0) as u64));
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    tick.tick().await;
    loop {
        tokio::select! {
            done = tasks.join_next() => match done {
                None => break,
                Some(Ok(Ok(lane))) => {
                    report.dead_lettered += lane.dead_lettered;
                    positions.extend(lane.positions);
                }
                Some(Ok(Err(e))) => return Err(e),
                Some(Err(e)) => std::panic::resume_unwind(e.into_panic()),
            },
            _ = tick.tick() => {
                progress.set(applied.load(Ordering::Relaxed), "events applied");
            }
        }
    }
    report.events = applied.load(Ordering::Relaxed);
    progress.set(report.events, "events applied");
    progress.finish();
    let folded = started.elapsed();

    // A replay is a bulk load: until autovacuum gets to the new schema its
    // tables have no statistics, and the views and the API's fallback reads
    // would be planned blind, several times slower (docs/benchmarks.md,
    // "Figures behind design choices in the code").
    db::analyze(&pool).await?;
    let analysed = started.elapsed();
    let banks = rebuild_views(&pool, &mut views).await?;
    if settings.switch {
        generation::switch(&control, &read_model.control_schema, &settings.schema).await?;
        report.switched = true;
    }
    report.elapsed = started.elapsed();
    report.positions = positions;
    info!(
        events = report.events,
        dead = report.dead_lettered,
        banks,
        seconds = report.elapsed.as_secs_f64(),
        // Where the time went: the schema made, the log folded, the
        // statistics, the views (with the switch).
        prepare_seconds = prepared.as_secs_f64(),
        fold_seconds = (folded - prepared).as_secs_f64(),
        analyze_seconds = (analysed - folded).as_secs_f64(),
        views_seconds = (report.elapsed - analysed).as_secs_f64(),
        switched = report.switched,
        schema = settings.schema,
        "replay finished"
    );
    Ok(report)
}

/// One lane of a replay: a consumer of its own over some partitions.
struct Lane {
    config: Config,
    pool: sqlx::PgPool,
    /// Its partitions and their stored positions.
    positions: BTreeMap<i32, i64>,
    /// Every partition's watermarks: when the replay began, then as last
    /// looked at.
    marks: BTreeMap<i32, (i64, i64)>,
    /// Events applied by every lane.
    applied: Arc<AtomicU64>,
    alerts: ratewire_alerts::evaluation::Judge,
}

/// What a lane did.
struct LaneReport {
    dead_lettered: u64,
    positions: BTreeMap<i32, i64>,
}

impl Lane {
    /// Folds the lane's partitions until they reach the log's end.
    async fn run(mut self, shutdown: CancellationToken) -> Result<LaneReport> {
        let config = &self.config;
        let Log {
            consumer: kafka,
            queries,
        } = Log::connect(config)?;
        let partitions: Vec<i32> = self.positions.keys().copied().collect();
        consumer::assign(&kafka, &config.topic, &self.positions)?;
        // A fresh schema reads every partition from its first offset
        // (checked before), so every offset the read passes over is proven
        // empty.
        let mut reads = Reads::default();
        reads.started(&starts(&self.positions, &self.marks));
        let mut dead_lettered = 0;
        let limits = consumer::BatchLimits {
            traced: false,
            ..consumer::BatchLimits::of(config)
        };
        let receive = |kafka: Arc<consumer::LogConsumer>| async move {
            consumer::next_batch(&kafka, limits).await
        };
        let mut next = Box::pin(receive(Arc::clone(&kafka)));
        loop {
            if shutdown.is_cancelled() {
                return Err(Error::Config(
                    "replay interrupted; the new schema is incomplete and not active".into(),
                ));
            }
            if behind(&self.positions, &self.marks) <= SWITCH_LAG {
                break;
            }
            // Keep receiving until the watermarks are worth checking again;
            // the receive itself is never cut short (that would drop
            // messages).
            let round = tokio::time::sleep(Duration::from_secs(1));
            tokio::pin!(round);
            loop {
                let received = tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = &mut round => break,
                    batch = &mut next => batch,
                };
                next.set(receive(Arc::clone(&kafka)));
                let batch = match received {
                    Ok(batch) => batch,
                    Err(e) => {
                        // A node of the cluster gone (refused, or every
                        // connection down for a moment): as the live fold
                        // does, read again from the positions reached, which
                        // is always safe, rather than lose the replay.
                        tracing::warn!(error = %e, "kafka receive failed during the replay; reading again from the positions reached");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        consumer::assign(&kafka, &config.topic, &self.positions)?;
                        reads.started(&starts(&self.positions, &self.marks));
                        continue;
                    }
                };
                let holes = reads.holes(batch.iter().map(|m| (m.partition, m.offset)));
                // Alerts too: messages the live fold has not evaluated yet
                // are evaluated here, once (see `ratewire_alerts::evaluation`).
                let outcome = fold::apply_batch(
                    &self.pool,
                    &config.topic,
                    &batch,
                    &holes,
                    Some(&self.alerts),
                )
                .await?;
                self.applied
                    .fetch_add(outcome.applied as u64, Ordering::Relaxed);
                dead_lettered += outcome.dead_lettered as u64;
                self.positions.extend(outcome.positions);
                if !outcome.gaps.is_empty() {
                    // One read from the log's start cannot pass over a message.
                    return Err(Error::Config(format!(
                        "the log skipped offsets during the replay: {:?}",
                        outcome.gaps
                    )));
                }
                // Caught up with the watermarks this round began with: look
                // again now rather than idle out the rest of the second.
                if behind(&self.positions, &self.marks) == 0 {
                    break;
                }
            }
            self.marks = queries
                .watermarks(&config.topic, &partitions, Duration::from_secs(5))
                .await?;
        }
        Ok(LaneReport {
            dead_lettered,
            positions: self.positions,
        })
    }
}

/// Where each read of the lane starts: at its position, which is the log's
/// start when no event the broker still holds comes before it.
fn starts(
    positions: &BTreeMap<i32, i64>,
    marks: &BTreeMap<i32, (i64, i64)>,
) -> BTreeMap<i32, Start> {
    positions
        .iter()
        .map(|(p, offset)| {
            let start = Start {
                offset: *offset,
                at_log_start: marks.get(p).is_some_and(|(low, _)| *offset <= *low),
            };
            (*p, start)
        })
        .collect()
}

/// Events of the lane's partitions not applied yet, by `marks`.
fn behind(positions: &BTreeMap<i32, i64>, marks: &BTreeMap<i32, (i64, i64)>) -> i64 {
    positions
        .iter()
        .map(|(p, position)| {
            let high = marks.get(p).map_or(0, |(_, high)| *high);
            (high - position).max(0)
        })
        .sum()
}
