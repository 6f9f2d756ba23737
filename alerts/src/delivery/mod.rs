//! The deliverer: sends the outbox's messages to their webhooks, outside
//! the fold (a slow endpoint never holds a batch), from every projector
//! instance at once.
//!
//! The fold records each board's crossings as one row per watch; the
//! deliverer turns them into messages, one per alert (its id from alert
//! and event), outside the fold. Instances share the outbox by leases: a
//! claimed message is leased for a minute (an attempt takes at most
//! 10 s), so one whose instance died is claimed again by another, with the
//! same `webhook-id`: delivery is at least once. Claims are fair between
//! endpoints: each round takes up to
//! [`DeliverySettings::endpoint_concurrency`] messages per endpoint, less
//! those in flight (one while it is failing), so a dead endpoint's backlog
//! holds one slot and never the others' turn. Messages that fail are tried
//! again on [`schedule`]'s times; an endpoint failing for 24 hours is
//! disabled and its pending messages given up (`record`), which its
//! owner sees in the API, with every attempt's time, duration and outcome.
//! Crossings also go to the live stream (`stream`).

pub mod client;
mod expand;
mod record;
pub mod schedule;
mod stream;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::schema::DELIVERIES_CHANNEL;
use crate::settings::{AlertSettings, DeliverySettings};
use crate::signing;
use crate::SealingKey;
use chrono::{DateTime, SubsecRound, Utc};
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};
use uuid::Uuid;

use client::{Client, Outcome, Request};

/// How long a claimed message is this instance's.
const LEASE: &str = "60 seconds";
/// Delivered and given-up messages are kept this long (for the owner's
/// and the operators' questions), then purged.
const KEEP_FINISHED: &str = "7 days";

/// An attempt made: the message, when it started (to the millisecond, as
/// its owner is shown it), how long it took and what it came to.
pub(crate) struct Attempted {
    message: Claimed,
    started_at: DateTime<Utc>,
    took: Duration,
    outcome: Outcome,
}

/// A message claimed for an attempt.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Claimed {
    id: String,
    webhook_id: Uuid,
    body: String,
    attempts: i32,
    url: String,
    secret: Vec<u8>,
    /// The secret before a rotation, while it still signs.
    previous_secret: Option<Vec<u8>>,
}

pub struct Deliverer {
    pool: PgPool,
    schema: String,
    database_url: String,
    client: Client,
    key: SealingKey,
    settings: DeliverySettings,
    /// Attempts in flight here, per endpoint.
    in_flight: HashMap<Uuid, i32>,
    statements: Statements,
    /// Offers crossings to the API's live stream.
    stream: stream::Offer,
}

struct Statements {
    claim: String,
    purge: String,
}

impl Deliverer {
    /// `None` when delivery is off here (no concurrency, or no key to open
    /// secrets with: said once in the log).
    pub fn new(
        database_url: &str,
        alerts: &AlertSettings,
        settings: &DeliverySettings,
        read_model: &ratewire_readmodel::ReadModelSettings,
    ) -> crate::Result<Option<Self>> {
        if settings.concurrency == 0 {
            info!("webhook delivery is left to other instances (RATEWIRE_WEBHOOK_CONCURRENCY=0)");
            return Ok(None);
        }
        let Some(key) = alerts.webhook_secrets_key.clone() else {
            warn!("RATEWIRE_WEBHOOK_SECRETS_KEY is not set: webhooks are not delivered");
            return Ok(None);
        };
        let pool = crate::schema::pool(database_url, &alerts.alerts_schema, 6)?;
        Ok(Some(Self {
            pool,
            schema: alerts.alerts_schema.clone(),
            database_url: database_url.to_owned(),
            client: Client::new(alerts.address_policy()),
            key,
            settings: settings.clone(),
            in_flight: HashMap::new(),
            statements: Statements::new(),
            stream: stream::Offer::new(read_model)?,
        }))
    }

    /// Delivers until `shutdown`; attempts in flight then are given a few
    /// seconds, and any cut short is claimed again after its lease.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let (pool, schema) = (self.pool.clone(), self.schema.clone());
        let migrated =
            ratewire_service::retry::retry("preparing the alerts schema", &shutdown, || {
                crate::schema::migrate(&pool, &schema)
            })
            .await;
        if migrated.is_none() {
            return;
        }
        let (finished, attempts_done) = mpsc::channel(self.settings.concurrency as usize * 2);
        let recorder = tokio::spawn(record::Recorder::new(self.pool.clone(), attempts_done).run());
        let new_messages = Arc::new(Notify::new());
        let offer = tokio::spawn(self.stream.clone().run(
            self.pool.clone(),
            Arc::clone(&new_messages),
            shutdown.clone(),
        ));
        let mut attempts: JoinSet<Attempted> = JoinSet::new();
        let mut listener: Option<PgListener> = None;
        // Due retries and ended leases are looked for every second; new
        // crossings and messages ring (a Postgres notice), and are looked
        // for every few seconds besides, in case a notice was missed.
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sweep = tokio::time::interval(Duration::from_secs(5));
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut purge = tokio::time::interval(Duration::from_secs(600));
        let mut failing = false;
        // Crossings are looked for when the outbox rings or the sweep comes,
        // not after every attempt.
        let mut expand_due = true;
        loop {
            if listener.is_none() {
                listener = self.listen().await;
            }
            if expand_due {
                match self.expand().await {
                    Ok(0) => {}
                    Ok(_) => new_messages.notify_one(),
                    Err(e) => debug!(error = %e, "expanding crossings failed; next round"),
                }
                expand_due = false;
            }
            let room = self.settings.concurrency as usize - attempts.len();
            if room > 0 {
                match self.claim(room).await {
                    Ok(claimed) => {
                        if failing {
                            info!("the outbox can be read again");
                            failing = false;
                        }
                        for message in claimed {
                            self.dispatch(&mut attempts, message);
                        }
                    }
                    Err(e) => {
                        if !failing {
                            warn!(error = %e, "the outbox cannot be read; trying again");
                            failing = true;
                        }
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(done) = attempts.join_next(), if !attempts.is_empty() => {
                    let mut done: Vec<_> = done.into_iter().collect();
                    while let Some(Ok(more)) = attempts.try_join_next() {
                        done.push(more);
                    }
                    for attempt in done {
                        self.leave(attempt.message.webhook_id);
                        let _ = finished.send(attempt).await;
                    }
                }
                notified = next_notice(&mut listener) => {
                    if notified.is_err() {
                        listener = None;
                    }
                    expand_due = true;
                }
                _ = tick.tick() => {}
                _ = sweep.tick() => expand_due = true,
                _ = purge.tick() => {
                    if let Err(e) = sqlx::query(&self.statements.purge).execute(&self.pool).await {
                        debug!(error = %e, "purging finished messages failed; later");
                    }
                }
            }
        }
        let grace = tokio::time::sleep(Duration::from_secs(5));
        tokio::pin!(grace);
        while !attempts.is_empty() {
            tokio::select! {
                _ = &mut grace => break,
                Some(Ok(done)) = attempts.join_next() => {
                    let _ = finished.send(done).await;
                }
            }
        }
        attempts.abort_all();
        drop(finished);
        let _ = recorder.await;
        let _ = offer.await;
    }

    /// Starts an attempt at `message`.
    fn dispatch(&mut self, attempts: &mut JoinSet<Attempted>, message: Claimed) {
        *self.in_flight.entry(message.webhook_id).or_default() += 1;
        let client = self.client.clone();
        let signed = self.sign(&message);
        attempts.spawn(async move {
            let started_at = Utc::now().trunc_subsecs(3);
            let clock = std::time::Instant::now();
            let outcome = match signed {
                Ok((timestamp, signature)) => {
                    client
                        .send(Request {
                            url: &message.url,
                            id: &message.id,
                            timestamp,
                            signature: &signature,
                            body: &message.body,
                        })
                        .await
                }
                Err(error) => Outcome::Failed {
                    status: None,
                    error,
                },
            };
            Attempted {
                message,
                started_at,
                took: clock.elapsed(),
                outcome,
            }
        });
    }

    /// An attempt to `webhook` is over.
    fn leave(&mut self, webhook: Uuid) {
        if let Some(n) = self.in_flight.get_mut(&webhook) {
            *n -= 1;
            if *n <= 0 {
                self.in_flight.remove(&webhook);
            }
        }
    }

    async fn listen(&self) -> Option<PgListener> {
        let mut listener = PgListener::connect(&self.database_url).await.ok()?;
        listener.listen(DELIVERIES_CHANNEL).await.ok()?;
        Some(listener)
    }

    /// Turns the crossings and watchdog events recorded into messages
    /// (see [`expand`]); how many were made.
    async fn expand(&self) -> sqlx::Result<u64> {
        let mut made = 0;
        while let Some(expanded) = expand::round(&self.pool).await? {
            made += expanded;
            metrics::counter!("ratewire_webhook_messages_total").increment(expanded);
        }
        while let Some(expanded) = expand::quality_round(&self.pool).await? {
            made += expanded;
            metrics::counter!("ratewire_webhook_messages_total").increment(expanded);
        }
        Ok(made)
    }

    /// Up to `room` due messages, fairly between endpoints.
    async fn claim(&self, room: usize) -> sqlx::Result<Vec<Claimed>> {
        let (busy, counts): (Vec<Uuid>, Vec<i32>) =
            self.in_flight.iter().map(|(id, n)| (*id, *n)).unzip();
        sqlx::query_as(&self.statements.claim)
            .bind(room as i64)
            .bind(self.settings.endpoint_concurrency as i32)
            .bind(&busy)
            .bind(&counts)
            .fetch_all(&self.pool)
            .await
    }

    /// The attempt's timestamp and signature header (with the previous
    /// secret too while it still signs).
    fn sign(&self, message: &Claimed) -> Result<(i64, String), String> {
        let open = |sealed: &[u8]| {
            self.key.open(message.webhook_id, sealed).ok_or_else(|| {
                "the signing secret does not open with this RATEWIRE_WEBHOOK_SECRETS_KEY".to_owned()
            })
        };
        let current = open(&message.secret)?;
        let previous = message.previous_secret.as_deref().map(open).transpose()?;
        let timestamp = Utc::now().timestamp();
        let secrets: Vec<&signing::Secret> = std::iter::once(&current).chain(&previous).collect();
        let header =
            signing::signature_header(&secrets, &message.id, timestamp, message.body.as_bytes());
        Ok((timestamp, header))
    }
}

async fn next_notice(listener: &mut Option<PgListener>) -> sqlx::Result<()> {
    match listener {
        Some(listener) => listener.recv().await.map(|_| ()),
        None => std::future::pending().await,
    }
}

const PENDING: &str = "d.delivered_at IS NULL AND d.failed_at IS NULL";

impl Statements {
    fn new() -> Self {
        Self {
            // $1 messages at most, $2 per healthy endpoint, less those in
            // flight here ($3 endpoints, $4 counts). The endpoints with
            // pending messages are found by skipping through the index
            // (one probe per endpoint, not one row per message).
            claim: format!(
                "WITH RECURSIVE hooks (webhook_id) AS (
                     (SELECT d.webhook_id FROM deliveries d WHERE {PENDING}
                      ORDER BY d.webhook_id LIMIT 1)
                     UNION ALL
                     SELECT (SELECT d.webhook_id FROM deliveries d
                             WHERE {PENDING} AND d.webhook_id > h.webhook_id
                             ORDER BY d.webhook_id LIMIT 1)
                     FROM hooks h WHERE h.webhook_id IS NOT NULL
                 ), picked AS (
                     SELECT m.id FROM hooks
                     JOIN webhooks w ON w.id = hooks.webhook_id AND w.disabled_at IS NULL
                     LEFT JOIN UNNEST($3::uuid[], $4::int[]) AS busy (id, n) ON busy.id = w.id
                     CROSS JOIN LATERAL (
                         SELECT d.id FROM deliveries d
                         WHERE d.webhook_id = w.id AND {PENDING} AND d.next_attempt_at <= now()
                           AND (d.leased_until IS NULL OR d.leased_until < now())
                         ORDER BY d.next_attempt_at, d.created_at
                         LIMIT GREATEST(CASE WHEN w.failing_since IS NULL THEN $2 ELSE 1 END
                                        - COALESCE(busy.n, 0), 0)
                         FOR UPDATE OF d SKIP LOCKED) m
                     LIMIT $1
                 )
                 UPDATE deliveries d SET leased_until = now() + interval '{LEASE}',
                                         attempts = d.attempts + 1
                 FROM picked, webhooks w
                 WHERE d.id = picked.id AND w.id = d.webhook_id
                 RETURNING d.id, d.webhook_id, d.body, d.attempts, w.url, w.secret,
                           CASE WHEN w.previous_until > now() THEN w.previous_secret END AS previous_secret"
            ),
            purge: format!(
                "DELETE FROM deliveries WHERE (delivered_at IS NOT NULL OR failed_at IS NOT NULL)
                   AND created_at < now() - interval '{KEEP_FINISHED}'"
            ),
        }
    }
}
