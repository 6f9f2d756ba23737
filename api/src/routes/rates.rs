//! `GET /api/v1/rates`: the latest board of every active bank, or of one.

use axum::extract::State;
use axum::response::Response;
use ratewire_readmodel::store;
use ratewire_readmodel::views::rates_element;

use crate::access::auth::Authorized;
use crate::error::Result;
use crate::state::AppState;
use crate::views::answer::AcceptsGzip;
use crate::views::fallback::rendered;
use crate::views::requests::{self, RatesQuery};
use crate::views::{Shape, ViewRead};

/// The latest board of every active bank, or of one.
#[utoipa::path(get, path = requests::RATES, tag = "rates",
    params(RatesQuery),
    responses(
        (status = 200, description = "Success", body = crate::openapi::RatesResponse),
        (status = 404, description = "Bank not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn rates(
    _: Authorized,
    State(state): State<AppState>,
    ViewRead { query, named }: ViewRead<RatesQuery>,
    gzip: AcceptsGzip,
) -> Result<Response> {
    let (bank_id, variant) = (query.bank_id, query.variant());
    let style = &state.views.style;
    let missing = "Bank not found";
    state
        .views
        .serve(named, missing, Shape::List(gzip), |read| async move {
            let elements = match bank_id {
                Some(id) => {
                    let view = store::bank_view(&read.pool, id)
                        .await?
                        .filter(|v| v.bank.active);
                    let Some(view) = view else {
                        return Ok(Err(missing));
                    };
                    rates_element(&view, variant, style)
                }
                None => store::active_bank_views(&read.pool)
                    .await?
                    .iter()
                    .map(|view| rates_element(view, variant, style))
                    .collect::<Vec<_>>()
                    .join(","),
            };
            Ok(Ok(rendered(elements)))
        })
        .await
}
