//! Crossings offered to the API's live stream (`alert` events): each once
//! to a Redis stream the API instances follow, marked in the outbox in the
//! same transaction, so a message is offered at least once (and again only
//! if Redis took it but the mark did not commit). Live only: while Redis
//! is away they wait, bounded by the outbox; the webhook is what is kept.
//! A task of its own, beside the deliveries.

use crate::message::{stream_data, THRESHOLD_CROSSED};
use crate::schema::{stream_key, STREAM_LENGTH};
use ratewire_readmodel::redis::Connection;
use sqlx::PgPool;
use tracing::{info, warn};

/// Messages offered per round at most.
const PER_ROUND: i64 = 500;

/// How often new crossings are looked for when nothing rang.
const EVERY: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Clone)]
pub struct Offer {
    redis: Connection,
    key: String,
    failing: bool,
}

impl Offer {
    pub fn new(read_model: &ratewire_readmodel::ReadModelSettings) -> crate::Result<Self> {
        Ok(Self {
            redis: ratewire_readmodel::redis::connect(&read_model.redis_url)?,
            key: stream_key(&read_model.redis_prefix),
            failing: false,
        })
    }

    /// Offers new crossings when `made` rings (the deliverer made
    /// messages) and every [`EVERY`] besides, until `shutdown`.
    pub async fn run(
        mut self,
        pool: PgPool,
        made: std::sync::Arc<tokio::sync::Notify>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = made.notified() => self.offer(&pool).await,
                _ = tick.tick() => self.offer(&pool).await,
            }
        }
    }

    /// Offers what was not offered yet (errors are logged once and tried
    /// again next round).
    async fn offer(&mut self, pool: &PgPool) {
        match self.round(pool).await {
            Ok(()) if self.failing => {
                info!("crossings reach the live stream again");
                self.failing = false;
            }
            Ok(()) => {}
            Err(e) if !self.failing => {
                warn!(error = %e, "crossings cannot be offered to the live stream; trying again");
                self.failing = true;
            }
            Err(_) => {}
        }
    }

    async fn round(&mut self, pool: &PgPool) -> crate::Result<()> {
        loop {
            let mut tx = pool.begin().await?;
            let rows: Vec<(String, String, String)> = sqlx::query_as(
                "UPDATE deliveries d SET streamed = TRUE
                 WHERE d.id IN (SELECT id FROM deliveries
                                WHERE NOT streamed AND type = $1
                                ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
                 RETURNING d.owner, d.id, d.body",
            )
            .bind(THRESHOLD_CROSSED)
            .bind(PER_ROUND)
            .fetch_all(&mut *tx)
            .await?;
            if rows.is_empty() {
                return Ok(());
            }
            let mut pipe = redis::pipe();
            for (owner, id, body) in &rows {
                let data = stream_data(id, body);
                pipe.cmd("XADD")
                    .arg(&self.key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(STREAM_LENGTH)
                    .arg("*")
                    .arg("owner")
                    .arg(owner)
                    .arg("data")
                    .arg(data)
                    .ignore();
            }
            let mut redis = self.redis.clone();
            pipe.query_async::<()>(&mut redis).await?;
            tx.commit().await?;
            if (rows.len() as i64) < PER_ROUND {
                return Ok(());
            }
        }
    }
}
