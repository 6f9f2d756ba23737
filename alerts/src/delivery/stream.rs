//! Crossings offered to the API's live stream (`alert` events): each once
//! to a Redis stream the API instances follow, marked in the outbox in the
//! same transaction, so a message is offered at least once (and again only
//! if Redis took it but the mark did not commit). The deliverer offers a
//! crossing's messages as soon as it has stored them (`offer_made`); this
//! task offers those it could not. Live only: while Redis
//! is away they wait, bounded by the outbox; the webhook is what is kept.
//! A task of its own, beside the deliveries.

use crate::message::{stream_data, THRESHOLD_CROSSED};
use crate::schema::{stream_key, STREAM_LENGTH};
use ratewire_readmodel::redis::Connection;
use sqlx::PgPool;
use std::time::Duration;
use tracing::{debug, info, warn};

/// Messages offered per round at most.
const PER_ROUND: i64 = 500;

/// How often crossings not offered yet are looked for...
const EVERY: Duration = Duration::from_secs(5);
/// ...and how old they must be then.
const SWEEP_AFTER: Duration = Duration::from_secs(2);

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

    /// Offers every [`EVERY`] the crossings the deliverer could not offer
    /// (Redis was away), until `shutdown`.
    pub async fn run(mut self, pool: PgPool, shutdown: tokio_util::sync::CancellationToken) {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                // The newest are left alone: the deliverer is offering
                // them, and a mark would lock them while it claims them.
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

    /// Adds messages (owner, id, body) to the stream.
    async fn add(&self, messages: &[(&str, &str, &str)]) -> crate::Result<()> {
        let mut pipe = redis::pipe();
        for (owner, id, body) in messages {
            pipe.cmd("XADD")
                .arg(&self.key)
                .arg("MAXLEN")
                .arg("~")
                .arg(STREAM_LENGTH)
                .arg("*")
                .arg("owner")
                .arg(owner)
                .arg("data")
                .arg(stream_data(id, body))
                .ignore();
        }
        let mut redis = self.redis.clone();
        pipe.query_async::<()>(&mut redis).await?;
        Ok(())
    }

    /// Offers messages just made (owner, id, body) and marks them; those
    /// Redis or Postgres did not take are left to [`Offer::run`].
    pub(super) async fn offer_made(&self, pool: &PgPool, messages: &[(&str, &str, &str)]) {
        if messages.is_empty() {
            return;
        }
        if let Err(e) = self.add(messages).await {
            debug!(error = %e, "crossings not offered to the live stream yet");
            return;
        }
        let ids: Vec<&str> = messages.iter().map(|(_, id, _)| *id).collect();
        if let Err(e) = sqlx::query("UPDATE deliveries SET streamed = TRUE WHERE id = ANY ($1)")
            .bind(&ids)
            .execute(pool)
            .await
        {
            debug!(error = %e, "crossings offered to the live stream not marked; again later");
        }
    }

    /// Offers the messages made more than [`SWEEP_AFTER`] ago.
    async fn round(&mut self, pool: &PgPool) -> crate::Result<()> {
        loop {
            let mut tx = pool.begin().await?;
            let rows: Vec<(String, String, String)> = sqlx::query_as(
                "UPDATE deliveries d SET streamed = TRUE
                 WHERE d.id IN (SELECT id FROM deliveries
                                WHERE NOT streamed AND type = $1
                                  AND created_at <= now() - $3::interval
                                ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
                 RETURNING d.owner, d.id, d.body",
            )
            .bind(THRESHOLD_CROSSED)
            .bind(PER_ROUND)
            .bind(SWEEP_AFTER)
            .fetch_all(&mut *tx)
            .await?;
            if rows.is_empty() {
                return Ok(());
            }
            let rows: Vec<(&str, &str, &str)> = rows
                .iter()
                .map(|(owner, id, body)| (owner.as_str(), id.as_str(), body.as_str()))
                .collect();
            self.add(&rows).await?;
            tx.commit().await?;
            if (rows.len() as i64) < PER_ROUND {
                return Ok(());
            }
        }
    }
}
