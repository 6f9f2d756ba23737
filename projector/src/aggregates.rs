//! The views over all banks (/currencies, best rates, the all-banks lists)
//! are recomputed by a task of their own, off the fold's path. Reading every
//! bank's quotes and four 30-day series per currency takes tens of
//! milliseconds per currency; done in line, once a second, it held up the
//! fold (and so every board's freshness) for most of each second.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ratewire_proto::CurrencyCode;
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::app::load_update;
use crate::metrics as report;
use crate::redis_views::RedisViews;

/// One recomputation, against the generation that was active when asked.
pub struct Job {
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
                pool,
                mut views,
                currencies,
            } = job;
            let mut read_ms = 0;
            let done = async {
                let update = load_update(&pool, &[], &currencies, views.style(), true).await?;
                read_ms = started.elapsed().as_millis() as u64;
                views.apply(&update).await
            }
            .await;
            let took = started.elapsed();
            match done {
                Ok(()) => debug!(
                    currencies = currencies.len(),
                    read_ms,
                    ms = took.as_millis() as u64,
                    "views over all banks recomputed"
                ),
                Err(e) => {
                    report::redis_error();
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
