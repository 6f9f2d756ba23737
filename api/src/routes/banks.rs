//! `GET /api/v1/banks`: the active banks, optionally with their current board.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use ratewire_projector::redis_views::Keys;
use ratewire_projector::store;
use ratewire_projector::views::{banks_element, list_response};

use super::view_body::json_list;
use super::{cached_view, json_body, AppState, Prefetched};
use crate::auth::ApiKey;
use crate::error::Result;
use crate::query::{Checker, Params};

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/banks", get(banks))
}

fn argument(query: Option<&str>) -> Result<bool> {
    let params = Params::parse(query)?;
    let mut check = Checker::new(&params);
    let with_recent = check.flag("withRecentEx");
    check.finish()?;
    Ok(with_recent)
}

/// The view a valid query is answered from (see [`super::view_key`]).
pub fn view_key(views: &Keys, query: Option<&str>) -> Option<String> {
    argument(query)
        .ok()
        .map(|with_recent| views.banks_all(with_recent))
}

/// The active banks, ordered by id.
#[utoipa::path(get, path = "/api/v1/banks", tag = "banks",
    params(("withRecentEx" = Option<bool>, Query, description = "Include each bank's current board: true, false, 1 or 0")),
    responses((status = 200, description = "Success", body = crate::openapi::BanksResponse), crate::openapi::CommonErrors))]
pub async fn banks(
    _: ApiKey,
    State(state): State<AppState>,
    prefetched: Prefetched,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let with_recent = argument(query.as_deref())?;
    let read = state.read.current();
    if let Some(elements) =
        cached_view(&state, prefetched, &read.views.banks_all(with_recent)).await
    {
        return Ok(json_list(elements));
    }
    let elements: Vec<String> = store::active_bank_views(&read.pool)
        .await?
        .iter()
        .map(|view| banks_element(view, with_recent, &state.style))
        .collect();
    Ok(json_body(list_response(&elements.join(","))))
}
