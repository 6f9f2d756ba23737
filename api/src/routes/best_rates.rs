//! `GET /api/v1/rates/best-rates`: the best buying and selling rates of one
//! currency across the active banks.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::Utc;
use ratewire_projector::redis_views::Keys;
use ratewire_projector::store;
use ratewire_projector::views::best_rates_response;
use ratewire_proto::CurrencyCode;

use super::{cached_view, json_body, AppState, Prefetched};
use crate::auth::ApiKey;
use crate::error::{Error, Result};
use crate::query::{Checker, CurrencyArg, Params};

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/rates/best-rates", get(best_rates))
}

/// The currency asked for; 404 for a well-formed code nobody quotes.
fn argument(query: Option<&str>) -> Result<CurrencyCode> {
    let params = Params::parse(query)?;
    let mut check = Checker::new(&params);
    let code = check.currency("currencyCode", None);
    check.finish()?;
    match code {
        Some(CurrencyArg::Known(code)) => Ok(code),
        _ => Err(Error::NotFound("Currency not found")),
    }
}

/// The view a valid query is answered from (see [`super::view_key`]).
pub fn view_key(views: &Keys, query: Option<&str>) -> Option<String> {
    argument(query).ok().map(|code| views.best(code))
}

/// The best cash and transactional buying and selling rates of one currency.
#[utoipa::path(get, path = "/api/v1/rates/best-rates", tag = "rates",
    params(("currencyCode" = String, Query, description = "ISO 4217 code, any case")),
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
    let code = argument(query.as_deref())?;
    let read = state.read.current();
    if let Some(body) = cached_view(&state, prefetched, &read.views.best(code)).await {
        return Ok(json_body(body));
    }
    let now = Utc::now();
    let entries = store::best_rates(&read.pool, code, now)
        .await?
        .ok_or(Error::NotFound("Currency not found"))?;
    Ok(json_body(best_rates_response(&entries, now)))
}
