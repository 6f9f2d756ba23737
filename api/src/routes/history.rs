//! `GET /api/v1/history`: the record in force at the end of a day.

use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Days, NaiveDate, TimeZone, Utc};
use ratewire_proto::BankId;
use ratewire_readmodel::store;
use ratewire_readmodel::views::history_response;

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::{day_has_come, query, CurrencyArg, Query};
use crate::state::AppState;
use crate::views::body::json_body;

/// The first instant after `date` in the service time zone.
pub fn end_of_day(date: NaiveDate, tz: chrono_tz::Tz) -> DateTime<Utc> {
    let next = date
        .checked_add_days(Days::new(1))
        .unwrap_or(date)
        .and_hms_opt(0, 0, 0)
        .expect("midnight exists");
    // Midnight can be skipped or doubled by a DST change in a few zones;
    // the earliest valid instant, or an hour later inside a gap, is the
    // start of the next day.
    tz.from_local_datetime(&next)
        .earliest()
        .or_else(|| {
            tz.from_local_datetime(&(next + chrono::Duration::hours(1)))
                .earliest()
        })
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| Utc.from_utc_datetime(&next))
}

query! {
    /// `GET /api/v1/history`: one bank's record of one currency on a day.
    #[derive(Debug, Clone, Copy)]
    pub struct HistoryQuery {
        /// The bank (a positive integer; one never registered: 404)
        pub bank_id as "bankId": BankId,
        /// A calendar day, YYYY-MM-DD (RFC 3339 full-date), in the service time zone; not after today there
        pub date as "date": NaiveDate,
        /// ISO 4217 code, three letters in any case; default USD
        pub currency as "currencyCode": Option<CurrencyArg>,
    }
}

/// The record of one bank and currency in force at the end of a day.
#[utoipa::path(get, path = "/api/v1/history", tag = "history",
    params(HistoryQuery),
    responses(
        (status = 200, description = "success", body = crate::openapi::HistoryResponse),
        (status = 404, description = "Bank not found, Currency not found or No history found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn history(
    _: Authorized,
    State(state): State<AppState>,
    Query(query): Query<HistoryQuery>,
) -> Result<Response> {
    let HistoryQuery {
        bank_id,
        date,
        currency,
    } = query;
    let code = CurrencyArg::or_usd(currency);
    // A day to come has no record yet (the one in force now is not its).
    day_has_come("date", date, state.timezone, Utc::now())?;

    // History stays readable after a bank is deactivated.
    let read = state.views.read.current();
    if store::bank(read.history(), bank_id).await?.is_none() {
        return Err(Error::NotFound("Bank not found"));
    }
    let CurrencyArg::Known(code) = code else {
        return Err(Error::NotFound("Currency not found"));
    };
    if !store::currency_known(read.history(), code).await? {
        return Err(Error::NotFound("Currency not found"));
    }
    let record = store::history(
        read.history(),
        bank_id,
        code,
        end_of_day(date, state.timezone),
    )
    .await?
    .ok_or(Error::NotFound("No history found"))?;
    Ok(json_body(history_response(
        date,
        &record,
        &state.views.style,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_ends_at_the_next_local_midnight() {
        let date = NaiveDate::from_ymd_opt(2026, 11, 20).unwrap();
        assert_eq!(
            end_of_day(date, chrono_tz::UTC),
            "2026-11-21T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            end_of_day(date, chrono_tz::Africa::Addis_Ababa),
            "2026-11-20T21:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
    }
}
