//! `GET /api/v1/rates`: the latest board of every active bank, or of one.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use ratewire_readmodel::store;
use ratewire_readmodel::views::rates_element;

use crate::access::auth::ApiKey;
use crate::error::Result;
use crate::state::AppState;
use crate::views::answer::AcceptsGzip;
use crate::views::fallback::rendered;
use crate::views::requests;
use crate::views::requests::RatesRequest;
use crate::views::{Prefetched, Shape};

/// The latest board of every active bank, or of one.
#[utoipa::path(get, path = requests::RATES, tag = "rates",
    params(
        ("bankId" = Option<i64>, Query, minimum = 1, description = "Only this bank (a positive integer; one not active: 404)"),
        ("transactional" = Option<bool>, Query, description = "Include transactional rates: true, false, 1 or 0"),
        ("socialLinks" = Option<bool>, Query, description = "Include the banks' social links: true, false, 1 or 0"),
    ),
    responses(
        (status = 200, description = "Success", body = crate::openapi::RatesResponse),
        (status = 404, description = "Bank not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn rates(
    _: ApiKey,
    State(state): State<AppState>,
    prefetched: Prefetched,
    gzip: AcceptsGzip,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let request = RatesRequest::parse(query.as_deref())?;
    let RatesRequest { bank_id, variant } = request;
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
                let elements = match bank_id {
                    Some(id) => {
                        let view = store::bank_view(&read.pool, id)
                            .await?
                            .filter(|v| v.bank.active);
                        let Some(view) = view else {
                            return Ok(Err("Bank not found"));
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
            },
        )
        .await
}
