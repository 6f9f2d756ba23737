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
//! endpoints: an instance holds up to a few rounds of
//! [`DeliverySettings::endpoint_concurrency`] messages per endpoint (one
//! while it is failing), and starts them in turn as its calls end
//! (`ready`), so a dead endpoint's backlog holds one slot and never the
//! others' turn. Messages that fail are tried
//! again on [`schedule`]'s times; an endpoint failing for 24 hours is
//! disabled and its pending messages given up (`record`), which its
//! owner sees in the API, with every attempt's time, duration and outcome.
//! Crossings also go to the live stream (`stream`).

pub mod client;
mod expand;
mod ready;
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
use ratewire_service::traces::{self, TraceContext};
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn, Instrument};
use uuid::Uuid;

use client::{Client, Outcome, Request};
use ready::{Ready, HELD_PER_SLOT};

/// How long a claimed message is this instance's.
const LEASE: &str = "60 seconds";
/// Opened signing secrets kept at most (then forgotten at once).
const OPENED_KEPT: usize = 1_024;
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
    /// The trace context of the fold that made it (its crossing's).
    traceparent: Option<String>,
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
    /// The messages claimed here, waiting or in flight.
    ready: Ready,
    /// Signing secrets opened, by webhook and sealed bytes.
    opened: HashMap<(Uuid, Vec<u8>), signing::Secret>,
    statements: Arc<Statements>,
    /// Offers crossings to the API's live stream.
    stream: stream::Offer,
}

struct Statements {
    claim: String,
    release: String,
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
            ready: Ready::default(),
            opened: HashMap::new(),
            statements: Arc::new(Statements::new()),
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
        let offer = tokio::spawn(self.stream.clone().run(self.pool.clone(), shutdown.clone()));
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
        // The outbox is read beside the calls, one claim at a time, while
        // it may hold more than is held here.
        let mut claiming: Option<JoinHandle<sqlx::Result<Vec<Claimed>>>> = None;
        // Messages are made beside the calls too, a round at a time, so
        // the first of a large crossing's are sent while the rest are made.
        let mut expanding: Option<JoinHandle<sqlx::Result<Option<u64>>>> = None;
        let mut claim_due = true;
        loop {
            if listener.is_none() {
                listener = self.listen().await;
            }
            if expand_due && expanding.is_none() {
                expanding = Some(tokio::spawn(expand_round(
                    self.pool.clone(),
                    self.stream.clone(),
                )));
                expand_due = false;
            }
            if claim_due && claiming.is_none() {
                claiming = self.claim();
                claim_due = false;
            }
            self.start_ready(&mut attempts).await;
            tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(done) = attempts.join_next(), if !attempts.is_empty() => {
                    let mut done: Vec<_> = done.into_iter().collect();
                    while let Some(Ok(more)) = attempts.try_join_next() {
                        done.push(more);
                    }
                    for attempt in done {
                        self.ready.done(attempt.message.webhook_id);
                        let _ = finished.send(attempt).await;
                    }
                    claim_due = true;
                }
                claimed = async { claiming.as_mut().expect("a claim runs").await },
                    if claiming.is_some() => {
                    claiming = None;
                    match claimed {
                        Ok(Ok(claimed)) => {
                            if failing {
                                info!("the outbox can be read again");
                                failing = false;
                            }
                            // Whatever came may not be all there is (and
                            // calls that ended meanwhile asked for more).
                            debug!(claimed = claimed.len(), "claimed");
                            claim_due |= !claimed.is_empty();
                            for message in claimed {
                                self.ready.add(message);
                            }
                        }
                        Ok(Err(e)) => {
                            if !failing {
                                warn!(error = %e, "the outbox cannot be read; trying again");
                                failing = true;
                            }
                        }
                        Err(e) => warn!(error = %e, "a claim of the outbox ended abnormally"),
                    }
                }
                expanded = async { expanding.as_mut().expect("a round runs").await },
                    if expanding.is_some() => {
                    expanding = None;
                    match expanded {
                        // Something was taken: there may be more.
                        Ok(Ok(Some(made))) => {
                            debug!(made, "expanded");
                            expand_due = true;
                            if made > 0 {
                                claim_due = true;
                            }
                        }
                        Ok(Ok(None)) => {}
                        Ok(Err(e)) => debug!(error = %e, "expanding crossings failed; next round"),
                        Err(e) => warn!(error = %e, "expanding crossings ended abnormally"),
                    }
                }
                notified = next_notice(&mut listener) => {
                    if notified.is_err() {
                        listener = None;
                    }
                    expand_due = true;
                }
                _ = tick.tick() => claim_due = true,
                _ = sweep.tick() => expand_due = true,
                _ = purge.tick() => {
                    if let Err(e) = sqlx::query(&self.statements.purge).execute(&self.pool).await {
                        debug!(error = %e, "purging finished messages failed; later");
                    }
                }
            }
        }
        if let Some(round) = expanding.take() {
            let _ = round.await;
        }
        if let Some(claim) = claiming.take() {
            if let Ok(Ok(claimed)) = claim.await {
                for message in claimed {
                    self.ready.add(message);
                }
            }
        }
        let waiting = self.ready.drain();
        self.give_back(&waiting).await;
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

    /// Starts calls from the messages held, while slots are free; gives
    /// back those held too long.
    async fn start_ready(&mut self, attempts: &mut JoinSet<Attempted>) {
        let per_endpoint = self.settings.endpoint_concurrency as usize;
        let total = self.settings.concurrency as usize;
        let mut expired = Vec::new();
        while let Some(message) = self.ready.next(per_endpoint, total, &mut expired) {
            self.dispatch(attempts, message);
        }
        if !expired.is_empty() {
            self.give_back(&expired).await;
        }
    }

    /// Ends this instance's leases of messages it will not send, so that
    /// any instance claims them at once (their attempt was not made).
    async fn give_back(&self, messages: &[Claimed]) {
        if messages.is_empty() {
            return;
        }
        let ids: Vec<&str> = messages.iter().map(|m| m.id.as_str()).collect();
        if let Err(e) = sqlx::query(&self.statements.release)
            .bind(&ids)
            .execute(&self.pool)
            .await
        {
            debug!(error = %e, "giving back leases failed; they end by themselves");
        }
    }

    /// Starts an attempt at `message`.
    fn dispatch(&mut self, attempts: &mut JoinSet<Attempted>, message: Claimed) {
        let client = self.client.clone();
        let secrets = self.secrets(&message);
        let (span, traceparent) = call_span(&message);
        let attempt = async move {
            let started_at = Utc::now().trunc_subsecs(3);
            let clock = std::time::Instant::now();
            let outcome = match secrets.map(|secrets| sign(&secrets, &message)) {
                Ok((timestamp, signature)) => {
                    client
                        .send(Request {
                            url: &message.url,
                            id: &message.id,
                            timestamp,
                            signature: &signature,
                            body: &message.body,
                            traceparent: traceparent.as_deref(),
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
        };
        attempts.spawn(attempt.instrument(span));
    }

    async fn listen(&self) -> Option<PgListener> {
        let mut listener = PgListener::connect(&self.database_url).await.ok()?;
        listener.listen(DELIVERIES_CHANNEL).await.ok()?;
        Some(listener)
    }

    /// Claims due messages in the background, fairly between endpoints:
    /// as many as may be held here, less those held (`None`: no room).
    fn claim(&self) -> Option<JoinHandle<sqlx::Result<Vec<Claimed>>>> {
        let per_endpoint = self.settings.endpoint_concurrency as usize * HELD_PER_SLOT;
        let room = (self.settings.concurrency as usize * HELD_PER_SLOT)
            .checked_sub(self.ready.held_total())
            .filter(|room| *room > 0)?;
        let (busy, counts) = self.ready.held();
        let (pool, statements) = (self.pool.clone(), Arc::clone(&self.statements));
        Some(tokio::spawn(async move {
            sqlx::query_as(&statements.claim)
                .bind(room as i64)
                .bind(per_endpoint as i32)
                .bind(&busy)
                .bind(&counts)
                .fetch_all(&pool)
                .await
        }))
    }

    /// The secrets an attempt signs with: its webhook's, and the one
    /// before a rotation while it still signs. Opened once per sealed
    /// secret, not per message.
    fn secrets(&mut self, message: &Claimed) -> Result<Vec<signing::Secret>, String> {
        let sealed = std::iter::once(&message.secret).chain(&message.previous_secret);
        let mut secrets = Vec::with_capacity(2);
        for sealed in sealed {
            let key = (message.webhook_id, sealed.clone());
            if let Some(secret) = self.opened.get(&key) {
                secrets.push(secret.clone());
                continue;
            }
            let secret = self.key.open(message.webhook_id, sealed).ok_or_else(|| {
                "the signing secret does not open with this RATEWIRE_WEBHOOK_SECRETS_KEY".to_owned()
            })?;
            if self.opened.len() >= OPENED_KEPT {
                self.opened.clear();
            }
            self.opened.insert(key, secret.clone());
            secrets.push(secret);
        }
        Ok(secrets)
    }
}

/// The attempt's timestamp and signature header (with every secret given).
fn sign(secrets: &[signing::Secret], message: &Claimed) -> (i64, String) {
    let timestamp = Utc::now().timestamp();
    let secrets: Vec<&signing::Secret> = secrets.iter().collect();
    let header =
        signing::signature_header(&secrets, &message.id, timestamp, message.body.as_bytes());
    (timestamp, header)
}

/// The span of a call to a webhook and the `traceparent` it sends. With
/// traces on, the call is a span in the trace of the fold that made the
/// message, and the receiver continues from it; off, the fold's context
/// is sent as it was stored (NULL when it came without one).
fn call_span(message: &Claimed) -> (tracing::Span, Option<String>) {
    if !traces::enabled() {
        return (tracing::Span::none(), message.traceparent.clone());
    }
    let span = tracing::info_span!(parent: None, "webhook call", webhook = %message.webhook_id,
        message = %message.id, attempt = message.attempts);
    if let Some(traceparent) = &message.traceparent {
        TraceContext {
            traceparent: traceparent.clone(),
            tracestate: None,
        }
        .continue_in(&span);
    }
    let own = TraceContext::of(&span).map(|t| t.traceparent);
    (span, own)
}

/// One round of turning the crossings, or else the watchdog events,
/// recorded into messages (see [`expand`]): how many were made, `None`
/// when there was nothing to take.
async fn expand_round(pool: PgPool, stream: stream::Offer) -> sqlx::Result<Option<u64>> {
    let made = match expand::round(&pool, &stream).await? {
        Some(made) => Some(made),
        None => expand::quality_round(&pool).await?,
    };
    if let Some(made) = made {
        metrics::counter!("ratewire_webhook_messages_total").increment(made);
    }
    Ok(made)
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
            // $1 messages at most, $2 per healthy endpoint, less those
            // held here ($3 endpoints, $4 counts). The endpoints with
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
                 RETURNING d.id, d.webhook_id, d.body, d.attempts, d.traceparent, w.url, w.secret,
                           CASE WHEN w.previous_until > now() THEN w.previous_secret END AS previous_secret"
            ),
            // Messages claimed ($1) and not attempted: still leased, so
            // no other instance holds them.
            release: format!(
                "UPDATE deliveries d SET leased_until = NULL, attempts = d.attempts - 1
                 WHERE d.id = ANY ($1) AND {PENDING} AND d.leased_until > now()"
            ),
            purge: format!(
                "DELETE FROM deliveries WHERE (delivered_at IS NOT NULL OR failed_at IS NOT NULL)
                   AND created_at < now() - interval '{KEEP_FINISHED}'"
            ),
        }
    }
}
