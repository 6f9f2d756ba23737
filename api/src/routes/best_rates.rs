//! `GET /api/v1/rates/best-rates`: the best buying and selling rates of one
//! currency across the active banks.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::Utc;
use ratewire_projector::store;
use ratewire_projector::views::best_rates_response;

use super::{cached_view, json_body, AppState};
use crate::auth::ApiKey;
use crate::error::{Error, Result};
use crate::query::{Checker, CurrencyArg, Params};

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/rates/best-rates", get(best_rates))
}

async fn best_rates(
    _: ApiKey,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let params = Params::parse(query.as_deref())?;
    let mut check = Checker::new(&params);
    let code = check.currency("currencyCode", None);
    check.finish()?;
    let Some(CurrencyArg::Known(code)) = code else {
        return Err(Error::NotFound("Currency not found"));
    };

    if let Some(body) = cached_view(&state, &state.views.best(code)).await {
        return Ok(json_body(body));
    }
    let now = Utc::now();
    let entries = store::best_rates(&state.pool, code, now)
        .await?
        .ok_or(Error::NotFound("Currency not found"))?;
    Ok(json_body(best_rates_response(&entries, now)))
}
