//! Redis views are derived state: rebuilt from Postgres when they are
//! missing (a flush, a new Redis, the first start), after a replay, and by
//! the `rebuild` command.

use ratewire_proto::BankId;
use ratewire_readmodel::{db, generation, redis, store};
use sqlx::PgPool;

use crate::config::Config;
use crate::error::Result;
use crate::views::redis::{RedisViews, ViewUpdate};
use crate::views::series_cache::SeriesCache;
use crate::views::{aggregates, reference};

/// Renders every view from Postgres into Redis; returns the number of banks.
pub async fn rebuild_views(pool: &PgPool, views: &mut RedisViews) -> Result<usize> {
    let banks = store::bank_ids(pool).await?;
    let currencies = store::known_currencies(pool).await?;
    for update in ViewUpdate::load_banks(pool, &banks).await? {
        views.apply(&update).await?;
    }
    let update = aggregates::load(
        pool,
        "",
        &currencies,
        views.style(),
        &mut SeriesCache::default(),
    )
    .await?;
    views.apply(&update).await?;
    let update = reference::load(pool, None, views.style()).await?;
    views.apply(&update).await?;
    views.mark_built().await?;
    Ok(banks.len())
}

/// Writes the views a change outside the fold touched (a dead letter
/// re-driven): those of `banks`, the best rates of `currencies`, the
/// reference days, and the views over all banks.
pub async fn refresh_views(
    pool: &PgPool,
    views: &mut RedisViews,
    banks: &[BankId],
    currencies: &[ratewire_proto::CurrencyCode],
    reference_days: &std::collections::BTreeSet<(String, chrono::NaiveDate)>,
) -> Result<()> {
    if !reference_days.is_empty() {
        let update = reference::load(pool, Some(reference_days), views.style()).await?;
        views.apply(&update).await?;
    }
    for update in ViewUpdate::load_banks(pool, banks).await? {
        views.apply(&update).await?;
    }
    let update = aggregates::load(
        pool,
        "",
        currencies,
        views.style(),
        &mut SeriesCache::default(),
    )
    .await?;
    views.apply(&update).await
}

/// The `rebuild` command: the active generation's views from Postgres,
/// unconditionally, then exit.
pub async fn rebuild_once(config: &Config) -> Result<usize> {
    let (active, pool) = active_generation(config).await?;
    let redis = redis::connect(&config.read_model.redis_url)?;
    let mut views = RedisViews::for_generation(redis, &config.read_model, &active);
    // An operator's rebuild writes what Postgres holds now, whatever was
    // written before: after Postgres was restored from a backup, every
    // stored view looks newer than anything it can read.
    views.forget_versions().await?;
    rebuild_views(&pool, &mut views).await
}

/// The active generation and a pool on its schema, migrated (for the
/// operator commands).
pub async fn active_generation(config: &Config) -> Result<(generation::Generation, PgPool)> {
    let settings = &config.read_model;
    let control = db::pool(&config.common.database_url, &settings.control_schema, 1)?;
    generation::prepare(&control, &settings.control_schema, &settings.read_schema).await?;
    let active =
        generation::active(&control, &settings.control_schema, &settings.read_schema).await?;
    let pool = db::writer_pool(&config.common.database_url, &active.schema, 2)?;
    db::migrate(&pool, &active.schema).await?;
    Ok((active, pool))
}
