//! `GET /api/v1/banks`: the active banks, optionally with their current board.

use axum::extract::State;
use axum::response::Response;
use ratewire_readmodel::store;
use ratewire_readmodel::views::banks_element;

use crate::access::auth::Authorized;
use crate::error::Result;
use crate::state::AppState;
use crate::views::answer::AcceptsGzip;
use crate::views::fallback::rendered;
use crate::views::requests::{self, BanksQuery};
use crate::views::{Shape, ViewRead};

/// The active banks, ordered by id.
#[utoipa::path(get, path = requests::BANKS, tag = "banks",
    params(BanksQuery),
    responses((status = 200, description = "Success", body = crate::openapi::BanksResponse), crate::openapi::CommonErrors))]
pub async fn banks(
    _: Authorized,
    State(state): State<AppState>,
    ViewRead { query, named }: ViewRead<BanksQuery>,
    gzip: AcceptsGzip,
) -> Result<Response> {
    let with_recent = query.with_recent;
    let style = &state.views.style;
    state
        .views
        .serve(named, "Not Found", Shape::List(gzip), |read| async move {
            let elements: Vec<String> = store::active_bank_views(&read.pool)
                .await?
                .iter()
                .map(|view| banks_element(view, with_recent, style))
                .collect();
            Ok(Ok(rendered(elements.join(","))))
        })
        .await
}
