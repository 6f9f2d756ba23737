//! `GET /api/v1/banks`: the active banks, optionally with their current board.

use axum::extract::State;
use axum::response::Response;
use ratewire_readmodel::store;
use ratewire_readmodel::views::{banks_element, list_response, BankView, ViewStyle};

use crate::access::auth::Authorized;
use crate::error::Result;
use crate::state::AppState;
use crate::views::answer::AcceptsGzip;
use crate::views::fallback::rendered;
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};
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
    known: KnownAtRequest,
) -> Result<Response> {
    let with_recent = query.with_recent;
    let style = &state.views.style;
    if let Some(at) = query.as_known_at {
        let (model, pool) = (&named.read, &named.read.pool);
        let mut read = match state.views.known_at(model, pool, known, "", at).await? {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let views = store::active_bank_views_in(read.db()).await?;
        let body = list_response(&elements(&views, with_recent, style));
        return read.answer(Rendered::Json(body), None).await;
    }
    state
        .views
        .serve(named, "Not Found", Shape::List(gzip), |read| async move {
            let views = store::active_bank_views(&read.pool).await?;
            Ok(Ok(rendered(elements(&views, with_recent, style))))
        })
        .await
}

/// The list's elements, comma-joined.
fn elements(views: &[BankView], with_recent: bool, style: &ViewStyle) -> String {
    views
        .iter()
        .map(|view| banks_element(view, with_recent, style))
        .collect::<Vec<_>>()
        .join(",")
}
