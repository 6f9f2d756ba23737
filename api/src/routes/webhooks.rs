//! `/api/v1/webhooks`: where a key's alerts are delivered. Registered,
//! listed, read, removed, tested and given a new secret by the key that
//! owns them; another key's webhook is not found. Their deliveries are
//! shown and sent again in `deliveries`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use ratewire_alerts::registry::webhooks::WEBHOOK_NOT_FOUND;
use serde_json::value::RawValue;

use super::owned::{answer, id_of, read_body, Owner};
use crate::error::Result;
use crate::state::AppState;

/// Register a webhook.
///
/// Alerts call it, signed with the secret in this answer (shown only
/// here).
#[utoipa::path(post, path = "/api/v1/webhooks", tag = "alerts", operation_id = "create_webhook",
    request_body(content = crate::openapi::NewWebhook, content_type = "application/json"),
    responses(
        (status = 201, description = "Created; the signing secret is in this answer only", body = crate::openapi::CreatedWebhookResponse),
        (status = 409, description = "The key has as many webhooks as it may", body = crate::openapi::LimitReachedBody),
        (status = 415, description = "Content-Type is not application/json", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn create(
    Owner(owner): Owner,
    State(state): State<AppState>,
    body: std::result::Result<Json<Box<RawValue>>, JsonRejection>,
) -> Result<Response> {
    let body = read_body(body)?;
    let created = state
        .alerting
        .create_webhook(&owner.prefix, body.get())
        .await?;
    Ok(answer(StatusCode::CREATED, "created", created))
}

/// List the key's webhooks with their delivery health.
#[utoipa::path(get, path = "/api/v1/webhooks", tag = "alerts", operation_id = "list_webhooks",
    responses(
        (status = 200, description = "The key's webhooks, oldest first, with their delivery health", body = crate::openapi::WebhooksResponse),
        crate::openapi::CommonErrors,
    ))]
pub async fn list(Owner(owner): Owner, State(state): State<AppState>) -> Result<Response> {
    let webhooks = state.alerting.webhooks(&owner.prefix).await?;
    Ok(answer(StatusCode::OK, "success", webhooks))
}

/// Read one webhook with its delivery health.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}", tag = "alerts", operation_id = "get_webhook",
    params(("id" = String, Path, format = Uuid, description = "The webhook's id")),
    responses(
        (status = 200, description = "The webhook, as listed", body = crate::openapi::WebhookResponse),
        (status = 404, description = "Webhook not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn one(
    Owner(owner): Owner,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response> {
    let id = id_of(&id, WEBHOOK_NOT_FOUND)?;
    let webhook = state.alerting.webhook(&owner.prefix, id).await?;
    Ok(answer(StatusCode::OK, "success", webhook))
}

/// Delete a webhook with its alerts.
#[utoipa::path(delete, path = "/api/v1/webhooks/{id}", tag = "alerts", operation_id = "delete_webhook",
    params(("id" = String, Path, format = Uuid, description = "The webhook's id")),
    responses(
        (status = 204, description = "Removed, with its alerts and undelivered messages"),
        (status = 404, description = "Webhook not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn delete(
    Owner(owner): Owner,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let id = id_of(&id, WEBHOOK_NOT_FOUND)?;
    state.alerting.delete_webhook(&owner.prefix, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Send a test message to a webhook.
///
/// A `webhook.test` message is queued; a disabled webhook is enabled again
/// for it.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/test", tag = "alerts", operation_id = "test_webhook",
    params(("id" = String, Path, format = Uuid, description = "The webhook's id")),
    responses(
        (status = 202, description = "A `webhook.test` message is queued (a disabled webhook is enabled again for it)", body = crate::openapi::QueuedResponse),
        (status = 404, description = "Webhook not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn test(
    Owner(owner): Owner,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response> {
    let id = id_of(&id, WEBHOOK_NOT_FOUND)?;
    let sent = state.alerting.test_webhook(&owner.prefix, id).await?;
    Ok(answer(StatusCode::ACCEPTED, "accepted", sent))
}

/// Give a webhook a new signing secret.
///
/// The old one also signs for 24 hours.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/rotate-secret", tag = "alerts", operation_id = "rotate_webhook_secret",
    params(("id" = String, Path, format = Uuid, description = "The webhook's id")),
    responses(
        (status = 200, description = "A new secret; the old one also signs for 24 hours", body = crate::openapi::RotatedSecretResponse),
        (status = 404, description = "Webhook not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn rotate_secret(
    Owner(owner): Owner,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response> {
    let id = id_of(&id, WEBHOOK_NOT_FOUND)?;
    let rotated = state.alerting.rotate_secret(&owner.prefix, id).await?;
    Ok(answer(StatusCode::OK, "success", rotated))
}
