//! `GET /api/v1/rates/best-rates`: the best buying and selling rates of one
//! currency across the active banks.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use chrono::Utc;
use ratewire_readmodel::store;
use ratewire_readmodel::views::best_rates_fingerprinted;

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::CurrencyArg;
use crate::state::AppState;
use crate::views::requests::{self, BestRatesQuery, Stored};
use crate::views::{Shape, ViewRead};

/// The best cash and transactional buying and selling rates of one currency.
#[utoipa::path(get, path = requests::BEST_RATES, tag = "rates",
    params(BestRatesQuery),
    responses(
        (status = 200, description = "success", body = crate::openapi::BestRatesResponse),
        (status = 404, description = "Currency not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn best_rates(
    _: Authorized,
    State(state): State<AppState>,
    ViewRead { query, named }: ViewRead<BestRatesQuery>,
) -> Result<Response> {
    let missing = "Currency not found";
    let CurrencyArg::Known(code) = query.currency else {
        return Err(Error::NotFound(missing));
    };
    state
        .views
        .serve(named, missing, Shape::Whole, |read| async move {
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
                None => Err(missing),
            })
        })
        .await
}
