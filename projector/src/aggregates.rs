//! The views over all banks (/currencies, best rates, the all-banks lists)
//! are recomputed by a task of their own, off the fold's path. Reading every
//! bank's quotes and four 30-day series per currency takes tens of
//! milliseconds per currency; done in line, once a second, it held up the
//! fold (and so every board's freshness) for most of each second. The task
//! keeps the series it read ([`SeriesCache`]), so a recompute reads only
//! what changed since the last.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::Utc;
use ratewire_proto::CurrencyCode;
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::error::Result;
use crate::metrics as report;
use crate::redis_views::{RedisViews, Rendered, ViewUpdate};
use crate::series_cache::{SeriesCache, SeriesKey};
use ratewire_readmodel::store;
use ratewire_readmodel::views::{self, BestEntry, Field, ViewStyle};

/// One recomputation, against the generation that was active when asked.
pub struct Job {
    /// The generation's read schema, `pool`'s search path.
    pub generation: String,
    pub pool: PgPool,
    pub views: RedisViews,
    /// Currencies whose best rates may have changed.
    pub currencies: Vec<CurrencyCode>,
}

/// What a failed job leaves to be done again.
#[derive(Debug, Default)]
pub struct Failed {
    pub any: bool,
    pub currencies: BTreeSet<CurrencyCode>,
}

/// Starts the task; a send fails while a job waits, and the caller keeps
/// its work for the next chance.
pub fn spawn(failed: Arc<Mutex<Failed>>, shutdown: CancellationToken) -> mpsc::Sender<Job> {
    let (sender, mut jobs) = mpsc::channel::<Job>(1);
    tokio::spawn(async move {
        let mut cache = SeriesCache::default();
        loop {
            let job = tokio::select! {
                _ = shutdown.cancelled() => return,
                job = jobs.recv() => match job {
                    Some(job) => job,
                    None => return,
                },
            };
            let started = Instant::now();
            let Job {
                generation,
                pool,
                mut views,
                currencies,
            } = job;
            let mut read_ms = 0;
            let done = async {
                let update =
                    load(&pool, &generation, &currencies, views.style(), &mut cache).await?;
                read_ms = started.elapsed().as_millis() as u64;
                views.apply(&update).await
            }
            .await;
            let took = started.elapsed();
            match done {
                Ok(()) => debug!(
                    currencies = currencies.len(),
                    series_carried = cache.stats().carried,
                    series_read = cache.stats().read,
                    read_ms,
                    ms = took.as_millis() as u64,
                    "views over all banks recomputed"
                ),
                Err(e) => {
                    report::view_error(&e);
                    warn!(error = %e, "views over all banks not recomputed; will retry");
                    let mut failed = failed.lock().expect("failed aggregates lock");
                    failed.any = true;
                    failed.currencies.extend(currencies);
                }
            }
            // At most a third of the time recomputing, however busy the log:
            // these views may lag a little; Postgres is shared with the fold.
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(took * 2) => {}
            }
        }
    });
    sender
}

/// Reads and renders /currencies and the best rates of `currencies`, in one
/// snapshot (the series cache relies on it), carrying forward the series
/// `cache` keeps.
pub async fn load(
    pool: &PgPool,
    generation: &str,
    currencies: &[CurrencyCode],
    style: &ViewStyle,
    cache: &mut SeriesCache,
) -> Result<ViewUpdate> {
    let started = Instant::now();
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let mut update = ViewUpdate::at(store::Version::of(&mut tx).await?);
    update.compose = true;
    // Any bank change can move a currency's count (new board, deactivation).
    update.currencies = Some(Rendered::new(views::currencies_response(
        &store::currency_counts(&mut *tx).await?,
        style,
    )));
    let counted = started.elapsed();
    let now = Utc::now();
    let quotes = store::quotes_of(&mut *tx, currencies).await?;
    let quoted = started.elapsed();
    let picks: Vec<(CurrencyCode, [Option<usize>; 4])> = currencies
        .iter()
        .map(|code| {
            let picks = quotes.get(code).map(|q| store::best_picks(q));
            (*code, picks.unwrap_or_default())
        })
        .collect();
    let mut wanted: Vec<SeriesKey> = Vec::new();
    for (code, picks) in &picks {
        for (field, pick) in Field::ALL.into_iter().zip(picks) {
            if let Some(i) = pick {
                wanted.push((quotes[code][*i].0.id, *code, field));
            }
        }
    }
    let mut series = cache.series(&mut tx, generation, &wanted, now).await?;
    tx.commit().await?;
    debug!(
        counts_ms = counted.as_millis() as u64,
        quotes_ms = (quoted - counted).as_millis() as u64,
        series_ms = (started.elapsed() - quoted).as_millis() as u64,
        "views over all banks read"
    );

    for (code, picks) in picks {
        let Some(quotes) = quotes.get(&code).filter(|q| !q.is_empty()) else {
            update.best.push((code, None));
            continue;
        };
        let entries: [Option<BestEntry>; 4] = std::array::from_fn(|f| {
            let field = Field::ALL[f];
            picks[f].map(|i| {
                let quote = &quotes[i];
                let points = series
                    .remove(&(quote.0.id, code, field))
                    .unwrap_or_default();
                store::best_entry(field, quote, points)
            })
        });
        // Fingerprinted without the render time: a recomputation that
        // changes nothing else is no change.
        let digest = views::digest(&views::best_rates_response(
            &entries,
            chrono::DateTime::UNIX_EPOCH,
        ));
        let body = views::best_rates_response(&entries, now);
        update.best.push((code, Some(Rendered { body, digest })));
    }
    Ok(update)
}
