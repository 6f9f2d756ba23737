//! Operator endpoints for API keys; each requires
//! `Authorization: Bearer $RATEWIRE_ADMIN_TOKEN`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

use crate::access::auth::Operator;
use crate::access::key_records::{self, CreatedKey, KeyInfo, NewKey};
use crate::access::keys::Revocation;
use crate::error::{Error, Result};
use crate::state::AppState;

#[utoipa::path(post, path = "/v1/admin/keys", tag = "keys",
    request_body(content = crate::openapi::NewKey, content_type = "application/json"),
    responses(
        (status = 201, description = "Created; the key's secret is in this answer only", body = crate::openapi::CreatedKey),
        (status = 400, description = "Validation errors occurred", body = crate::openapi::ValidationErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = crate::openapi::ErrorBody),
        crate::openapi::OperatorErrors,
    ))]
pub async fn create(
    _: Operator,
    State(state): State<AppState>,
    body: std::result::Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<(StatusCode, Json<CreatedKey>)> {
    let new: NewKey = super::owned::read_fields(body)?;
    let created = key_records::create(&state.pool, &state.access.plans, new).await?;
    state.access.key_store.created(&created);
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(get, path = "/v1/admin/keys", tag = "keys",
    responses(
        (status = 200, description = "Every key, revoked ones too, oldest first; never a secret", body = Vec<crate::openapi::KeyInfo>),
        crate::openapi::OperatorErrors,
    ))]
pub async fn list(_: Operator, State(state): State<AppState>) -> Result<Json<Vec<KeyInfo>>> {
    Ok(Json(key_records::list(&state.pool).await?))
}

#[utoipa::path(delete, path = "/v1/admin/keys/{prefix}", tag = "keys",
    params(("prefix" = String, Path, pattern = "^[A-Za-z0-9]{8}$", description = "The part of the key after `rwk_`, up to the next `_`")),
    responses(
        (status = 204, description = "Revoked (again, if it was): refused at once here, within a second on every instance"),
        (status = 404, description = "Key not found", body = crate::openapi::ErrorBody),
        crate::openapi::OperatorErrors,
    ))]
pub async fn revoke(
    _: Operator,
    State(state): State<AppState>,
    Path(prefix): Path<String>,
) -> Result<StatusCode> {
    match state.access.key_store.revoke(&prefix).await? {
        Revocation::Revoked => Ok(StatusCode::NO_CONTENT),
        Revocation::NotFound => Err(Error::NotFound("Key not found")),
    }
}
