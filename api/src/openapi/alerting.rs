//! The webhook and alert endpoints' shapes.

use utoipa::ToSchema;

/// A webhook to register.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// Where messages are POSTed: http or https, at most 2,048 characters,
    /// resolving to public addresses only.
    #[schema(max_length = 2048, pattern = "^[Hh][Tt][Tt][Pp][Ss]?://")]
    pub url: String,
    /// For its owner's eyes; optional (null when not given).
    #[schema(max_length = 500)]
    pub description: Option<String>,
    /// The market watchdog's events it also receives, each named once
    /// (none when not given); its alerts' crossings come whatever it names.
    pub events: Option<Vec<WatchdogEvent>>,
}

/// An event of the market's watchdog a webhook may receive
/// (docs/api.md, "Quality webhooks").
#[derive(ToSchema)]
pub enum WatchdogEvent {
    /// A bank began missing its schedule's slots.
    #[serde(rename = "quality.publication_missed")]
    PublicationMissed,
    /// A pair of a bank's newest board went over the spread cap.
    #[serde(rename = "quality.spread_cap_breached")]
    SpreadCapBreached,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedWebhook {
    #[schema(format = Uuid)]
    pub id: String,
    pub url: String,
    /// Null when none was given.
    pub description: Option<String>,
    /// The signing secret, `whsec_` + base64: shown this once.
    #[schema(pattern = "^whsec_[A-Za-z0-9+/=]+$")]
    pub secret: String,
    /// The watchdog's events it receives.
    pub events: Vec<WatchdogEvent>,
    #[schema(format = DateTime)]
    pub created_at: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedWebhookResponse {
    /// "created"
    pub message: String,
    pub status: u16,
    pub data: CreatedWebhook,
}

/// A webhook as its owner lists it (never its secret).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    #[schema(format = Uuid)]
    pub id: String,
    pub url: String,
    /// Null when none was given.
    pub description: Option<String>,
    /// The watchdog's events it receives.
    pub events: Vec<WatchdogEvent>,
    /// `active`; `failing`: deliveries fail and are retried; `disabled`:
    /// failing for 24 hours, nothing is sent (a test enables it again).
    #[schema(pattern = "^(active|failing|disabled)$")]
    pub status: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub failing_since: Option<String>,
    #[schema(format = DateTime)]
    pub disabled_at: Option<String>,
    /// The last failed attempt's error (its status and up to 200
    /// characters of its answer, or why it could not connect).
    pub last_error: Option<String>,
    #[schema(format = DateTime)]
    pub last_error_at: Option<String>,
    #[schema(format = DateTime)]
    pub last_success_at: Option<String>,
    /// Until when the secret before the last rotation still signs.
    #[schema(format = DateTime)]
    pub previous_secret_until: Option<String>,
    /// Messages waiting for delivery, retries included.
    pub pending: u64,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhooksResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Vec<Webhook>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Webhook,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotatedSecret {
    #[schema(format = Uuid)]
    pub id: String,
    /// The new secret: shown this once.
    #[schema(pattern = "^whsec_[A-Za-z0-9+/=]+$")]
    pub secret: String,
    /// Both secrets sign each message until then.
    #[schema(format = DateTime)]
    pub previous_secret_until: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotatedSecretResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: RotatedSecret,
}

/// A message queued for an attempt now.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    /// The message's `webhook-id`.
    pub message_id: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueuedResponse {
    /// "accepted"
    pub message: String,
    pub status: u16,
    pub data: Queued,
}

/// One attempt at one of a webhook's messages.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryAttempt {
    /// The message's `webhook-id` (the same on each of its attempts).
    pub message_id: String,
    /// The message's type.
    #[schema(pattern = "^(rate\\.threshold_crossed|webhook\\.test)$")]
    pub r#type: String,
    /// Which attempt at the message it was: 1 for the first. One cut short
    /// by a crash is not kept, leaving a gap.
    #[schema(minimum = 1)]
    pub attempt: u32,
    /// When it was made.
    #[schema(format = DateTime)]
    pub attempted_at: String,
    /// How long it took, in milliseconds.
    pub duration_ms: u32,
    /// Whether the webhook took it (a 2xx within 10 seconds).
    pub delivered: bool,
    /// The answer's status; null when none came.
    pub status: Option<u16>,
    /// Why it failed (the status and the start of the answer, or why no
    /// connection was made); null when delivered.
    pub error: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Deliveries {
    #[schema(format = Uuid)]
    pub webhook_id: String,
    /// Newest first.
    pub attempts: Vec<DeliveryAttempt>,
    /// The path of the page of older attempts; null on the last page.
    pub next: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveriesResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Deliveries,
}

/// An alert to create.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewAlert {
    /// One of this key's webhooks.
    #[schema(format = Uuid)]
    pub webhook_id: String,
    /// ISO 4217.
    #[schema(pattern = "^[A-Za-z]{3}$")]
    pub currency_code: String,
    #[schema(pattern = "^(cashBuying|cashSelling|transactionalBuying|transactionalSelling)$")]
    pub field: String,
    /// `above`: fires when the rate goes above the threshold (strictly);
    /// `below`: when it goes below.
    #[schema(pattern = "^(above|below)$")]
    pub condition: String,
    /// Above 0 and below 1,000,000,000, at most 8 digits after the point;
    /// kept with the digits written (150.50 stays 150.50).
    #[schema(exclusive_minimum = 0, maximum = 999_999_999)]
    pub threshold: f64,
    /// A bank's id; without it, the best rate across active banks (as
    /// /api/v1/best-rates picks it).
    #[schema(minimum = 1)]
    pub bank_id: Option<u64>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    #[schema(format = Uuid)]
    pub id: String,
    #[schema(format = Uuid)]
    pub webhook_id: String,
    pub currency_code: String,
    pub field: String,
    pub condition: String,
    /// With the digits it was given.
    pub threshold: f64,
    pub bank_id: Option<u64>,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Whether the condition held at the last board evaluated (null: not
    /// known yet; the first board that finds it true fires).
    pub triggered: Option<bool>,
    /// The watched rate at the last board evaluated (or when created),
    /// with the digits its bank published.
    pub last_value: Option<f64>,
    /// Crossings so far.
    pub fired: u64,
    #[schema(format = DateTime)]
    pub last_fired_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertResponse {
    /// "created"
    pub message: String,
    pub status: u16,
    pub data: Alert,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertsResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Vec<Alert>,
}

/// 409: the key holds as many webhooks (or its plan as many alerts) as
/// it may.
#[derive(ToSchema)]
pub struct LimitReachedBody {
    pub status: u16,
    pub message: String,
    #[schema(pattern = "^LIMIT_REACHED$")]
    pub code: String,
}

/// A bank as a crossing names it.
#[derive(ToSchema)]
pub struct AlertBank {
    pub id: u64,
    pub name: String,
    pub code: String,
}

/// What a crossing says.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Crossing {
    #[schema(format = Uuid)]
    pub alert_id: String,
    /// The alert's bank, or (for the best rate) the bank quoting best now.
    pub bank: AlertBank,
    pub currency_code: String,
    pub field: String,
    pub condition: String,
    pub threshold: f64,
    /// The watched rate before the board (null: not known).
    pub previous: Option<f64>,
    pub current: f64,
    /// The as-of of the board the current rate is on.
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// The event that crossed the threshold.
    #[schema(format = Uuid)]
    pub event_id: String,
}

/// The live stream's `alert` event: the webhook message, with its id.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertEvent {
    /// The message's `webhook-id`: the same call reaches the webhook.
    pub id: String,
    /// "rate.threshold_crossed"
    #[schema(pattern = "^rate\\.threshold_crossed$")]
    pub r#type: String,
    /// When the board was published.
    #[schema(format = DateTime)]
    pub timestamp: String,
    pub data: Crossing,
}

#[cfg(test)]
mod tests {
    /// /docs lists each operation by its summary; clients generated from
    /// the document name each by its id.
    #[test]
    fn every_operation_has_a_summary_and_an_id_of_its_own() {
        let doc: serde_json::Value = serde_json::from_str(&crate::routes::DOCUMENT).unwrap();
        let mut ids = std::collections::BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let summary = operation["summary"].as_str().unwrap_or_default();
                assert!(!summary.trim().is_empty(), "{method} {path} has no summary");
                let id = operation["operationId"].as_str().unwrap_or_default();
                assert!(ids.insert(id.to_owned()), "{method} {path}: {id} twice");
            }
        }
    }

    #[test]
    fn a_webhook_s_reading_deliveries_and_retry_are_described() {
        let doc: serde_json::Value = serde_json::from_str(&crate::routes::DOCUMENT).unwrap();
        for path in [
            "/api/v1/webhooks/{id}",
            "/api/v1/webhooks/{id}/deliveries",
            "/api/v1/webhooks/{id}/messages/{messageId}/retry",
        ] {
            assert!(doc["paths"][path].is_object(), "{path} missing");
        }
    }
}
