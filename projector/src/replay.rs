//! `ratewire-projector replay`: folds the whole log, from offset zero, into
//! a fresh generation (a new schema and its own Redis views) while readers
//! keep using the active one, then makes it the active one.
//!
//! Used for a new view or a fix to the fold: deploy the new build, run the
//! replay into a new schema; API instances and running projectors follow
//! the switch by themselves (see `generation`). The old schema stays for a
//! rollback (switch back with another replay, or drop it when done).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::info;

use ratewire_readmodel::{db, generation, redis};

use crate::config::{Config, Partitions};
use crate::error::{Error, Result};
use crate::holes::{Reads, Start};
use crate::rebuild::rebuild_views;
use crate::redis_views::RedisViews;
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
    let active = generation::active(
        &control,
        &read_model.control_schema,
        &read_model.read_schema,
    )
    .await?;
    if settings.schema == active {
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
    let pool = db::pool(&config.common.database_url, &settings.schema, 8)?;
    db::migrate(&pool, &settings.schema).await?;
    let redis = redis::connect(&read_model.redis_url)?;
    let mut views = RedisViews::for_generation(redis, read_model, &settings.schema);
    let stale = views.clear().await?;
    info!(
        from = active,
        into = settings.schema,
        stale_views = stale,
        "replay starting from offset zero"
    );

    let kafka = consumer::create(config)?;
    let partitions = consumer::owned_partitions(&kafka, &config.topic, &Partitions::All).await?;
    let mut positions = fold::positions(&pool, &config.topic, &partitions).await?;
    let marks =
        consumer::watermarks(&kafka, &config.topic, &partitions, Duration::from_secs(5)).await?;
    if let Some((partition, (low, _))) = marks.iter().find(|(_, (low, _))| *low > 0) {
        return Err(Error::Config(format!(
            "partition {partition} of {} now starts at offset {low}: retention deleted events, so a replay cannot rebuild the read model",
            config.topic
        )));
    }
    consumer::assign(&kafka, &config.topic, &positions)?;
    // A fresh schema reads every partition from its first offset (checked
    // above), so every offset the read passes over is proven empty.
    let mut reads = Reads::default();
    reads.started(
        &positions
            .iter()
            .map(|(p, offset)| {
                let start = Start {
                    offset: *offset,
                    at_log_start: marks.get(p).is_some_and(|(low, _)| *offset <= *low),
                };
                (*p, start)
            })
            .collect(),
    );

    let mut report = ReplayReport::default();
    let (max, wait) = (config.batch_max as usize, config.batch_wait());
    let receive = |kafka: Arc<rdkafka::consumer::StreamConsumer>| async move {
        consumer::next_batch(&kafka, max, wait).await
    };
    let mut next = Box::pin(receive(Arc::clone(&kafka)));
    let mut last_report = Instant::now();
    loop {
        if shutdown.is_cancelled() {
            return Err(Error::Config(
                "replay interrupted; the new schema is incomplete and not active".into(),
            ));
        }
        let marks =
            consumer::watermarks(&kafka, &config.topic, &partitions, Duration::from_secs(5))
                .await?;
        let lag: i64 = marks
            .iter()
            .map(|(p, (_, high))| (high - positions.get(p).copied().unwrap_or(0)).max(0))
            .sum();
        if last_report.elapsed() >= Duration::from_secs(2) {
            let rate = report.events as f64 / started.elapsed().as_secs_f64().max(0.001);
            info!(
                events = report.events,
                lag,
                events_per_sec = rate as u64,
                "replaying"
            );
            last_report = Instant::now();
        }
        if lag <= SWITCH_LAG {
            break;
        }
        // Keep receiving until the watermarks are worth checking again; the
        // receive itself is never cut short (that would drop messages).
        let round = tokio::time::sleep(Duration::from_secs(1));
        tokio::pin!(round);
        loop {
            let batch = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = &mut round => break,
                batch = &mut next => batch?,
            };
            next.set(receive(Arc::clone(&kafka)));
            let holes = reads.holes(&batch);
            let outcome = fold::apply_batch(&pool, &config.topic, &batch, &holes).await?;
            report.events += outcome.applied as u64;
            report.dead_lettered += outcome.dead_lettered as u64;
            positions.extend(outcome.positions);
            if !outcome.gaps.is_empty() {
                // One read from the log's start cannot pass over a message.
                return Err(Error::Config(format!(
                    "the log skipped offsets during the replay: {:?}",
                    outcome.gaps
                )));
            }
            // Caught up with the watermarks this round began with: look
            // again now rather than idle out the rest of the second.
            let reached = marks
                .iter()
                .all(|(p, (_, high))| positions.get(p).copied().unwrap_or(0) >= *high);
            if reached {
                break;
            }
        }
    }

    // A replay is a bulk load: until autovacuum gets to the new schema its
    // tables have no statistics, and the views and the API's fallback reads
    // would be planned blind (a best-rates series read measured 0.7 ms
    // without statistics, 0.14 ms with). The search path is the new schema.
    sqlx::query("ANALYZE banks, boards, rates, currencies")
        .execute(&pool)
        .await?;
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
        switched = report.switched,
        schema = settings.schema,
        "replay finished"
    );
    Ok(report)
}
