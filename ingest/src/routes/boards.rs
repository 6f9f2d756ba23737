//! `POST /v1/banks/{bankId}/boards`: a publisher pushes its bank's board.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use ratewire_proto::{BankId, Envelope, Event};
use serde_json::{json, Value};

use super::AppState;
use crate::banks;
use crate::board;
use crate::error::{Error, Result};

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/banks/{bank_id}/boards", post(publish_board))
}

#[tracing::instrument(skip_all, fields(bank_id = %bank_id))]
async fn publish_board(
    State(state): State<AppState>,
    Path(bank_id): Path<String>,
    headers: HeaderMap,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>)> {
    let bank_id: BankId = bank_id
        .parse()
        .map_err(|e: ratewire_proto::InvalidId| Error::validation("bankId", e.to_string()))?;

    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(ratewire_proto::secret::bearer)
        .ok_or(Error::Unauthorized("Publisher token is required"))?;
    let (token_bank, active) = banks::authenticate(&state.pool, token)
        .await?
        .ok_or(Error::Unauthorized("Invalid publisher token"))?;
    if token_bank != bank_id {
        return Err(Error::Forbidden(format!(
            "This token may only publish boards for bank {token_bank}"
        )));
    }
    if !active {
        return Err(Error::Forbidden(format!("Bank {bank_id} is deactivated")));
    }

    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !is_json {
        return Err(Error::UnsupportedMediaType);
    }
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Error::PayloadTooLarge,
        _ => Error::validation("body", rejection.body_text()),
    })?;

    let board = board::parse(&body, Utc::now()).map_err(Error::Validation)?;
    let envelope = Envelope::new(bank_id, Utc::now(), Event::BoardPublished(board));
    state.publisher.publish(&envelope).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"status": 202, "message": "Accepted", "eventId": envelope.event_id})),
    ))
}
