//! `GET /api/v1/banks`: the active banks, optionally with their current board.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use ratewire_readmodel::store;
use ratewire_readmodel::views::banks_element;

use crate::access::auth::ApiKey;
use crate::error::Result;
use crate::state::AppState;
use crate::views::answer::AcceptsGzip;
use crate::views::fallback::rendered;
use crate::views::requests;
use crate::views::requests::BanksRequest;
use crate::views::{Prefetched, Shape};

/// The active banks, ordered by id.
#[utoipa::path(get, path = requests::BANKS, tag = "banks",
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
    let read = state.views.read.current();
    let view = request.view(&read.views);
    let style = &state.views.style;
    state
        .views
        .serve(
            prefetched,
            read,
            &view,
            Shape::List(gzip),
            |read| async move {
                let elements: Vec<String> = store::active_bank_views(&read.pool)
                    .await?
                    .iter()
                    .map(|view| banks_element(view, with_recent, style))
                    .collect();
                Ok(Ok(rendered(elements.join(","))))
            },
        )
        .await
}
