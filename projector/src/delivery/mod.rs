//! The deliverer: sends the outbox's messages to their webhooks, outside
//! the fold (a slow endpoint never holds a batch), from every projector
//! instance at once.
//!
//! Instances share the outbox by leases: a claimed message is leased for a
//! minute (an attempt takes at most 10 s), so one whose instance died is
//! claimed again by another, with the same `webhook-id`: delivery is at
//! least once. Claims are fair between endpoints: each round takes up to
//! [`DeliverySettings::endpoint_concurrency`] messages per endpoint (one
//! while it is failing), so a dead endpoint's backlog holds one slot and
//! never the others' turn. Messages that fail are tried again on
//! [`schedule`]'s times; an endpoint failing for 24 hours is disabled and
//! its pending messages given up, which its owner sees in the API.

pub mod client;
pub mod schedule;
mod stream;

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;
use ratewire_readmodel::alerts::{
    signing, AlertSettings, SealingKey, DELIVERIES_CHANNEL, THRESHOLD_CROSSED,
};
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};
use uuid::Uuid;

use client::{Client, Outcome, Request};

#[derive(clap::Args, Debug, Clone)]
pub struct DeliverySettings {
    /// Webhook requests this instance has in flight at most; 0 leaves
    /// delivery to other instances.
    #[arg(long, env = "RATEWIRE_WEBHOOK_CONCURRENCY", default_value_t = 64, value_parser = clap::value_parser!(u32).range(0..=4_096))]
    pub concurrency: u32,
    /// Requests in flight to one endpoint at most (one while it is
    /// failing).
    #[arg(long, env = "RATEWIRE_WEBHOOK_ENDPOINT_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub endpoint_concurrency: u32,
}

/// How long a claimed message is this instance's.
const LEASE: &str = "60 seconds";
/// Failing this long disables an endpoint.
const DISABLE_AFTER: &str = "24 hours";
/// Delivered and given-up messages are kept this long (for the owner's
/// and the operators' questions), then purged.
const KEEP_FINISHED: &str = "7 days";

/// A message claimed for an attempt.
#[derive(Debug, sqlx::FromRow)]
struct Claimed {
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
    expand: String,
    delivered: String,
    failed: String,
    give_up: String,
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
    ) -> crate::error::Result<Option<Self>> {
        if settings.concurrency == 0 {
            info!("webhook delivery is left to other instances (RATEWIRE_WEBHOOK_CONCURRENCY=0)");
            return Ok(None);
        }
        let Some(key) = alerts.webhook_secrets_key.clone() else {
            warn!("RATEWIRE_WEBHOOK_SECRETS_KEY is not set: webhooks are not delivered");
            return Ok(None);
        };
        let pool = ratewire_readmodel::db::pool(database_url, &alerts.alerts_schema, 4)?;
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
                ratewire_readmodel::alerts::migrate(&pool, &schema)
            })
            .await;
        if migrated.is_none() {
            return;
        }
        let mut attempts: JoinSet<(Claimed, Outcome)> = JoinSet::new();
        let mut listener: Option<PgListener> = None;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut purge = tokio::time::interval(Duration::from_secs(600));
        let mut failing = false;
        // New crossings are offered to the live stream when the outbox
        // rings or the tick comes, not after every attempt.
        let mut offer_due = true;
        loop {
            if listener.is_none() {
                listener = self.listen().await;
            }
            if offer_due {
                if let Err(e) = self.expand().await {
                    debug!(error = %e, "expanding crossings failed; next round");
                }
                self.stream.offer(&self.pool).await;
                offer_due = false;
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
                            *self.in_flight.entry(message.webhook_id).or_default() += 1;
                            let client = self.client.clone();
                            let signed = self.sign(&message);
                            attempts.spawn(async move {
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
                                (message, outcome)
                            });
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
                    // With the others that finished meanwhile, recorded together.
                    let mut finished: Vec<_> = done.into_iter().collect();
                    while let Some(Ok(done)) = attempts.try_join_next() {
                        finished.push(done);
                    }
                    self.finished(finished).await;
                }
                notified = next_notice(&mut listener) => {
                    if notified.is_err() {
                        listener = None;
                    }
                    offer_due = true;
                }
                _ = tick.tick() => offer_due = true,
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
                    self.finished(vec![done]).await;
                }
            }
        }
        attempts.abort_all();
    }

    async fn listen(&self) -> Option<PgListener> {
        let mut listener = PgListener::connect(&self.database_url).await.ok()?;
        listener.listen(DELIVERIES_CHANNEL).await.ok()?;
        Some(listener)
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

    /// Turns the crossings the fold recorded into messages, one per alert
    /// still there (its id from alert and event), and counts them on their
    /// alerts; each crossing row goes with its messages' transaction.
    async fn expand(&self) -> sqlx::Result<()> {
        loop {
            let expanded = sqlx::query(&self.statements.expand)
                .execute(&self.pool)
                .await?
                .rows_affected();
            if expanded == 0 {
                return Ok(());
            }
            metrics::counter!("ratewire_webhook_messages_total").increment(expanded);
        }
    }

    /// Records attempts (retrying while Postgres is away: the lease would
    /// otherwise send them again): the delivered in one statement.
    async fn finished(&mut self, finished: Vec<(Claimed, Outcome)>) {
        for (message, _) in &finished {
            if let Some(n) = self.in_flight.get_mut(&message.webhook_id) {
                *n -= 1;
                if *n <= 0 {
                    self.in_flight.remove(&message.webhook_id);
                }
            }
        }
        let (delivered, failed): (Vec<_>, Vec<_>) = finished
            .into_iter()
            .partition(|(_, outcome)| matches!(outcome, Outcome::Delivered { .. }));
        if !delivered.is_empty() {
            let ids: Vec<&str> = delivered.iter().map(|(m, _)| m.id.as_str()).collect();
            let statuses: Vec<i32> = delivered
                .iter()
                .map(|(_, o)| match o {
                    Outcome::Delivered { status } => i32::from(*status),
                    Outcome::Failed { .. } => 0,
                })
                .collect();
            metrics::counter!("ratewire_webhook_deliveries_total", "outcome" => "delivered")
                .increment(ids.len() as u64);
            debug!(count = ids.len(), "delivered");
            self.persist("recording deliveries", || {
                sqlx::query(&self.statements.delivered)
                    .bind(&ids)
                    .bind(&statuses)
                    .execute(&self.pool)
            })
            .await;
        }
        for (message, outcome) in failed {
            if let Outcome::Failed { status, error } = outcome {
                self.failed(&message, status, &error).await;
            }
        }
    }

    /// Runs `write` until it succeeds, five times at most.
    async fn persist<F, Fut, T>(&self, what: &str, write: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = sqlx::Result<T>>,
    {
        for attempt in 0..5u32 {
            match write().await {
                Ok(_) => return,
                Err(e) => {
                    warn!(error = %e, attempt, "{what} failed; trying again");
                    tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                }
            }
        }
    }

    async fn failed(&self, message: &Claimed, status: Option<u16>, error: &str) {
        let retry = schedule::retry_after(message.attempts as u32);
        metrics::counter!("ratewire_webhook_deliveries_total", "outcome" => "failed").increment(1);
        info!(id = message.id, webhook = %message.webhook_id, attempt = message.attempts,
            retry_in = ?retry, error, "a webhook attempt failed");
        let record = || async {
            let disabled: Option<bool> = sqlx::query_scalar(&self.statements.failed)
                .bind(&message.id)
                .bind(status.map(i32::from))
                .bind(error)
                .bind(retry.map(|d| d.as_millis() as i64))
                .fetch_optional(&self.pool)
                .await?;
            if disabled == Some(true) {
                warn!(webhook = %message.webhook_id, error,
                    "a webhook failed for 24 hours and is disabled; its pending messages are given up");
                sqlx::query(&self.statements.give_up)
                    .bind(message.webhook_id)
                    .execute(&self.pool)
                    .await?;
            }
            Ok::<_, sqlx::Error>(())
        };
        self.persist("recording a failed attempt", record).await;
    }
}

async fn next_notice(listener: &mut Option<PgListener>) -> sqlx::Result<()> {
    match listener {
        Some(listener) => listener.recv().await.map(|_| ()),
        None => std::future::pending().await,
    }
}

const PENDING: &str = "d.delivered_at IS NULL AND d.failed_at IS NULL";

/// `at` (SQL) as every answer writes times.
fn millis(at: &str) -> String {
    format!(r#"to_char({at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"#)
}

impl Statements {
    fn new() -> Self {
        Self {
            // $1 messages at most, $2 per healthy endpoint, less those in
            // flight here ($3 endpoints, $4 counts).
            claim: format!(
                "WITH due AS (
                     SELECT DISTINCT d.webhook_id FROM deliveries d
                     WHERE {PENDING} AND d.next_attempt_at <= now()
                       AND (d.leased_until IS NULL OR d.leased_until < now())
                 ), picked AS (
                     SELECT m.id FROM due
                     JOIN webhooks w ON w.id = due.webhook_id AND w.disabled_at IS NULL
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
            // $1 ids, $2 statuses.
            delivered: "WITH done AS (
                    UPDATE deliveries d SET delivered_at = now(), leased_until = NULL,
                                            last_status = s.status, last_error = NULL
                    FROM UNNEST($1::text[], $2::int[]) AS s (id, status)
                    WHERE d.id = s.id RETURNING d.webhook_id)
                UPDATE webhooks SET failing_since = NULL, last_success_at = now()
                WHERE id IN (SELECT DISTINCT webhook_id FROM done)"
                .into(),
            // A few crossings at a time (each may name thousands of alerts).
            expand: format!(
                r#"WITH taken AS (
                       DELETE FROM crossings c
                       WHERE (c.event_id, c.currency, c.field, c.watch_bank) IN (
                           SELECT event_id, currency, field, watch_bank FROM crossings
                           ORDER BY occurred_at LIMIT 16 FOR UPDATE SKIP LOCKED)
                       RETURNING c.*
                   ), expanded AS (
                       SELECT t.*, a.id AS alert_id, a.owner, a.webhook_id, a.condition, a.threshold
                       FROM taken t
                       CROSS JOIN LATERAL unnest(t.alert_ids) AS x (id)
                       JOIN alerts a ON a.id = x.id
                       JOIN webhooks w ON w.id = a.webhook_id AND w.disabled_at IS NULL
                   ), counted AS (
                       UPDATE alerts a SET fired = a.fired + e.n, last_fired_at = e.last
                       FROM (SELECT alert_id, count(*) AS n, max(occurred_at) AS last
                             FROM expanded GROUP BY alert_id) e
                       WHERE a.id = e.alert_id
                   )
                   INSERT INTO deliveries (id, webhook_id, alert_id, owner, type, body)
                   SELECT 'msg_' || left(encode(sha256(convert_to(e.alert_id::text || ':' || e.event_id::text, 'UTF8')), 'hex'), 32),
                          e.webhook_id, e.alert_id, e.owner, '{THRESHOLD_CROSSED}',
                          json_build_object(
                              'type', '{THRESHOLD_CROSSED}',
                              'timestamp', {occurred},
                              'data', json_build_object(
                                  'alertId', e.alert_id,
                                  'bank', json_build_object('id', e.holder, 'name', b.name, 'code', b.code),
                                  'currencyCode', e.currency,
                                  'field', e.field,
                                  'condition', e.condition,
                                  'threshold', e.threshold,
                                  'previous', e.previous,
                                  'current', e.current,
                                  'updatedAt', {updated},
                                  'eventId', e.event_id))::text
                   FROM expanded e JOIN quote_banks b ON b.bank_id = e.holder
                   ON CONFLICT (id) DO NOTHING"#,
                occurred = millis("e.occurred_at"),
                updated = millis("e.updated_at"),
            ),
            // $4: milliseconds to the next attempt, NULL after the last.
            failed: format!(
                "WITH attempt AS (
                     UPDATE deliveries SET leased_until = NULL, last_status = $2, last_error = $3,
                         next_attempt_at = CASE WHEN $4::bigint IS NULL THEN next_attempt_at
                                                ELSE now() + $4::bigint * interval '1 millisecond' END,
                         failed_at = CASE WHEN $4::bigint IS NULL THEN now() END
                     WHERE id = $1 RETURNING webhook_id)
                 UPDATE webhooks w SET failing_since = COALESCE(w.failing_since, now()),
                     last_error = $3, last_error_at = now(),
                     disabled_at = CASE WHEN w.failing_since < now() - interval '{DISABLE_AFTER}'
                                        THEN COALESCE(w.disabled_at, now()) ELSE w.disabled_at END
                 FROM attempt WHERE w.id = attempt.webhook_id
                 RETURNING w.disabled_at IS NOT NULL"
            ),
            give_up: format!(
                "UPDATE deliveries d SET failed_at = now(), leased_until = NULL,
                     last_error = COALESCE(d.last_error, 'the webhook was disabled')
                 WHERE d.webhook_id = $1 AND {PENDING}"
            ),
            purge: format!(
                "DELETE FROM deliveries WHERE (delivered_at IS NOT NULL OR failed_at IS NOT NULL)
                   AND created_at < now() - interval '{KEEP_FINISHED}'"
            ),
        }
    }
}
