//! `GET /api/v1/boards/{eventId}`: one board as published, where it came
//! from (when ingest received it, when the log acknowledged it, where it
//! is on the log, the publisher's source and reason), what became of it
//! and the events that revised it. `GET /api/v1/boards?bankId=&asOf=`
//! finds the same by what a rate shows of its board (its bank and
//! `updatedAt`).

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use ratewire_proto::BankId;
use ratewire_readmodel::revisions::store;
use ratewire_readmodel::revisions::view::board_json;

use utoipa::openapi::path::{Parameter, ParameterIn};

use super::revisions::{fingerprinted, EventId, Instant};
use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::{query, Query};
use crate::state::AppState;
use crate::views::body::json_body;

/// The path's one parameter, described as `after` of the revision log is
/// (the same type reads both).
pub struct BoardPath;

impl utoipa::IntoParams for BoardPath {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let mut event_id = crate::query::parameter::<EventId>(
            "eventId",
            &["The board's event id (the eventId ingest's 202 gave)"],
        );
        event_id.parameter_in = ParameterIn::Path;
        vec![event_id]
    }
}

/// A board and its provenance.
///
/// `status`: `inForce` (the bank's latest board), `superseded` (a later
/// board of the bank is in force), `retracted` or `corrected` (see
/// `revisions`). `receivedAt`, `knownAt`, `log` and `source` are null for
/// boards folded before provenance was kept, and `source` for a board
/// published without one.
#[utoipa::path(get, path = "/api/v1/boards/{eventId}", tag = "revisions",
    params(BoardPath),
    responses(
        (status = 200, description = "success", body = crate::openapi::BoardResponse),
        (status = 404, description = "Board not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn board(
    _: Authorized,
    State(state): State<AppState>,
    path: std::result::Result<Path<String>, PathRejection>,
) -> Result<Response> {
    // A path that is not text (bad percent-encoding) is a bad id too.
    let text = path.map(|Path(text)| text).unwrap_or_default();
    let EventId(id) = EventId::parse("eventId", &text)
        .map_err(|message| Error::validation("eventId", message))?;
    let read = state.views.read.current();
    let board = store::board(read.history(), id, state.views.style.outliers.percent)
        .await?
        .ok_or(Error::NotFound("Board not found"))?;
    Ok(fingerprinted(
        board_json(&board, &state.views.style),
        json_body,
    ))
}

query! {
    /// `GET /api/v1/boards`: a bank's board of one asOf.
    #[derive(Debug, Clone, Copy)]
    pub struct BoardAtQuery {
        /// The bank (a positive integer; one never registered: 404)
        pub bank_id as "bankId": BankId,
        /// The board's asOf, an RFC 3339 time, to the millisecond (as a rate's `updatedAt` shows it)
        pub as_of as "asOf": Instant,
    }
}

/// A bank's board of one asOf and its provenance.
///
/// The board in force for that asOf, else (retracted) the last one
/// published for it: the same answer as /api/v1/boards/{eventId} for its
/// event id. A rate's `updatedAt` and bank name its board.
#[utoipa::path(get, path = "/api/v1/boards", tag = "revisions",
    params(BoardAtQuery),
    responses(
        (status = 200, description = "success", body = crate::openapi::BoardResponse),
        (status = 404, description = "Bank not found or Board not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn board_at(
    _: Authorized,
    State(state): State<AppState>,
    Query(query): Query<BoardAtQuery>,
) -> Result<Response> {
    let read = state.views.read.current();
    let db = read.history();
    if !store::bank_known(db, query.bank_id).await? {
        return Err(Error::NotFound("Bank not found"));
    }
    let Instant(as_of) = query.as_of;
    let board = store::board_at(db, query.bank_id, as_of, state.views.style.outliers.percent)
        .await?
        .ok_or(Error::NotFound("Board not found"))?;
    Ok(fingerprinted(
        board_json(&board, &state.views.style),
        json_body,
    ))
}
