//! `GET /api/v1/banks`: the active banks, optionally with their current board.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use ratewire_readmodel::store;
use ratewire_readmodel::views::banks_element;

use super::fallback::rendered;
use super::view_body::json_list;
use super::{cached_view, stored_list, with_etag, AcceptsGzip, Cached};
use crate::auth::ApiKey;
use crate::error::Result;
use crate::gate::Prefetched;
use crate::requests::BanksRequest;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/banks", get(banks))
}

/// The active banks, ordered by id.
#[utoipa::path(get, path = "/api/v1/banks", tag = "banks",
    params(("withRecentEx" = Option<bool>, Query, description = "Include each bank's current board: true, false, 1 or 0")),
    responses((status = 200, description = "Success", body = crate::openapi::BanksResponse), crate::openapi::CommonErrors))]
pub async fn banks(
    _: ApiKey,
    State(state): State<AppState>,
    prefetched: Prefetched,
    gzip: AcceptsGzip,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let request = BanksRequest::parse(query.as_deref())?;
    let with_recent = request.with_recent;
    let read = state.read.current();
    let view = request.view(&read.views);
    let key = &view.key;
    let cached = match cached_view(&state, prefetched, &view).await {
        Cached::Found(stored) => return Ok(stored_list(&state, gzip, key, stored)),
        cached => cached,
    };
    let elements = state
        .fallbacks
        .render(cached.shared(&state), key, || async {
            let elements: Vec<String> = store::active_bank_views(&read.pool)
                .await?
                .iter()
                .map(|view| banks_element(view, with_recent, &state.style))
                .collect();
            Ok(Ok(rendered(elements.join(","))))
        })
        .await?;
    Ok(with_etag(
        json_list(elements.body),
        elements.etag.as_deref(),
    ))
}
