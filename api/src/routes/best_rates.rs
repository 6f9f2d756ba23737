//! `GET /api/v1/rates/best-rates`: the best buying and selling rates of one
//! currency across the active banks.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use ratewire_readmodel::quality::OutlierRule;
use ratewire_readmodel::store;
use ratewire_readmodel::views::best_rates_fingerprinted;
use sqlx::PgConnection;

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::CurrencyArg;
use crate::state::AppState;
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};
use crate::views::requests::{self, BestRatesQuery, Stored};
use crate::views::{Shape, ViewRead};

const MISSING: &str = "Currency not found";

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
    known: KnownAtRequest,
) -> Result<Response> {
    let CurrencyArg::Known(code) = query.currency else {
        return Err(Error::NotFound(MISSING));
    };
    if let Some(at) = query.as_known_at {
        let (model, pool) = (&named.read, &named.read.pool);
        let mut read = match state.views.known_at(model, pool, known, "", at).await? {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let now = read.now();
        let stored = render(read.db(), code, now, state.views.style.outliers)
            .await?
            .map_err(Error::NotFound)?;
        let body = String::from_utf8_lossy(&stored.body).into_owned();
        return read.answer(Rendered::Json(body), None).await;
    }
    let outliers = state.views.style.outliers;
    state
        .views
        .serve(named, MISSING, Shape::Whole, |read| async move {
            let mut db = read.pool.acquire().await?;
            render(&mut db, code, Utc::now(), outliers).await
        })
        .await
}

/// The answer for `code` at `now`, fingerprinted as the projector does,
/// without the render time: the same content keeps its tag wherever it was
/// rendered.
async fn render(
    db: &mut PgConnection,
    code: CurrencyCode,
    now: DateTime<Utc>,
    outliers: OutlierRule,
) -> Result<std::result::Result<Stored, &'static str>> {
    Ok(match store::best_rates_in(db, code, now, outliers).await? {
        Some(entries) => {
            let (body, digest) = best_rates_fingerprinted(&entries, now);
            Ok(Stored {
                body: Bytes::from(body),
                etag: Some(digest),
            })
        }
        None => Err(MISSING),
    })
}
