//! Recording attempts, beside the dispatch: a task takes finished
//! attempts from a channel and writes them in batches (the delivered in
//! one statement), so a burst of calls is not paced by a write per call.
//! Until an attempt is recorded its message stays leased, so it is not
//! sent again meanwhile. Each attempt is also kept on its own (`attempts`,
//! with its time and duration) for its owner's questions, written in the
//! same statement as its message's state.

use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::client::Outcome;
use super::{schedule, Attempted};

/// Attempts recorded in one round at most.
const PER_ROUND: usize = 1_000;
/// Failing this long disables an endpoint.
const DISABLE_AFTER: &str = "24 hours";

pub struct Recorder {
    pool: PgPool,
    attempts: mpsc::Receiver<Attempted>,
}

impl Recorder {
    pub fn new(pool: PgPool, attempts: mpsc::Receiver<Attempted>) -> Self {
        Self { pool, attempts }
    }

    /// Records until the sending side is gone and everything sent is
    /// recorded.
    pub async fn run(mut self) {
        let mut batch = Vec::new();
        while let Some(first) = self.attempts.recv().await {
            batch.push(first);
            while batch.len() < PER_ROUND {
                match self.attempts.try_recv() {
                    Ok(more) => batch.push(more),
                    Err(_) => break,
                }
            }
            self.record(std::mem::take(&mut batch)).await;
        }
    }

    async fn record(&self, finished: Vec<Attempted>) {
        let (delivered, failed): (Vec<_>, Vec<_>) = finished
            .into_iter()
            .partition(|a| matches!(a.outcome, Outcome::Delivered { .. }));
        if !delivered.is_empty() {
            let ids: Vec<&str> = delivered.iter().map(|a| a.message.id.as_str()).collect();
            let statuses: Vec<i32> = delivered
                .iter()
                .map(|a| match a.outcome {
                    Outcome::Delivered { status } => i32::from(status),
                    Outcome::Failed { .. } => 0,
                })
                .collect();
            let numbers: Vec<i32> = delivered.iter().map(|a| a.message.attempts).collect();
            let started: Vec<_> = delivered.iter().map(|a| a.started_at).collect();
            let durations: Vec<i32> = delivered.iter().map(millis).collect();
            metrics::counter!("ratewire_webhook_deliveries_total", "outcome" => "delivered")
                .increment(ids.len() as u64);
            debug!(count = ids.len(), "delivered");
            persist("recording deliveries", || {
                sqlx::query(DELIVERED)
                    .bind(&ids)
                    .bind(&statuses)
                    .bind(&numbers)
                    .bind(&started)
                    .bind(&durations)
                    .execute(&self.pool)
            })
            .await;
        }
        for attempt in failed {
            if let Outcome::Failed { status, error } = &attempt.outcome {
                self.failed(&attempt, *status, error).await;
            }
        }
    }

    async fn failed(&self, attempt: &Attempted, status: Option<u16>, error: &str) {
        let message = &attempt.message;
        let retry = schedule::retry_after(message.attempts as u32);
        metrics::counter!("ratewire_webhook_deliveries_total", "outcome" => "failed").increment(1);
        info!(id = message.id, webhook = %message.webhook_id, attempt = message.attempts,
            retry_in = ?retry, error, "a webhook attempt failed");
        let record = || async {
            let disabled: Option<bool> = sqlx::query_scalar(&FAILED)
                .bind(&message.id)
                .bind(status.map(i32::from))
                .bind(error)
                .bind(retry.map(|d| d.as_millis() as i64))
                .bind(message.attempts)
                .bind(attempt.started_at)
                .bind(millis(attempt))
                .fetch_optional(&self.pool)
                .await?;
            if disabled == Some(true) {
                warn!(webhook = %message.webhook_id, error,
                    "a webhook failed for 24 hours and is disabled; its pending messages are given up");
                sqlx::query(GIVE_UP)
                    .bind(message.webhook_id)
                    .execute(&self.pool)
                    .await?;
            }
            Ok::<_, sqlx::Error>(())
        };
        persist("recording a failed attempt", record).await;
    }
}

/// Runs `write` until it succeeds, five times at most (a message whose
/// attempt is never recorded is sent again when its lease ends).
async fn persist<F, Fut, T>(what: &str, write: F)
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

/// How long an attempt took, in whole milliseconds.
fn millis(attempt: &Attempted) -> i32 {
    i32::try_from(attempt.took.as_millis()).unwrap_or(i32::MAX)
}

/// $1 ids, $2 statuses, and each attempt's $3 number, $4 start and $5
/// duration. An attempt is kept only with its message (one removed
/// meanwhile, with its alert or webhook, has none to keep).
const DELIVERED: &str = "WITH done AS (
        UPDATE deliveries d SET delivered_at = now(), leased_until = NULL,
                                last_status = s.status, last_error = NULL
        FROM UNNEST($1::text[], $2::int[]) AS s (id, status)
        WHERE d.id = s.id RETURNING d.id, d.webhook_id),
    kept AS (
        INSERT INTO attempts (message_id, number, webhook_id, started_at, duration_ms, status)
        SELECT a.id, a.number, done.webhook_id, a.started_at, a.duration_ms, a.status
        FROM UNNEST($1::text[], $2::int[], $3::int[], $4::timestamptz[], $5::int[])
             AS a (id, status, number, started_at, duration_ms)
        JOIN done ON done.id = a.id
        ON CONFLICT DO NOTHING)
    UPDATE webhooks SET failing_since = NULL, last_success_at = now()
    WHERE id IN (SELECT DISTINCT webhook_id FROM done)";

/// $1 id, $2 status, $3 error, $4 milliseconds to the next attempt (NULL
/// after the last), and the attempt's $5 number, $6 start and $7
/// duration; whether the webhook is disabled now.
static FAILED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH attempt AS (
             UPDATE deliveries SET leased_until = NULL, last_status = $2, last_error = $3,
                 next_attempt_at = CASE WHEN $4::bigint IS NULL THEN next_attempt_at
                                        ELSE now() + $4::bigint * interval '1 millisecond' END,
                 failed_at = CASE WHEN $4::bigint IS NULL THEN now() END
             WHERE id = $1 RETURNING id, webhook_id),
         kept AS (
             INSERT INTO attempts (message_id, number, webhook_id, started_at, duration_ms,
                                   status, error)
             SELECT id, $5::int, webhook_id, $6::timestamptz, $7::int, $2, $3 FROM attempt
             ON CONFLICT DO NOTHING)
         UPDATE webhooks w SET failing_since = COALESCE(w.failing_since, now()),
             last_error = $3, last_error_at = now(),
             disabled_at = CASE WHEN w.failing_since < now() - interval '{DISABLE_AFTER}'
                                THEN COALESCE(w.disabled_at, now()) ELSE w.disabled_at END
         FROM attempt WHERE w.id = attempt.webhook_id
         RETURNING w.disabled_at IS NOT NULL"
    )
});

const GIVE_UP: &str = "UPDATE deliveries d SET failed_at = now(), leased_until = NULL,
        last_error = COALESCE(d.last_error, 'the webhook was disabled')
    WHERE d.webhook_id = $1 AND d.delivered_at IS NULL AND d.failed_at IS NULL";
