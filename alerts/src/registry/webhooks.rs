//! Webhook endpoints: registered, listed (or read one at a time), removed,
//! tested and given a new secret by their owner.

use chrono::{DateTime, Duration, Utc};
use ratewire_readmodel::views::millis;
use serde::Serialize;
use sqlx::FromRow;
use uuid::Uuid;

use super::body::BodyFields;
use super::{lock_owner, Registry};
use crate::error::{Error, Result};
use crate::message::{test_id, Body, WebhookTest, QUALITY_EVENTS, WEBHOOK_TEST};
use crate::sealing::SealingKey;
use crate::signing::Secret;

/// The longest description kept.
pub const MAX_DESCRIPTION: usize = 500;

/// How long the secret before a rotation still signs.
const ROTATION_OVERLAP: Duration = Duration::hours(24);

/// The fields `POST /api/v1/webhooks` takes.
pub struct NewWebhook;

impl ratewire_service::body::Fields for NewWebhook {
    const WHAT: &'static str = "a webhook";
    const FIELDS: &'static [&'static str] = &["url", "description", "events"];
    const REQUIRED: &'static [&'static str] = &["url"];
}

/// A new webhook, with the secret shown this once.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedWebhook {
    pub id: Uuid,
    pub url: String,
    /// `None` when none was given.
    pub description: Option<String>,
    pub secret: String,
    /// The watchdog's event types it receives, beside its alerts'.
    pub events: Vec<String>,
    #[serde(serialize_with = "millis::one")]
    pub created_at: DateTime<Utc>,
}

/// A webhook's delivery health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    Active,
    /// Deliveries fail and are retried.
    Failing,
    /// Failed for 24 hours; a test enables it again.
    Disabled,
}

/// A webhook as its owner lists it: never a secret.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookInfo {
    pub id: Uuid,
    pub url: String,
    pub description: Option<String>,
    /// The watchdog's event types it receives, beside its alerts'.
    pub events: Vec<String>,
    pub status: Status,
    #[serde(serialize_with = "millis::one")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "millis::maybe")]
    pub failing_since: Option<DateTime<Utc>>,
    #[serde(serialize_with = "millis::maybe")]
    pub disabled_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    #[serde(serialize_with = "millis::maybe")]
    pub last_error_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "millis::maybe")]
    pub last_success_at: Option<DateTime<Utc>>,
    /// Until when the secret before the last rotation still signs.
    #[serde(serialize_with = "millis::maybe")]
    pub previous_secret_until: Option<DateTime<Utc>>,
    /// Messages waiting for delivery (retries included).
    pub pending: i64,
}

/// The webhooks as listed, with their pending messages.
const LISTED: &str = "SELECT w.id, w.url, w.description, w.events, w.created_at, w.failing_since,
           w.disabled_at, w.last_error, w.last_error_at, w.last_success_at, w.previous_until,
           (SELECT count(*) FROM deliveries d WHERE d.webhook_id = w.id
              AND d.delivered_at IS NULL AND d.failed_at IS NULL) AS pending
    FROM webhooks w";

/// A webhook's row, as stored.
#[derive(FromRow)]
struct Row {
    id: Uuid,
    url: String,
    description: Option<String>,
    events: Vec<String>,
    created_at: DateTime<Utc>,
    failing_since: Option<DateTime<Utc>>,
    disabled_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
    last_error_at: Option<DateTime<Utc>>,
    last_success_at: Option<DateTime<Utc>>,
    previous_until: Option<DateTime<Utc>>,
    pending: i64,
}

impl Row {
    fn listed(self, now: DateTime<Utc>) -> WebhookInfo {
        let status = match (self.disabled_at, self.failing_since) {
            (Some(_), _) => Status::Disabled,
            (None, Some(_)) => Status::Failing,
            (None, None) => Status::Active,
        };
        WebhookInfo {
            id: self.id,
            url: self.url,
            description: self.description,
            events: self.events,
            status,
            created_at: self.created_at,
            failing_since: self.failing_since,
            disabled_at: self.disabled_at,
            last_error: self.last_error,
            last_error_at: self.last_error_at,
            last_success_at: self.last_success_at,
            previous_secret_until: self.previous_until.filter(|until| *until > now),
            pending: self.pending,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RotatedSecret {
    pub id: Uuid,
    pub secret: String,
    /// The old secret signs too until then.
    #[serde(serialize_with = "millis::one")]
    pub previous_secret_until: DateTime<Utc>,
}

/// A message queued for delivery now.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    /// The message's `webhook-id`.
    pub message_id: String,
}

impl Registry {
    fn sealing_key(&self) -> Result<&SealingKey> {
        self.key.as_ref().ok_or(Error::NotConfigured(
            "Webhooks are not configured on this server (RATEWIRE_WEBHOOK_SECRETS_KEY)",
        ))
    }

    /// Registers a webhook of `owner`'s from `body` (JSON text), naming
    /// every bad field at once.
    pub async fn create_webhook(&self, owner: &str, body: &str) -> Result<CreatedWebhook> {
        let key = self.sealing_key()?;
        let mut body = BodyFields::read::<NewWebhook>(body)?;
        let description = body.get::<Option<String>>("description").flatten();
        if description
            .as_ref()
            .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION)
        {
            body.add(
                "description",
                format!("must be at most {MAX_DESCRIPTION} characters"),
            );
        }
        let url = match body.get::<String>("url") {
            Some(url) => match self.policy.check_url(url.trim()).await {
                Ok(url) => Some(url),
                Err(e) => {
                    body.add("url", e);
                    None
                }
            },
            None => None,
        };
        let events = body
            .get::<Option<Vec<String>>>("events")
            .flatten()
            .and_then(|events| match check_events(events) {
                Ok(events) => Some(events),
                Err(problem) => {
                    body.add("events", problem);
                    None
                }
            })
            .unwrap_or_default();
        let url = body.finish(url)?;
        let id = Uuid::new_v4();
        let secret = Secret::generate();
        let mut tx = self.pool.begin().await?;
        lock_owner(&mut tx, owner).await?;
        let held: i64 = sqlx::query_scalar("SELECT count(*) FROM webhooks WHERE owner = $1")
            .bind(owner)
            .fetch_one(&mut *tx)
            .await?;
        if held >= i64::from(self.webhooks_per_key) {
            return Err(Error::LimitReached(format!(
                "Webhook limit reached: this key has {held} and a key may register {}; delete one first",
                self.webhooks_per_key
            )));
        }
        let created_at: DateTime<Utc> = sqlx::query_scalar(
            "INSERT INTO webhooks (id, owner, url, description, secret, events)
             VALUES ($1, $2, $3, $4, $5, $6)
             RETURNING created_at",
        )
        .bind(id)
        .bind(owner)
        .bind(url.as_str())
        .bind(&description)
        .bind(key.seal(id, &secret))
        .bind(&events)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(CreatedWebhook {
            id,
            url: url.to_string(),
            description,
            secret: secret.encoded(),
            events,
            created_at,
        })
    }

    pub async fn webhooks(&self, owner: &str) -> Result<Vec<WebhookInfo>> {
        let rows: Vec<Row> = sqlx::query_as(&format!(
            "{LISTED} WHERE w.owner = $1 ORDER BY w.created_at, w.id"
        ))
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        let now = Utc::now();
        Ok(rows.into_iter().map(|row| row.listed(now)).collect())
    }

    /// One of `owner`'s webhooks, as listed.
    pub async fn webhook(&self, owner: &str, id: Uuid) -> Result<WebhookInfo> {
        let row: Option<Row> =
            sqlx::query_as(&format!("{LISTED} WHERE w.owner = $1 AND w.id = $2"))
                .bind(owner)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        let row = row.ok_or(Error::NotFound(WEBHOOK_NOT_FOUND))?;
        Ok(row.listed(Utc::now()))
    }

    /// Removes the webhook with its alerts and undelivered messages.
    pub async fn delete_webhook(&self, owner: &str, id: Uuid) -> Result<()> {
        let deleted = sqlx::query("DELETE FROM webhooks WHERE id = $1 AND owner = $2")
            .bind(id)
            .bind(owner)
            .execute(&self.pool)
            .await?
            .rows_affected();
        found(deleted == 1)
    }

    pub async fn rotate_secret(&self, owner: &str, id: Uuid) -> Result<RotatedSecret> {
        let key = self.sealing_key()?;
        let secret = Secret::generate();
        let until = Utc::now() + ROTATION_OVERLAP;
        let rotated = sqlx::query(
            "UPDATE webhooks SET previous_secret = secret, secret = $3, previous_until = $4
             WHERE id = $1 AND owner = $2",
        )
        .bind(id)
        .bind(owner)
        .bind(key.seal(id, &secret))
        .bind(until)
        .execute(&self.pool)
        .await?
        .rows_affected();
        found(rotated == 1)?;
        Ok(RotatedSecret {
            id,
            secret: secret.encoded(),
            previous_secret_until: until,
        })
    }

    /// Queues a `webhook.test` message. A disabled webhook is enabled
    /// again for it: delivered, it is active; failed, it is disabled again.
    pub async fn test_webhook(&self, owner: &str, id: Uuid) -> Result<Queued> {
        self.sealing_key()?;
        let message_id = test_id();
        let body = Body {
            kind: WEBHOOK_TEST,
            timestamp: Utc::now(),
            data: WebhookTest { webhook_id: id },
        };
        let mut tx = self.pool.begin().await?;
        let enabled =
            sqlx::query("UPDATE webhooks SET disabled_at = NULL WHERE id = $1 AND owner = $2")
                .bind(id)
                .bind(owner)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        found(enabled == 1)?;
        // Tests are for the webhook only, not the live stream.
        sqlx::query(
            "INSERT INTO deliveries (id, webhook_id, owner, type, body, streamed)
             VALUES ($1, $2, $3, $4, $5, TRUE)",
        )
        .bind(&message_id)
        .bind(id)
        .bind(owner)
        .bind(WEBHOOK_TEST)
        .bind(body.to_json())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Queued { message_id })
    }
}

/// `events` as stored: each one of [`QUALITY_EVENTS`], once, in the order
/// given.
fn check_events(events: Vec<String>) -> std::result::Result<Vec<String>, String> {
    let mut kept: Vec<String> = Vec::with_capacity(events.len());
    for event in events {
        if !QUALITY_EVENTS.contains(&event.as_str()) {
            return Err(format!(
                "`{event}` is not an event a webhook may name: {}",
                QUALITY_EVENTS.join(", ")
            ));
        }
        if kept.contains(&event) {
            return Err(format!("`{event}` is named twice"));
        }
        kept.push(event);
    }
    Ok(kept)
}

/// What a webhook that is not the caller's answers.
pub const WEBHOOK_NOT_FOUND: &str = "Webhook not found";

fn found(yes: bool) -> Result<()> {
    if yes {
        Ok(())
    } else {
        Err(Error::NotFound(WEBHOOK_NOT_FOUND))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_names_each_watchdog_event_at_most_once() {
        let named = |events: &[&str]| check_events(events.iter().map(|e| e.to_string()).collect());
        assert_eq!(
            named(&["quality.spread_cap_breached"]),
            Ok(vec!["quality.spread_cap_breached".to_owned()])
        );
        assert_eq!(named(&[]), Ok(vec![]));
        assert!(named(&["rate.threshold_crossed"]).is_err());
        assert!(named(&["quality.publication_missed", "quality.publication_missed"]).is_err());
    }
}
