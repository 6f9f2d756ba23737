//! `GET /api/v1/reference-rates`: the National Bank's reference rates, as
//! published, for the latest day or the day in force on a date.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use chrono::{Days, NaiveDate};
use ratewire_proto::{CurrencyCode, NATIONAL_BANK};
use ratewire_readmodel::store::{self, in_force, ReferenceRow};
use ratewire_readmodel::views::ReferencePoint;

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::{days_in_order, query, CurrencyArg, KnownAt, Query};
use crate::state::AppState;
use crate::views::answer::with_etag;
use crate::views::body::json_body;
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};
use crate::views::reference::{self, Reader};
use crate::views::requests;

query! {
    /// `GET /api/v1/reference-rates`: one day's reference rates.
    #[derive(Debug, Clone, Copy)]
    pub struct ReferenceRatesQuery {
        /// ISO 4217 code, three letters in any case; without it, `data` is
        /// every currency of the day
        pub currency as "currencyCode": Option<CurrencyArg>,
        /// YYYY-MM-DD, a day in Addis Ababa: the reference in force at its
        /// end; without it, the latest
        pub date as "date": Option<NaiveDate>,
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
}

query! {
    /// `GET /api/v1/reference-rates/series`: one currency's reference
    /// rates over a range of days.
    #[derive(Debug, Clone, Copy)]
    pub struct ReferenceSeriesQuery {
        /// ISO 4217 code, three letters in any case
        pub currency as "currencyCode": CurrencyArg,
        /// The first day, YYYY-MM-DD; default the 30 days that end with
        /// `to` (as a rates series); not after `to`
        pub from as "from": Option<NaiveDate>,
        /// The last day, YYYY-MM-DD; default today in Addis Ababa
        pub to as "to": Option<NaiveDate>,
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
}

/// How many days a reference series spans when `from` is not given, `to`
/// included: as many as a rates series.
const DEFAULT_DAYS: u64 = 30;

/// The reference rates of one currency, or of every currency, on the
/// latest day published or on the day in force at the end of `date` (the
/// last day published on or before it: a Saturday gives Friday's).
#[utoipa::path(get, path = requests::REFERENCE_RATES, tag = "reference rates",
    params(ReferenceRatesQuery),
    responses(
        (status = 200, description = "success: `data` is one currency's reference rate, or (without `currencyCode`) an array of every currency's", body = crate::openapi::ReferenceRateResponse),
        (status = 404, description = "No reference rate on or before the date (or for that currency on the day in force)", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn reference_rates(
    _: Authorized,
    State(state): State<AppState>,
    Query(query): Query<ReferenceRatesQuery>,
    known: KnownAtRequest,
) -> Result<Response> {
    let ReferenceRatesQuery {
        currency,
        date,
        as_known_at,
    } = query;
    let code = match currency {
        None => None,
        Some(CurrencyArg::Known(code)) => Some(code),
        Some(CurrencyArg::Unknown) => return Err(Error::NotFound("Currency not found")),
    };
    if let Some(at) = as_known_at {
        let model = state.views.read.current();
        let mut read = match state
            .views
            .known_at(&model, &model.pool, known, "", at)
            .await?
        {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let days = Reader::KnownAt(read.db(), &state.views.style);
        let body = answer(days, code, date).await?;
        let body = String::from_utf8_lossy(&body.body).into_owned();
        return read.answer(Rendered::Json(body), None).await;
    }
    let body = answer(Reader::Live(&state.views), code, date).await?;
    Ok(with_etag(json_body(body.body), body.etag.as_deref()))
}

/// The answer from the reference `days`: the day in force at the end of
/// `date` (or the latest), whole or of `code` alone, with its `ETag` when
/// it is the day as stored.
async fn answer(
    mut days: Reader<'_>,
    code: Option<CurrencyCode>,
    date: Option<NaiveDate>,
) -> Result<Answer> {
    let dates = days.dates(NATIONAL_BANK).await?;
    let day = match date {
        Some(date) => in_force(&dates, date),
        None => dates.last().copied(),
    }
    .ok_or(Error::NotFound("No reference rate on or before this date"))?;
    let stored = days.day(NATIONAL_BANK, day).await?;
    let Some(code) = code else {
        return Ok(Answer {
            body: stored.body,
            etag: stored.etag,
        });
    };
    let read = reference::read_day(&stored)?;
    let (_, element) = read
        .elements
        .iter()
        .find(|(currency, _)| *currency == code)
        .ok_or(Error::NotFound(
            "Currency not found in the reference in force",
        ))?;
    // The conditional layer tags it: the element's own bytes decide.
    Ok(Answer {
        body: Bytes::from(format!(
            r#"{{"message":"success","status":200,"data":{}}}"#,
            element.get()
        )),
        etag: None,
    })
}

/// An answer's body, and its `ETag` when it has one already.
struct Answer {
    body: Bytes,
    etag: Option<String>,
}

/// One currency's reference rates on every day published in a range (a
/// chart's reference line): by default the 30 days to today.
#[utoipa::path(get, path = requests::REFERENCE_SERIES, tag = "reference rates",
    params(ReferenceSeriesQuery),
    responses(
        (status = 200, description = "success: the days published in the range, oldest first (none: empty)", body = crate::openapi::ReferenceSeriesResponse),
        (status = 404, description = "Currency not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn reference_series(
    _: Authorized,
    State(state): State<AppState>,
    Query(query): Query<ReferenceSeriesQuery>,
    known: KnownAtRequest,
) -> Result<Response> {
    let ReferenceSeriesQuery {
        currency,
        from,
        to,
        as_known_at,
    } = query;
    // As known at an instant, "today" is that instant's.
    let now = as_known_at.map_or_else(chrono::Utc::now, KnownAt::instant);
    // Unbounded ranges stay small: one point per weekday published (about
    // 260 a year, 80 bytes each).
    let to = to.unwrap_or_else(|| ratewire_proto::reference::reference_day(now));
    let from = from.unwrap_or_else(|| {
        to.checked_sub_days(Days::new(DEFAULT_DAYS - 1))
            .unwrap_or(NaiveDate::MIN)
    });
    days_in_order(from, to)?;
    let CurrencyArg::Known(code) = currency else {
        return Err(Error::NotFound("Currency not found"));
    };
    let read = state.views.read.current();
    if let Some(at) = as_known_at {
        let pool = read.history();
        let mut known_read = match state.views.known_at(&read, pool, known, "", at).await? {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let points =
            store::reference_series(known_read.db(), NATIONAL_BANK, code, from, to).await?;
        let body = series_body(&state, code, &points);
        return known_read.answer(Rendered::Json(body), None).await;
    }
    let points = store::reference_series(read.history(), NATIONAL_BANK, code, from, to).await?;
    Ok(json_body(series_body(&state, code, &points)))
}

/// A reference series' body.
fn series_body(
    state: &AppState,
    code: CurrencyCode,
    points: &[(NaiveDate, ReferenceRow)],
) -> String {
    let body = ratewire_readmodel::views::Envelope {
        message: "success",
        status: 200,
        data: SeriesJson {
            currency: ratewire_readmodel::views::CurrencyJson {
                code,
                style: &state.views.style,
            },
            source: NATIONAL_BANK,
            points: points
                .iter()
                .map(|(date, row)| ReferencePoint { date: *date, row })
                .collect(),
        },
    };
    serde_json::to_string(&body).expect("the answer serializes")
}

#[derive(serde::Serialize)]
struct SeriesJson<'a> {
    currency: ratewire_readmodel::views::CurrencyJson<'a>,
    source: &'static str,
    points: Vec<ReferencePoint<'a>>,
}
