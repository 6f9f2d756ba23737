//! `POST /v1/banks/{bankId}/boards`: a publisher pushes its bank's board.

use axum::body::Body;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Path, State};
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
use crate::idempotency::{self, Claim};
use crate::outbox;
use sha2::{Digest, Sha256};

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/banks/{bank_id}/boards", post(publish_board))
}

/// The bank a request's publisher token belongs to, and whether it is
/// active. A client that failed too often is refused before its token is
/// looked at, and a token found invalid recently is refused without a
/// query, so made-up tokens cost no database work.
async fn authenticate(
    state: &AppState,
    peer: IpAddr,
    headers: &HeaderMap,
) -> Result<(BankId, bool)> {
    let gate = &state.publishers;
    let client = gate.clients.client(Some(peer), headers);
    if let Some(wait) = client.and_then(|c| gate.failures.blocked(c)) {
        // Its failures were logged (at most the allowance a minute).
        tracing::debug!(client = ?client, "publisher refused: too many failed authentications");
        return Err(Error::TooManyFailures(wait));
    }
    let failed = |message| {
        if let Some(client) = client {
            gate.failures.count(client);
        }
        tracing::warn!(client = ?client, "{message}");
        Error::Unauthorized(message)
    };
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(ratewire_service::secret::bearer)
        .ok_or_else(|| failed("Publisher token is required"))?;
    let hash = ratewire_service::secret::hash(token);
    if gate.invalid_tokens.contains(&hash) {
        return Err(failed("Invalid publisher token"));
    }
    match banks::authenticate(&state.pool, token).await? {
        Some(found) => Ok(found),
        None => {
            gate.invalid_tokens.insert(hash);
            Err(failed("Invalid publisher token"))
        }
    }
}

#[tracing::instrument(skip_all, fields(bank_id = %bank_id))]
async fn publish_board(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(bank_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Value>)> {
    let bank_id: BankId = bank_id
        .parse()
        .map_err(|e: ratewire_proto::InvalidId| Error::validation("bankId", e.to_string()))?;

    let (token_bank, active) = authenticate(&state, peer.ip(), &headers).await?;
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
    let body = super::body::read_limited(body, state.body_limit as usize).await?;

    let board =
        board::parse_since(&body, Utc::now(), state.as_of_horizon).map_err(Error::Validation)?;
    let mut envelope = Envelope::new(bank_id, Utc::now(), Event::BoardPublished(board));

    // Only a valid board claims its key: a rejected push can be corrected
    // and sent again under the same key.
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(value) => {
            let key = value
                .to_str()
                .map_err(|_| Error::validation("Idempotency-Key", "must be visible ASCII"))?;
            idempotency::check_key(key)?;
            let body_hash = hex::encode(Sha256::digest(&body));
            match idempotency::claim(&state.pool, bank_id, key, &body_hash, envelope.event_id)
                .await?
            {
                Claim::Replay(event_id) => return Ok(accepted(event_id)),
                Claim::Publish(event_id) => envelope.event_id = event_id,
            }
            Some(key)
        }
    };
    // The bank's own changes waiting in the outbox go first.
    outbox::before_board(&state.pool, &state.publisher, bank_id).await?;
    state.publisher.publish(&envelope).await?;
    if let Some(key) = key {
        idempotency::accepted(&state.pool, bank_id, key).await?;
    }
    Ok(accepted(envelope.event_id))
}

fn accepted(event_id: uuid::Uuid) -> (StatusCode, Json<Value>) {
    (
        StatusCode::ACCEPTED,
        Json(json!({"status": 202, "message": "Accepted", "eventId": event_id})),
    )
}
