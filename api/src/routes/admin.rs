//! Operator endpoints for API keys; each requires
//! `Authorization: Bearer $RATEWIRE_ADMIN_TOKEN`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::{Json, Router};

use crate::auth::Operator;
use crate::error::{Error, Result};
use crate::keys::{self, CreatedKey, KeyInfo, NewKey, Revocation};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/keys", post(create).get(list))
        .route("/v1/admin/keys/{prefix}", delete(revoke))
}

async fn create(
    _: Operator,
    State(state): State<AppState>,
    body: std::result::Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<(StatusCode, Json<CreatedKey>)> {
    // As ingest's operator endpoints answer: 415 for another content type,
    // then every problem under its field.
    let Json(value) = body.map_err(|e| match e.status() {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Error::UnsupportedMediaType,
        _ => Error::validation("body", e.body_text()),
    })?;
    let new: NewKey = ratewire_service::body::read(value).map_err(Error::Validation)?;
    let created = keys::create(&state.pool, &state.plans, new).await?;
    state.key_store.created(&created);
    Ok((StatusCode::CREATED, Json(created)))
}

async fn list(_: Operator, State(state): State<AppState>) -> Result<Json<Vec<KeyInfo>>> {
    Ok(Json(keys::list(&state.pool).await?))
}

async fn revoke(
    _: Operator,
    State(state): State<AppState>,
    Path(prefix): Path<String>,
) -> Result<StatusCode> {
    match state.key_store.revoke(&prefix).await? {
        Revocation::Revoked => Ok(StatusCode::NO_CONTENT),
        Revocation::NotFound => Err(Error::NotFound("Key not found")),
    }
}
