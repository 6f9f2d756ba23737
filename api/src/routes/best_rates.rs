//! `GET /api/v1/rates/best-rates`: the best buying and selling rates of one
//! currency across the active banks.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::response::Response;
use chrono::Utc;
use ratewire_readmodel::store;
use ratewire_readmodel::views::best_rates_fingerprinted;

use crate::access::auth::ApiKey;
use crate::error::Result;
use crate::state::AppState;
use crate::views::requests;
use crate::views::requests::{BestRatesRequest, Stored};
use crate::views::{Prefetched, Shape};

/// The best cash and transactional buying and selling rates of one currency.
#[utoipa::path(get, path = requests::BEST_RATES, tag = "rates",
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
    let read = state.views.read.current();
    let view = request.view(&read.views);
    state
        .views
        .serve(prefetched, read, &view, Shape::Whole, |read| async move {
            let now = Utc::now();
            Ok(match store::best_rates(&read.pool, code, now).await? {
                // Fingerprinted as the projector does, without the render
                // time: the same content keeps its tag wherever it was
                // rendered.
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
        .await
}
