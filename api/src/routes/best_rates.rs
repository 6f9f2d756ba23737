//! `GET /api/v1/rates/best-rates`: the best buying and selling rates of one
//! currency across the active banks.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::Utc;
use ratewire_readmodel::store;
use ratewire_readmodel::views::best_rates_fingerprinted;

use super::{cached_view, json_body, with_etag, Cached};
use crate::auth::ApiKey;
use crate::error::Result;
use crate::gate::Prefetched;
use crate::requests::{BestRatesRequest, Stored};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/rates/best-rates", get(best_rates))
}

/// The best cash and transactional buying and selling rates of one currency.
#[utoipa::path(get, path = "/api/v1/rates/best-rates", tag = "rates",
    params(("currencyCode" = String, Query, pattern = "^[A-Za-z]{3}$", description = "ISO 4217 code, three letters in any case (one no active bank quotes: 404)")),
    responses(
        (status = 200, description = "success", body = crate::openapi::BestRatesResponse),
        (status = 404, description = "Currency not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn best_rates(
    _: ApiKey,
    State(state): State<AppState>,
    prefetched: Prefetched,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let request = BestRatesRequest::parse(query.as_deref())?;
    let code = request.code;
    let read = state.read.current();
    let view = request.view(&read.views);
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
            let now = Utc::now();
            Ok(match store::best_rates(&read.pool, code, now).await? {
                // Fingerprinted as the projector does, without the
                // render time: the same content keeps its tag wherever
                // it was rendered.
                Some(entries) => {
                    let (body, digest) = best_rates_fingerprinted(&entries, now);
                    Ok(Stored {
                        body: Bytes::from(body),
                        etag: Some(digest),
                    })
                }
                None => Err("Currency not found"),
            })
        })
        .await?;
    Ok(with_etag(json_body(body.body), body.etag.as_deref()))
}
