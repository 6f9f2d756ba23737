//! `GET /api/v1/history`: the record in force at the end of a day.

use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Days, NaiveDate, TimeZone, Utc};
use ratewire_proto::BankId;
use ratewire_readmodel::store;
use ratewire_readmodel::views::history_response;
use sqlx::PgConnection;

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::{day_has_come, query, CurrencyArg, KnownAt, Query};
use crate::state::AppState;
use crate::views::body::json_body;
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};

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
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
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
    known: KnownAtRequest,
) -> Result<Response> {
    let HistoryQuery {
        bank_id,
        date,
        currency,
        as_known_at,
    } = query;
    let code = CurrencyArg::or_usd(currency);
    let read = state.views.read.current();
    if let Some(at) = as_known_at {
        // A day to come then had no record yet.
        day_has_come("date", date, state.timezone, at.instant())?;
        let pool = read.history();
        let mut known_read = match state.views.known_at(&read, pool, known, "", at).await? {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let body = answer(&state, known_read.db(), bank_id, date, code).await?;
        return known_read.answer(Rendered::Json(body), None).await;
    }
    // A day to come has no record yet (the one in force now is not its).
    day_has_come("date", date, state.timezone, Utc::now())?;
    let mut db = read.history().acquire().await?;
    Ok(json_body(
        answer(&state, &mut db, bank_id, date, code).await?,
    ))
}

/// The body: the record of `bank_id` and `code` in force at the end of
/// `date`, as `db` holds them.
async fn answer(
    state: &AppState,
    db: &mut PgConnection,
    bank_id: BankId,
    date: NaiveDate,
    code: CurrencyArg,
) -> Result<String> {
    // History stays readable after a bank is deactivated.
    if store::bank(&mut *db, bank_id).await?.is_none() {
        return Err(Error::NotFound("Bank not found"));
    }
    let CurrencyArg::Known(code) = code else {
        return Err(Error::NotFound("Currency not found"));
    };
    if !store::currency_known(&mut *db, code).await? {
        return Err(Error::NotFound("Currency not found"));
    }
    let record = store::history(&mut *db, bank_id, code, end_of_day(date, state.timezone))
        .await?
        .ok_or(Error::NotFound("No history found"))?;
    Ok(history_response(date, &record, &state.views.style))
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
