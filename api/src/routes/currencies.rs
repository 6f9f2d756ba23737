//! `GET /api/v1/currencies`: currencies active banks quote, most quoted first.

use axum::extract::State;
use axum::response::Response;
use ratewire_readmodel::store;
use ratewire_readmodel::views::currencies_response;

use crate::access::auth::Authorized;
use crate::error::Result;
use crate::state::AppState;
use crate::views::fallback::rendered;
use crate::views::requests;
use crate::views::{Named, Shape};

/// Currencies quoted by at least one active bank, most quoted first.
#[utoipa::path(get, path = requests::CURRENCIES, tag = "currencies",
    responses((status = 200, description = "success", body = crate::openapi::CurrenciesResponse), crate::openapi::CommonErrors))]
pub async fn currencies(
    _: Authorized,
    State(state): State<AppState>,
    named: Named,
) -> Result<Response> {
    let style = &state.views.style;
    state
        .views
        .serve(named, "Not Found", Shape::Whole, |read| async move {
            let counts = store::currency_counts(&read.pool).await?;
            Ok(Ok(rendered(currencies_response(&counts, style))))
        })
        .await
}
