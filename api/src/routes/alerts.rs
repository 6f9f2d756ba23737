//! `/api/v1/alerts`: rate thresholds that call one of the key's webhooks
//! when a board crosses them.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use serde_json::value::RawValue;

use super::owned::{answer, id_of, read_body, Owner};
use crate::error::Result;
use crate::state::AppState;

/// Create an alert on a rate.
///
/// It watches one rate of a currency at one bank, or the best across
/// active banks, and calls its webhook when a board crosses its threshold.
#[utoipa::path(post, path = "/api/v1/alerts", tag = "alerts", operation_id = "create_alert",
    request_body(content = crate::openapi::NewAlert, content_type = "application/json"),
    responses(
        (status = 201, description = "Created; it fires at the first board that finds its condition true", body = crate::openapi::AlertResponse),
        (status = 409, description = "The key holds as many alerts as its plan allows", body = crate::openapi::LimitReachedBody),
        (status = 415, description = "Content-Type is not application/json", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn create(
    Owner(owner): Owner,
    State(state): State<AppState>,
    body: std::result::Result<Json<Box<RawValue>>, JsonRejection>,
) -> Result<Response> {
    let body = read_body(body)?;
    let most = state.access.plans.alerts(&owner.plan);
    let alert = state
        .alerting
        .create_alert(&owner.prefix, most, body.get())
        .await?;
    Ok(answer(StatusCode::CREATED, "created", alert))
}

/// List the key's alerts with their state.
#[utoipa::path(get, path = "/api/v1/alerts", tag = "alerts", operation_id = "list_alerts",
    responses(
        (status = 200, description = "The key's alerts, oldest first, with their state", body = crate::openapi::AlertsResponse),
        crate::openapi::CommonErrors,
    ))]
pub async fn list(Owner(owner): Owner, State(state): State<AppState>) -> Result<Response> {
    let alerts = state.alerting.alerts(&owner.prefix).await?;
    Ok(answer(StatusCode::OK, "success", alerts))
}

/// Delete an alert.
#[utoipa::path(delete, path = "/api/v1/alerts/{id}", tag = "alerts", operation_id = "delete_alert",
    params(("id" = String, Path, format = Uuid, description = "The alert's id")),
    responses(
        (status = 204, description = "Removed, with its undelivered messages"),
        (status = 404, description = "Alert not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn delete(
    Owner(owner): Owner,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let id = id_of(&id, "Alert not found")?;
    state.alerting.delete_alert(&owner.prefix, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
