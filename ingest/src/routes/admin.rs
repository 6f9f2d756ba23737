//! Operator endpoints: banks and publisher tokens. Each requires
//! `Authorization: Bearer $RATEWIRE_ADMIN_TOKEN`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, patch, post};
use axum::{Json, Router};
use ratewire_proto::BankId;
use serde_json::{json, Value};

use super::{AppJson, AppState, Operator};
use crate::banks::{self, Bank, BankPatch, NewBank};
use crate::error::{Error, Result};
use crate::reference::{self, Outcome};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/banks", post(register).get(list))
        .route("/v1/admin/banks/{id}", patch(update).get(show))
        .route("/v1/admin/banks/{id}/tokens", post(create_token))
        .route("/v1/admin/tokens/{prefix}", delete(revoke_token))
        .route(
            "/v1/admin/banks/{id}/boards/{event_id}",
            delete(retract_board),
        )
        .route("/v1/admin/reference-rates", post(import_reference))
        .route(
            "/v1/admin/ping",
            get(|_: Operator| async { Json(json!({"status": 200, "message": "ok"})) }),
        )
}

fn parse_id(id: &str) -> Result<BankId> {
    id.parse()
        .map_err(|e: ratewire_proto::InvalidId| Error::validation("id", e.to_string()))
}

#[utoipa::path(post, path = "/v1/admin/banks", tag = "banks",
    request_body(content = crate::openapi::NewBank, content_type = "application/json"),
    responses(
        (status = 201, description = "Registered (BankRegistered is on the log, or waiting in the outbox while the broker is away)", body = crate::openapi::Bank),
        (status = 400, description = "Validation errors occurred", body = crate::openapi::ValidationErrorBody),
        (status = 409, description = "The code is taken", body = crate::openapi::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = crate::openapi::ErrorBody),
        crate::openapi::OperatorErrors,
    ))]
pub async fn register(
    _: Operator,
    State(state): State<AppState>,
    AppJson(new): AppJson<NewBank>,
) -> Result<(StatusCode, Json<Bank>)> {
    let bank = banks::register(&state.pool, &state.publisher, new).await?;
    Ok((StatusCode::CREATED, Json(bank)))
}

#[utoipa::path(get, path = "/v1/admin/banks", tag = "banks",
    responses(
        (status = 200, description = "Every bank, active or not, by id", body = Vec<crate::openapi::Bank>),
        crate::openapi::OperatorErrors,
    ))]
pub async fn list(_: Operator, State(state): State<AppState>) -> Result<Json<Vec<Bank>>> {
    Ok(Json(banks::list(&state.pool).await?))
}

#[utoipa::path(get, path = "/v1/admin/banks/{id}", tag = "banks",
    params(("id" = i64, Path, minimum = 1)),
    responses(
        (status = 200, description = "The bank", body = crate::openapi::Bank),
        (status = 400, description = "Validation errors occurred (an id that is not a positive 64-bit integer)", body = crate::openapi::ValidationErrorBody),
        (status = 404, description = "Bank not found", body = crate::openapi::ErrorBody),
        crate::openapi::OperatorErrors,
    ))]
pub async fn show(
    _: Operator,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Bank>> {
    let id = parse_id(&id)?;
    banks::get(&state.pool, id)
        .await?
        .map(Json)
        .ok_or_else(|| Error::NotFound("Bank not found".into()))
}

#[utoipa::path(patch, path = "/v1/admin/banks/{id}", tag = "banks",
    params(("id" = i64, Path, minimum = 1)),
    request_body(content = crate::openapi::BankPatch, content_type = "application/json"),
    responses(
        (status = 200, description = "The bank as changed (BankUpdated, BankDeactivated or BankReactivated published)", body = crate::openapi::Bank),
        (status = 400, description = "Validation errors occurred", body = crate::openapi::ValidationErrorBody),
        (status = 404, description = "Bank not found", body = crate::openapi::ErrorBody),
        (status = 409, description = "The code is taken", body = crate::openapi::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = crate::openapi::ErrorBody),
        crate::openapi::OperatorErrors,
    ))]
pub async fn update(
    _: Operator,
    State(state): State<AppState>,
    Path(id): Path<String>,
    AppJson(patch): AppJson<BankPatch>,
) -> Result<Json<Bank>> {
    let id = parse_id(&id)?;
    Ok(Json(
        banks::update(&state.pool, &state.publisher, id, patch).await?,
    ))
}

/// An operator retracts a bank's board (active or not).
#[utoipa::path(delete, path = "/v1/admin/banks/{id}/boards/{eventId}", tag = "boards",
    params(
        ("id" = i64, Path, minimum = 1),
        ("eventId" = String, Path, format = Uuid, description = "The board's event id"),
    ),
    request_body(content = Option<crate::openapi::Retraction>, content_type = "application/json"),
    responses(
        (status = 202, description = "The retraction is on the log", body = crate::openapi::Accepted),
        (status = 400, description = "Validation errors occurred", body = crate::openapi::ValidationErrorBody),
        (status = 404, description = "Board not found (not this bank's, or past the retraction window)", body = crate::openapi::ErrorBody),
        (status = 415, description = "A body that is not application/json", body = crate::openapi::ErrorBody),
        crate::openapi::OperatorErrors,
    ))]
pub async fn retract_board(
    _: Operator,
    State(state): State<AppState>,
    Path((id, event_id)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> Result<(StatusCode, Json<Value>)> {
    let id = parse_id(&id)?;
    let board = super::boards::parse_event_id(&event_id)?;
    let reason = super::boards::read_reason(&state, &headers, body).await?;
    let retraction = crate::retraction::retract(
        &state.pool,
        &state.publisher,
        state.retraction_window,
        id,
        board,
        reason,
    )
    .await?;
    Ok(super::boards::accepted(retraction))
}

#[utoipa::path(post, path = "/v1/admin/banks/{id}/tokens", tag = "tokens",
    params(("id" = i64, Path, minimum = 1)),
    responses(
        (status = 201, description = "A new publisher token, shown only this once", body = crate::openapi::Token),
        (status = 400, description = "Validation errors occurred (an id that is not a positive 64-bit integer)", body = crate::openapi::ValidationErrorBody),
        (status = 404, description = "Bank not found", body = crate::openapi::ErrorBody),
        crate::openapi::OperatorErrors,
    ))]
pub async fn create_token(
    _: Operator,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>)> {
    let id = parse_id(&id)?;
    let token = banks::create_token(&state.pool, id).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"token": token.secret, "prefix": token.prefix, "bankId": id.get()})),
    ))
}

#[utoipa::path(delete, path = "/v1/admin/tokens/{prefix}", tag = "tokens",
    params(("prefix" = String, Path, pattern = "^[A-Za-z0-9]{8}$", description = "The part of the token after `rwp_`, up to the next `_`")),
    responses(
        (status = 204, description = "Revoked: it stops working at once"),
        (status = 404, description = "Token not found", body = crate::openapi::ErrorBody),
        crate::openapi::OperatorErrors,
    ))]
pub async fn revoke_token(
    _: Operator,
    State(state): State<AppState>,
    Path(prefix): Path<String>,
) -> Result<StatusCode> {
    if banks::revoke_token(&state.pool, &prefix).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound("Token not found".into()))
    }
}

/// Imports one day of the National Bank's reference rates, the body being
/// its published response as it is. Published once the broker has
/// acknowledged it; the same day with the same values again publishes
/// nothing (200); with other values it is a correction that replaces the day.
#[utoipa::path(post, path = "/v1/admin/reference-rates", tag = "reference rates",
    request_body(content = crate::openapi::PublishedReference, content_type = "application/json"),
    responses(
        (status = 202, description = "The day is on the log (a new day, or a correction)", body = crate::openapi::ReferenceImported),
        (status = 200, description = "The day was already published with these values; nothing was published", body = crate::openapi::ReferenceImported),
        (status = 400, description = "Not the published shape (a field it does not have included), or a broken rule: every problem at once, each under its path (`data[2].buying`, `data[0].mid`); nothing was published", body = crate::openapi::ValidationErrorBody),
        (status = 413, description = "Body over the size limit", body = crate::openapi::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = crate::openapi::ErrorBody),
        crate::openapi::OperatorErrors,
    ))]
#[tracing::instrument(skip_all)]
pub async fn import_reference(
    _: Operator,
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> Result<(StatusCode, Json<Value>)> {
    if !super::boards::is_json(&headers) {
        return Err(Error::UnsupportedMediaType);
    }
    let body = super::body::read_limited(body, state.body_limit as usize).await?;
    let board = reference::parse(&body, chrono::Utc::now())?;
    let imported = reference::import(&state.pool, &state.publisher, board).await?;
    let (status, message) = match imported.outcome {
        Outcome::Unchanged => (StatusCode::OK, "Unchanged"),
        Outcome::Published | Outcome::Corrected => (StatusCode::ACCEPTED, "Accepted"),
    };
    tracing::info!(date = %imported.date, outcome = ?imported.outcome, event_id = %imported.event_id,
        "reference rates imported");
    Ok((
        status,
        Json(json!({
            "status": status.as_u16(),
            "message": message,
            "eventId": imported.event_id,
            "source": imported.source,
            "date": imported.date,
            "currencies": imported.currencies,
            "outcome": imported.outcome,
        })),
    ))
}
