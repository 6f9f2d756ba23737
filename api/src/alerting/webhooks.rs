//! Webhook endpoints: registered, listed, removed, tested and given a new
//! secret by their owner.

use chrono::{DateTime, Utc};
use ratewire_readmodel::alerts::{Secret, WEBHOOK_TEST};
use serde::{Deserialize, Serialize};
use sqlx::FromRow;
use uuid::Uuid;

use super::{lock_owner, Alerting};
use crate::error::{Error, Result};
use ratewire_readmodel::views::millis;

/// The longest description kept.
pub const MAX_DESCRIPTION: usize = 500;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    pub url: String,
    #[serde(default)]
    pub description: Option<String>,
}

impl ratewire_service::body::Fields for NewWebhook {
    const WHAT: &'static str = "a webhook";
    const FIELDS: &'static [&'static str] = &["url", "description"];
    const REQUIRED: &'static [&'static str] = &["url"];
}

/// A new webhook, with the secret shown this once.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedWebhook {
    pub id: Uuid,
    pub url: String,
    pub description: String,
    pub secret: String,
    #[serde(serialize_with = "millis::one")]
    pub created_at: DateTime<Utc>,
}

/// A webhook as its owner lists it: never a secret.
#[derive(Debug, Serialize, FromRow)]
#[serde(rename_all = "camelCase")]
pub struct WebhookInfo {
    pub id: Uuid,
    pub url: String,
    pub description: String,
    /// `active`, `failing` (deliveries fail and are retried) or
    /// `disabled` (failed for 24 hours; a test re-enables it).
    pub status: String,
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

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RotatedSecret {
    pub id: Uuid,
    pub secret: String,
    /// The old secret signs too until then.
    #[serde(serialize_with = "millis::one")]
    pub previous_secret_until: DateTime<Utc>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TestSent {
    /// The message's `webhook-id`.
    pub message_id: String,
}

/// How long the secret before a rotation still signs.
const ROTATION_OVERLAP: &str = "24 hours";

impl Alerting {
    fn sealing_key(&self) -> Result<&ratewire_readmodel::alerts::SealingKey> {
        self.key.as_ref().ok_or(Error::NotConfigured(
            "webhooks are not configured on this server (RATEWIRE_WEBHOOK_SECRETS_KEY)",
        ))
    }

    pub async fn create_webhook(&self, owner: &str, new: NewWebhook) -> Result<CreatedWebhook> {
        let key = self.sealing_key()?;
        let description = new.description.unwrap_or_default();
        if description.chars().count() > MAX_DESCRIPTION {
            return Err(Error::validation(
                "description",
                format!("must be at most {MAX_DESCRIPTION} characters"),
            ));
        }
        let url = self
            .policy
            .check_url(new.url.trim())
            .await
            .map_err(|e| Error::validation("url", e))?;
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
                "this key has {held} webhooks, the most one key may register; delete one first"
            )));
        }
        let created_at: DateTime<Utc> = sqlx::query_scalar(
            "INSERT INTO webhooks (id, owner, url, description, secret) VALUES ($1, $2, $3, $4, $5)
             RETURNING created_at",
        )
        .bind(id)
        .bind(owner)
        .bind(url.as_str())
        .bind(&description)
        .bind(key.seal(id, &secret))
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(CreatedWebhook {
            id,
            url: url.to_string(),
            description,
            secret: secret.encoded(),
            created_at,
        })
    }

    pub async fn webhooks(&self, owner: &str) -> Result<Vec<WebhookInfo>> {
        Ok(sqlx::query_as(
            "SELECT w.id, w.url, w.description,
                    CASE WHEN w.disabled_at IS NOT NULL THEN 'disabled'
                         WHEN w.failing_since IS NOT NULL THEN 'failing' ELSE 'active' END AS status,
                    w.created_at, w.failing_since, w.disabled_at, w.last_error, w.last_error_at,
                    w.last_success_at,
                    CASE WHEN w.previous_until > now() THEN w.previous_until END AS previous_secret_until,
                    (SELECT count(*) FROM deliveries d WHERE d.webhook_id = w.id
                       AND d.delivered_at IS NULL AND d.failed_at IS NULL) AS pending
             FROM webhooks w WHERE w.owner = $1 ORDER BY w.created_at, w.id",
        )
        .bind(owner)
        .fetch_all(&self.pool)
        .await?)
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
        let until: Option<DateTime<Utc>> = sqlx::query_scalar(&format!(
            "UPDATE webhooks SET previous_secret = secret, secret = $3,
                 previous_until = now() + interval '{ROTATION_OVERLAP}'
             WHERE id = $1 AND owner = $2 RETURNING previous_until"
        ))
        .bind(id)
        .bind(owner)
        .bind(key.seal(id, &secret))
        .fetch_optional(&self.pool)
        .await?;
        let until = until.ok_or(Error::NotFound("Webhook not found"))?;
        Ok(RotatedSecret {
            id,
            secret: secret.encoded(),
            previous_secret_until: until,
        })
    }

    /// Queues a `webhook.test` message. A disabled webhook is enabled
    /// again for it: delivered, it is active; failed, it is disabled again.
    pub async fn test_webhook(&self, owner: &str, id: Uuid) -> Result<TestSent> {
        self.sealing_key()?;
        let message_id = format!("msg_{}", Uuid::new_v4().simple());
        let queued = sqlx::query(
            r#"WITH hook AS (
                   UPDATE webhooks SET disabled_at = NULL WHERE id = $1 AND owner = $2 RETURNING id, owner)
               INSERT INTO deliveries (id, webhook_id, owner, type, body, streamed)
               SELECT $3, hook.id, hook.owner, $4,
                      json_build_object('type', $4::text,
                          'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                          'data', json_build_object('webhookId', hook.id))::text,
                      -- Tests are for the webhook only, not the live stream.
                      TRUE
               FROM hook"#,
        )
        .bind(id)
        .bind(owner)
        .bind(&message_id)
        .bind(WEBHOOK_TEST)
        .execute(&self.pool)
        .await?
        .rows_affected();
        found(queued == 1)?;
        Ok(TestSent { message_id })
    }
}

fn found(yes: bool) -> Result<()> {
    if yes {
        Ok(())
    } else {
        Err(Error::NotFound("Webhook not found"))
    }
}
