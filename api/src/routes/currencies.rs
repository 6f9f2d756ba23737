//! `GET /api/v1/currencies`: currencies active banks quote, most quoted first.

use axum::extract::State;
use axum::response::Response;
use ratewire_readmodel::store;
use ratewire_readmodel::views::currencies_response;

use crate::access::auth::Authorized;
use crate::error::Result;
use crate::state::AppState;
use crate::views::fallback::rendered;
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};
use crate::views::requests::{self, CurrenciesQuery};
use crate::views::{Shape, ViewRead};

/// Currencies quoted by at least one active bank, most quoted first.
#[utoipa::path(get, path = requests::CURRENCIES, tag = "currencies",
    params(CurrenciesQuery),
    responses((status = 200, description = "success", body = crate::openapi::CurrenciesResponse), crate::openapi::CommonErrors))]
pub async fn currencies(
    _: Authorized,
    State(state): State<AppState>,
    ViewRead { query, named }: ViewRead<CurrenciesQuery>,
    known: KnownAtRequest,
) -> Result<Response> {
    let style = &state.views.style;
    if let Some(at) = query.as_known_at {
        let (model, pool) = (&named.read, &named.read.pool);
        let mut read = match state.views.known_at(model, pool, known, "", at).await? {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let counts = store::currency_counts(read.db()).await?;
        let body = currencies_response(&counts, style);
        return read.answer(Rendered::Json(body), None).await;
    }
    state
        .views
        .serve(named, "Not Found", Shape::Whole, |read| async move {
            let counts = store::currency_counts(&read.pool).await?;
            Ok(Ok(rendered(currencies_response(&counts, style))))
        })
        .await
}
