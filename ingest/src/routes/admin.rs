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

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/banks", post(register).get(list))
        .route("/v1/admin/banks/{id}", patch(update).get(show))
        .route("/v1/admin/banks/{id}/tokens", post(create_token))
        .route("/v1/admin/tokens/{prefix}", delete(revoke_token))
        .route(
            "/v1/admin/ping",
            get(|_: Operator| async { Json(json!({"status": 200, "message": "ok"})) }),
        )
}

fn parse_id(id: &str) -> Result<BankId> {
    id.parse()
        .map_err(|e: ratewire_proto::InvalidId| Error::validation("id", e.to_string()))
}

async fn register(
    _: Operator,
    State(state): State<AppState>,
    AppJson(new): AppJson<NewBank>,
) -> Result<(StatusCode, Json<Bank>)> {
    let bank = banks::register(&state.pool, &state.publisher, new).await?;
    Ok((StatusCode::CREATED, Json(bank)))
}

async fn list(_: Operator, State(state): State<AppState>) -> Result<Json<Vec<Bank>>> {
    Ok(Json(banks::list(&state.pool).await?))
}

async fn show(
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

async fn update(
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

async fn create_token(
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

async fn revoke_token(
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
