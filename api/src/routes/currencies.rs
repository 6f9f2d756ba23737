//! `GET /api/v1/currencies`: currencies active banks quote, most quoted first.

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use ratewire_readmodel::store;
use ratewire_readmodel::views::currencies_response;

use super::fallback::rendered;
use super::{cached_view, json_body, with_etag, Cached};
use crate::auth::ApiKey;
use crate::error::Result;
use crate::gate::Prefetched;
use crate::requests::ViewRef;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/currencies", get(currencies))
}

/// Currencies quoted by at least one active bank, most quoted first.
#[utoipa::path(get, path = "/api/v1/currencies", tag = "currencies",
    responses((status = 200, description = "success", body = crate::openapi::CurrenciesResponse), crate::openapi::CommonErrors))]
pub async fn currencies(
    _: ApiKey,
    State(state): State<AppState>,
    prefetched: Prefetched,
) -> Result<Response> {
    let read = state.read.current();
    let view = ViewRef::new(&read.views, read.views.currencies());
    let key = &view.key;
    let cached = match cached_view(&state, prefetched, &view).await {
        Cached::Found(stored) => {
            return Ok(with_etag(json_body(stored.body), stored.etag.as_deref()))
        }
        cached => cached,
    };
    let body = state
        .fallbacks
        .render(cached.shared(&state), key, || async {
            let counts = store::currency_counts(&read.pool).await?;
            Ok(Ok(rendered(currencies_response(&counts, &state.style))))
        })
        .await?;
    Ok(with_etag(json_body(body.body), body.etag.as_deref()))
}
