//! `GET /api/v1/rates`: the latest board of every active bank, or of one.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use ratewire_readmodel::store;
use ratewire_readmodel::views::rates_element;

use super::fallback::rendered;
use super::view_body::json_list;
use super::{cached_view, stored_list, with_etag, AcceptsGzip, Cached};
use crate::auth::ApiKey;
use crate::error::Result;
use crate::gate::Prefetched;
use crate::requests::RatesRequest;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/rates", get(rates))
}

/// The latest board of every active bank, or of one.
#[utoipa::path(get, path = "/api/v1/rates", tag = "rates",
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
    let read = state.read.current();
    let view = request.view(&read.views);
    let key = &view.key;
    let cached = match cached_view(&state, prefetched, &view).await {
        Cached::Found(stored) => return Ok(stored_list(&state, gzip, key, stored)),
        cached => cached,
    };

    // The view is missing (flushed, not built yet, or an unknown bank):
    // Postgres has the same data and the same renderer makes the same bytes.
    let elements = state
        .fallbacks
        .render(cached.shared(&state), key, || async {
            let elements = match bank_id {
                Some(id) => {
                    let view = store::bank_view(&read.pool, id)
                        .await?
                        .filter(|v| v.bank.active);
                    let Some(view) = view else {
                        return Ok(Err("Bank not found"));
                    };
                    rates_element(&view, variant, &state.style)
                }
                None => store::active_bank_views(&read.pool)
                    .await?
                    .iter()
                    .map(|view| rates_element(view, variant, &state.style))
                    .collect::<Vec<_>>()
                    .join(","),
            };
            Ok(Ok(rendered(elements)))
        })
        .await?;
    Ok(with_etag(
        json_list(elements.body),
        elements.etag.as_deref(),
    ))
}
