//! `POST /v1/banks/{bankId}/boards`: a publisher pushes its bank's board;
//! `DELETE /v1/banks/{bankId}/boards/{eventId}`: it retracts one.

use axum::body::Body;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::{delete, post};
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
use crate::retraction;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/banks/{bank_id}/boards", post(publish_board))
        .route(
            "/v1/banks/{bank_id}/boards/{event_id}",
            delete(retract_board),
        )
}

/// A publisher as authentication found it: its token's bank, and the
/// token as the board-record round looks it up again.
struct Caller {
    bank: banks::TokenBank,
    /// The client failed authentications are counted against.
    client: Option<IpAddr>,
    prefix: String,
    hash: String,
}

/// The bank a request's publisher token belongs to, and whether it is
/// active. A client that failed too often is refused before its token is
/// looked at, and a token found invalid recently is refused without a
/// query, so made-up tokens cost no database work. With `remembered`, a
/// token that authenticated lately is taken without a query: the push's
/// board-record round checks it (see [`judged`]).
async fn authenticate(
    state: &AppState,
    peer: IpAddr,
    headers: &HeaderMap,
    remembered: bool,
) -> Result<Caller> {
    let gate = &state.publishers;
    let client = gate.clients.client(Some(peer), headers);
    if let Some(wait) = client.and_then(|c| gate.failures.blocked(c)) {
        // Its failures were logged (at most the allowance a minute).
        tracing::debug!(client = ?client, "publisher refused: too many failed authentications");
        return Err(Error::TooManyFailures(wait));
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(ratewire_service::secret::bearer)
        .ok_or_else(|| refused(state, client, "Publisher token is required"))?;
    let hash = ratewire_service::secret::hash(token);
    let prefix = ratewire_service::secret::prefix_of(banks::TOKEN_KIND, token);
    if let Some(prefix) = prefix.filter(|_| remembered) {
        if let Some(bank) = gate.known_tokens.bank_of(prefix, &hash) {
            return Ok(Caller {
                // The round says whether it still is, and what waits.
                bank: banks::TokenBank {
                    bank,
                    active: true,
                    changes_waiting: false,
                },
                client,
                prefix: prefix.to_owned(),
                hash,
            });
        }
    }
    if gate.invalid_tokens.contains(&hash) {
        return Err(refused(state, client, "Invalid publisher token"));
    }
    match (prefix, banks::authenticate(&state.pool, token).await?) {
        (Some(prefix), Some(found)) => {
            if found.active {
                gate.known_tokens.remember(prefix, hash.clone(), found.bank);
            }
            Ok(Caller {
                bank: found,
                client,
                prefix: prefix.to_owned(),
                hash,
            })
        }
        _ => {
            gate.invalid_tokens.insert(hash);
            Err(refused(state, client, "Invalid publisher token"))
        }
    }
}

/// A failed authentication: counted against its client, and logged.
fn refused(state: &AppState, client: Option<IpAddr>, message: &'static str) -> Error {
    if let Some(client) = client {
        state.publishers.failures.count(client);
    }
    tracing::warn!(client = ?client, "{message}");
    Error::Unauthorized(message)
}

/// The push's token as its board-record round read it, judged as
/// authentication judges it; whether the bank's changes wait in the
/// outbox. A token refused here is forgotten.
fn judged(state: &AppState, caller: &Caller, read: Option<banks::TokenRow>) -> Result<bool> {
    let found = read.map(|row| row.check(&caller.hash)).transpose();
    let checked = match found.map(Option::flatten) {
        Ok(Some(found)) => publishing_for(found, caller.bank.bank, "publish"),
        Ok(None) => Err(refused(state, caller.client, "Invalid publisher token")),
        Err(e) => Err(e),
    };
    if checked.is_err() {
        state.publishers.known_tokens.forget(&caller.prefix);
    }
    checked.map(|found| found.changes_waiting)
}

/// Push a board of the token's bank. Answered 202 only once the broker
/// durably has the event; the answer's `eventId` names the board.
#[utoipa::path(post, path = "/v1/banks/{bankId}/boards", tag = "boards",
    params(
        ("bankId" = i64, Path, minimum = 1, description = "The token's bank"),
        ("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,200}$",
            description = "A retried push with the same key and board publishes nothing new and gets the first answer; the same key with another board is 422 (keys are kept 24 hours). Boards are compared as parsed: whitespace, the order of fields and entries, a currency's case and the offset of `asOf` do not matter; other values or digits (155.1 for 155.10) do"),
    ),
    request_body(content = crate::openapi::Board, content_type = "application/json"),
    responses(
        (status = 202, description = "On the log", body = crate::openapi::AcceptedBoard),
        (status = 400, description = "Validation errors occurred (every problem listed)", body = crate::openapi::ValidationErrorBody),
        (status = 401, description = "Publisher token missing or invalid", body = crate::openapi::ErrorBody),
        (status = 403, description = "The token is another bank's, or the bank is deactivated", body = crate::openapi::ErrorBody),
        (status = 413, description = "Body over the size limit", body = crate::openapi::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = crate::openapi::ErrorBody),
        (status = 422, description = "Idempotency-Key reused with another board", body = crate::openapi::ErrorBody),
        (status = 429, description = "Too many failed authentications from this client; retry after Retry-After seconds", body = crate::openapi::ErrorBody),
        (status = 503, description = "The broker or Postgres is unavailable; nothing was published; retry after Retry-After seconds", body = crate::openapi::ErrorBody),
    ))]
#[tracing::instrument(skip_all, fields(bank_id = %bank_id))]
pub async fn publish_board(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(bank_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Value>)> {
    // A push with an Idempotency-Key may be answered from its first push,
    // before any round: its token is checked by a query first.
    let remembered = !headers.contains_key("idempotency-key");
    let caller = publisher_of(&state, peer.ip(), &headers, &bank_id, "publish", remembered).await?;
    let bank_id = caller.bank.bank;
    if !is_json(&headers) {
        return Err(Error::UnsupportedMediaType);
    }
    let body = super::body::read_limited(body, state.body_limit as usize).await?;

    let push =
        board::parse_push(&body, Utc::now(), state.as_of_horizon).map_err(Error::Validation)?;
    let fingerprint = push.fingerprint();
    let mut envelope = Envelope::new(bank_id, Utc::now(), Event::BoardPublished(push.board));

    // Only a valid board claims its key: a rejected push can be corrected
    // and sent again under the same key.
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(value) => {
            let key = value
                .to_str()
                .map_err(|_| Error::validation("Idempotency-Key", "must be visible ASCII"))?;
            idempotency::check_key(key)?;
            // The board as parsed, not the bytes: the same board written
            // with other whitespace or order is the same push.
            match idempotency::claim(&state.pool, bank_id, key, &fingerprint, envelope.event_id)
                .await?
            {
                Claim::Replay(event_id, known_at) => return Ok(accepted_board(event_id, known_at)),
                Claim::Publish(event_id) => envelope.event_id = event_id,
            }
            Some(key)
        }
    };
    // The bank's own changes waiting in the outbox go first.
    outbox::before_board_known(
        &state.pool,
        &state.publisher,
        bank_id,
        caller.bank.changes_waiting,
    )
    .await?;
    let read = state
        .board_records
        .record(bank_id, envelope.event_id, &caller.prefix)
        .await?;
    let waiting = judged(&state, &caller, read)?;
    outbox::before_board_known(&state.pool, &state.publisher, bank_id, waiting).await?;
    let acknowledged = state.publisher.publish(&envelope).await?;
    if let Some(key) = key {
        idempotency::accepted(&state.pool, bank_id, key, acknowledged.known_at).await?;
    }
    Ok(accepted_board(envelope.event_id, acknowledged.known_at))
}

/// The publisher and the bank a request is about: the token's bank, which
/// must be the path's and active. `action` ("publish", "retract") is what
/// a token of another bank is told it may do only for its own.
async fn publisher_of(
    state: &AppState,
    peer: IpAddr,
    headers: &HeaderMap,
    bank_id: &str,
    action: &str,
    remembered: bool,
) -> Result<Caller> {
    let bank_id: BankId = bank_id
        .parse()
        .map_err(|e: ratewire_proto::InvalidId| Error::validation("bankId", e.to_string()))?;
    let caller = authenticate(state, peer, headers, remembered).await?;
    publishing_for(caller.bank, bank_id, action)?;
    Ok(caller)
}

/// `found` may `action` boards of `bank_id`: its token is that bank's, and
/// the bank is active.
fn publishing_for(
    found: banks::TokenBank,
    bank_id: BankId,
    action: &str,
) -> Result<banks::TokenBank> {
    if found.bank != bank_id {
        return Err(Error::Forbidden(format!(
            "This token may only {action} boards for bank {}",
            found.bank
        )));
    }
    if !found.active {
        return Err(Error::Forbidden(format!("Bank {bank_id} is deactivated")));
    }
    Ok(found)
}

/// Retract one of the bank's boards (named by the event id its push was
/// answered with), accepted within the retraction window: the read model
/// then answers as if it had never been published. Retracting it again
/// answers the same retraction.
#[utoipa::path(delete, path = "/v1/banks/{bankId}/boards/{eventId}", tag = "boards",
    params(
        ("bankId" = i64, Path, minimum = 1, description = "The token's bank"),
        ("eventId" = String, Path, format = Uuid, description = "The board's event id"),
    ),
    request_body(content = Option<crate::openapi::Retraction>, content_type = "application/json"),
    responses(
        (status = 202, description = "The retraction is on the log", body = crate::openapi::Accepted),
        (status = 400, description = "Validation errors occurred", body = crate::openapi::ValidationErrorBody),
        (status = 401, description = "Publisher token missing or invalid", body = crate::openapi::ErrorBody),
        (status = 403, description = "The token is another bank's, or the bank is deactivated", body = crate::openapi::ErrorBody),
        (status = 404, description = "Board not found (not this bank's, or past the retraction window)", body = crate::openapi::ErrorBody),
        (status = 413, description = "Body over the size limit", body = crate::openapi::ErrorBody),
        (status = 415, description = "A body that is not application/json", body = crate::openapi::ErrorBody),
        (status = 429, description = "Too many failed authentications from this client", body = crate::openapi::ErrorBody),
        (status = 503, description = "The broker or Postgres is unavailable; retry after Retry-After seconds", body = crate::openapi::ErrorBody),
    ))]
#[tracing::instrument(skip_all, fields(bank_id = %bank_id, board = %event_id))]
pub async fn retract_board(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((bank_id, event_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Value>)> {
    let bank_id = publisher_of(&state, peer.ip(), &headers, &bank_id, "retract", false)
        .await?
        .bank
        .bank;
    let board = parse_event_id(&event_id)?;
    let reason = read_reason(&state, &headers, body).await?;
    let retraction = retraction::retract(
        &state.pool,
        &state.publisher,
        state.retraction_window,
        bank_id,
        board,
        reason,
    )
    .await?;
    Ok(accepted(retraction))
}

pub(super) fn parse_event_id(text: &str) -> Result<uuid::Uuid> {
    text.parse()
        .map_err(|_| Error::validation("eventId", "must be a board's event id (a UUID)"))
}

/// The optional `{"reason": "..."}` of a retraction.
pub(super) async fn read_reason(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Option<String>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Retraction {
        reason: Option<String>,
    }
    impl ratewire_service::body::Fields for Retraction {
        const WHAT: &'static str = "a retraction";
        const FIELDS: &'static [&'static str] = &["reason"];
        const REQUIRED: &'static [&'static str] = &[];
    }
    let body = super::body::read_limited(body, state.body_limit as usize).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if !is_json(headers) {
        return Err(Error::UnsupportedMediaType);
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| Error::validation("body", format!("must be {{\"reason\": \"...\"}}: {e}")))?;
    // `null` is no body at all.
    if value.is_null() {
        return Ok(None);
    }
    let retraction: Retraction = ratewire_service::body::read(value).map_err(Error::Validation)?;
    Ok(retraction.reason)
}

pub(super) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

pub(super) fn accepted(event_id: uuid::Uuid) -> (StatusCode, Json<Value>) {
    (
        StatusCode::ACCEPTED,
        Json(json!({"status": 202, "message": "Accepted", "eventId": event_id})),
    )
}

/// A board's 202, with its known-at time when the broker stamped it with
/// its log-append time (the time reads `asKnownAt` are measured in).
fn accepted_board(
    event_id: uuid::Uuid,
    known_at: Option<chrono::DateTime<Utc>>,
) -> (StatusCode, Json<Value>) {
    let (status, Json(mut body)) = accepted(event_id);
    if let Some(known_at) = known_at {
        body["knownAt"] = known_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            .into();
    }
    (status, Json(body))
}
