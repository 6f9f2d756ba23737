//! `GET /api/v1/rates/series`: one bank's values of one currency over a
//! range, or the best value across active banks, as JSON or CSV.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use chrono::{DateTime, Duration, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::store;
use ratewire_readmodel::views::{
    bank_series_csv, bank_series_json, best_series_csv, best_series_json, timestamp, Field,
    SeriesOf,
};
use sqlx::PgConnection;

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::{query, start_of_day, Checker, Choice, CurrencyArg, KnownAt, Query, When};
use crate::state::AppState;
use crate::views::body::{csv_body, json_body, next_page_link, wants_csv};
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};

/// The most one `raw` or `hour` answer spans; a longer range is paged.
pub const PAGE_DAYS_FINE: i64 = 31;
/// The most one `day` answer spans: five years.
pub const PAGE_DAYS_DAILY: i64 = 5 * 366;
/// How far past now a board may be dated (publishers' clock skew): no page
/// starts later than this.
const LATEST_BOARD: Duration = Duration::minutes(5);
/// The most publish times of one bank and currency in one millisecond.
const MICROS_PER_MILLI: usize = 1_000;

/// What one point of a series stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Raw,
    Hour,
    Day,
}

impl Choice for Interval {
    const ALL: &'static [Self] = &[Interval::Raw, Interval::Hour, Interval::Day];

    fn name(self) -> &'static str {
        match self {
            Interval::Raw => "raw",
            Interval::Hour => "hour",
            Interval::Day => "day",
        }
    }
}

/// Which rate the best across banks is of.
impl Choice for Field {
    const ALL: &'static [Self] = &Field::ALL;

    fn name(self) -> &'static str {
        self.key()
    }
}

/// How a series is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Csv,
}

impl Choice for Format {
    const ALL: &'static [Self] = &[Format::Json, Format::Csv];

    fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Csv => "csv",
        }
    }
}

query! {
    /// `GET /api/v1/rates/series`: a range of one bank's values, or of the
    /// best across banks.
    #[derive(Debug, Clone, Copy)]
    pub struct SeriesQuery {
        /// The bank; without it, the best value across active banks of `field` per interval
        pub bank_id as "bankId": Option<BankId>,
        /// ISO 4217 code, any case; default USD
        pub currency as "currencyCode": Option<CurrencyArg>,
        /// Start: a date YYYY-MM-DD (its start in the service time zone) or an RFC 3339 time; default 30 days before `to`
        pub from as "from": Option<When>,
        /// End: a date (its end) or an RFC 3339 time; default the end of the interval in progress (today, or this hour)
        pub to as "to": Option<When>,
        /// raw: every published board (needs bankId); hour or day: the value in force at the end of each hour (UTC) or day (service time zone); default day. Any range is answered: an answer spans 31 days at most for raw and hour, five years for day, and 10,000 raw points; `next` links to the rest
        pub interval as "interval": Option<Interval>,
        /// For the best across banks (without bankId): which rate; default cashBuying. With bankId it is refused (a bank's points carry every rate)
        pub field as "field": Option<Field>,
        /// json or csv; default by Accept (text/csv), else json
        pub format as "format": Option<Format>,
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope and kept in `next`);
        /// a final one is immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
    rules = series_rules;
}

/// What one parameter means depends on another: `raw` is a bank's, and
/// `field` chooses among banks, so neither goes with the other's case.
fn series_rules(query: &SeriesQuery, check: &mut Checker<'_>) {
    if query.interval == Some(Interval::Raw) && query.bank_id.is_none() {
        check.refuse(
            "interval",
            "interval=raw needs a bankId (the best across banks is given per hour or day)",
        );
    }
    if query.field.is_some() && query.bank_id.is_some() {
        check.refuse(
            "field",
            "field chooses the rate of the best across banks, without bankId; a bank's points carry every rate",
        );
    }
}

impl Interval {
    fn page_days(self) -> i64 {
        match self {
            Interval::Raw | Interval::Hour => PAGE_DAYS_FINE,
            Interval::Day => PAGE_DAYS_DAILY,
        }
    }

    /// Where a page starting at `from` ends: on an interval's boundary, so
    /// the next page's first interval is not this page's last.
    fn page_end(self, from: DateTime<Utc>, tz: chrono_tz::Tz) -> DateTime<Utc> {
        let days = Duration::days(self.page_days());
        match self {
            Interval::Raw => from + days,
            Interval::Hour => hour_start(from) + days,
            Interval::Day => start_of_day(from.with_timezone(&tz).date_naive() + days, tz),
        }
    }
}

fn hour_start(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(at.timestamp().div_euclid(3600) * 3600, 0).unwrap_or(at)
}

/// `at` without its fraction of a millisecond.
fn floor_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

/// The first whole millisecond at or after `at`.
fn ceil_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    let floor = floor_millis(at);
    if floor == at {
        at
    } else {
        floor + Duration::milliseconds(1)
    }
}

/// What a series request asks for.
struct SeriesRequest {
    bank: Option<BankId>,
    currency: CurrencyArg,
    field: Field,
    interval: Interval,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    /// The `format` asked for, kept in the next page's link.
    format: Option<Format>,
    csv: bool,
    /// The instant the series is read as known at, kept in the next
    /// page's link: the rest of the range is read as known then too.
    as_known_at: Option<KnownAt>,
}

impl SeriesRequest {
    /// What `query` asks for, with its defaults resolved at `now` in `tz`
    /// (the format by `headers`' `Accept` when the query names none).
    fn new(
        query: SeriesQuery,
        headers: &HeaderMap,
        tz: chrono_tz::Tz,
        now: DateTime<Utc>,
    ) -> Result<Self> {
        let interval = query.interval.unwrap_or(Interval::Day);
        // By default, to the end of the interval in progress: the answer
        // stays the same (and keeps its ETag) until something changes.
        let to = query.to.map_or_else(
            || match interval {
                Interval::Day => start_of_day(
                    now.with_timezone(&tz)
                        .date_naive()
                        .succ_opt()
                        .unwrap_or_default(),
                    tz,
                ),
                _ => DateTime::from_timestamp((now.timestamp().div_euclid(3600) + 1) * 3600, 0)
                    .unwrap_or(now),
            },
            |to| to.end(tz),
        );
        let from = query
            .from
            .map_or(to - Duration::days(30), |from| from.start(tz));
        // Times are the API's, to the millisecond: what the answer and its
        // links say is the range, whatever finer time a client gave.
        let (from, to) = (floor_millis(from), ceil_millis(to));
        if from >= to {
            return Err(Error::validation("from", "from must be before to"));
        }
        let csv = match query.format {
            Some(format) => format == Format::Csv,
            None => wants_csv(headers),
        };
        Ok(Self {
            bank: query.bank_id,
            currency: CurrencyArg::or_usd(query.currency),
            field: query.field.unwrap_or(Field::CashBuying),
            interval,
            from,
            to,
            format: query.format,
            csv,
            as_known_at: query.as_known_at,
        })
    }

    /// The link to the rest of the range, from `from` on: every choice
    /// spelled out, and `to` as resolved now, so that a default end does
    /// not move while a client pages.
    fn next_link(&self, currency: CurrencyCode, from: DateTime<Utc>) -> String {
        let mut query = Vec::with_capacity(7);
        if let Some(bank) = self.bank {
            query.push(format!("bankId={bank}"));
        }
        query.push(format!("currencyCode={currency}"));
        query.push(format!("interval={}", self.interval.name()));
        if self.bank.is_none() {
            query.push(format!("field={}", self.field.key()));
        }
        if let Some(format) = self.format {
            query.push(format!("format={}", format.name()));
        }
        for (name, at) in [("from", from), ("to", self.to)] {
            query.push(format!("{name}={}", timestamp(at)));
        }
        if let Some(at) = self.as_known_at {
            query.push(format!("asKnownAt={at}"));
        }
        format!("/api/v1/rates/series?{}", query.join("&"))
    }
}

/// The start of each interval of the range, and the instant whose value
/// it shows (its end, or now for the one in progress); none after now.
fn intervals(
    interval: Interval,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    tz: chrono_tz::Tz,
    now: DateTime<Utc>,
) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let mut spans = Vec::new();
    match interval {
        Interval::Raw => {}
        Interval::Hour => {
            let mut start = hour_start(from);
            while start < to && start <= now {
                let end = start + Duration::hours(1);
                spans.push((start, end.min(now)));
                start = end;
            }
        }
        Interval::Day => {
            let mut day = from.with_timezone(&tz).date_naive();
            loop {
                let start = start_of_day(day, tz);
                let Some(next) = day.succ_opt() else { break };
                if start >= to || start > now {
                    break;
                }
                spans.push((start, start_of_day(next, tz).min(now)));
                day = next;
            }
        }
    }
    spans
}

/// One bank's values of a currency over a range, or the best across active
/// banks; JSON, or CSV with `format=csv` or `Accept: text/csv`.
#[utoipa::path(get, path = "/api/v1/rates/series", tag = "rates",
    params(SeriesQuery),
    responses(
        (status = 200, description = "The points, oldest first (JSON, or CSV with a header row)",
            content((crate::openapi::SeriesResponse = "application/json"), (String = "text/csv"))),
        (status = 404, description = "Bank not found or Currency not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn series(
    _: Authorized,
    State(state): State<AppState>,
    Query(query): Query<SeriesQuery>,
    headers: HeaderMap,
    known: KnownAtRequest,
) -> Result<Response> {
    // Read as known at an instant, the series is what it was then: its
    // default range, its intervals and its last point end then.
    let now = query.as_known_at.map_or_else(Utc::now, KnownAt::instant);
    let tz = state.timezone;
    let request = SeriesRequest::new(query, &headers, tz, now)?;
    let CurrencyArg::Known(currency) = request.currency else {
        return Err(Error::NotFound("Currency not found"));
    };
    let read = state.views.read.current();
    if let Some(at) = request.as_known_at {
        let variant = if request.csv { "csv" } else { "json" };
        let pool = read.history();
        let mut known_read = match state
            .views
            .known_at(&read, pool, known, variant, at)
            .await?
        {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let (body, next) = page(&state, known_read.db(), &request, currency, now).await?;
        let rendered = if request.csv {
            Rendered::Csv(body)
        } else {
            Rendered::Json(body)
        };
        return known_read
            .answer(rendered, next.as_deref().and_then(next_page_link))
            .await;
    }
    let mut db = read.history().acquire().await?;
    let (body, next) = page(&state, &mut db, &request, currency, now).await?;
    let mut response = if request.csv {
        csv_body(body)
    } else {
        json_body(body)
    };
    if let Some(link) = next.as_deref().and_then(next_page_link) {
        response.headers_mut().insert(header::LINK, link);
    }
    Ok(response)
}

/// The page of `request` from its start, as `db` holds it at `now`: its
/// body, and the link to the rest of the range, if any.
async fn page(
    state: &AppState,
    db: &mut PgConnection,
    request: &SeriesRequest,
    currency: CurrencyCode,
    now: DateTime<Utc>,
) -> Result<(String, Option<String>)> {
    let tz = state.timezone;
    let mut page_end = request.interval.page_end(request.from, tz).min(request.to);
    let points = match request.bank {
        Some(bank) => {
            if store::bank(&mut *db, bank).await?.is_none() {
                return Err(Error::NotFound("Bank not found"));
            }
            let (points, end) = bank_points(
                db,
                bank,
                currency,
                request,
                page_end,
                state.series_page_points,
                tz,
                now,
            )
            .await?;
            page_end = end;
            Points::Bank(bank, points)
        }
        None => {
            let spans = intervals(request.interval, request.from, page_end, tz, now);
            let ends: Vec<DateTime<Utc>> = spans.iter().map(|(_, end)| *end).collect();
            let rule = state.views.style.outliers;
            let best = store::best_at_in(db, currency, request.field, &ends, rule).await?;
            Points::Best(
                spans
                    .iter()
                    .zip(best)
                    .filter_map(|((start, _), (_, best))| {
                        best.map(|(bank, value, at)| (*start, bank, value, at))
                    })
                    .collect(),
            )
        }
    };
    // Nothing is dated later than a board can be: no page beyond that.
    let next = (page_end < request.to && page_end <= now + LATEST_BOARD)
        .then(|| request.next_link(currency, page_end));
    let of = SeriesOf {
        currency,
        interval: request.interval.name(),
        from: request.from,
        to: if next.is_some() { page_end } else { request.to },
        next: next.as_deref(),
    };
    let body = match (&points, request.csv) {
        (Points::Bank(_, points), true) => bank_series_csv(of, points),
        (Points::Bank(bank, points), false) => bank_series_json(of, *bank, points),
        (Points::Best(points), true) => best_series_csv(of, points),
        (Points::Best(points), false) => best_series_json(of, request.field, points),
    };
    Ok((body, next))
}

enum Points {
    Bank(BankId, Vec<ratewire_readmodel::views::BankPoint>),
    Best(Vec<ratewire_readmodel::views::BestPoint>),
}

/// A bank's points up to `page_end`, and where they end: at `page_end`,
/// or, for `raw` with more than `most` points to come, where the
/// millisecond of the first one left out begins.
#[allow(clippy::too_many_arguments)]
async fn bank_points(
    db: &mut PgConnection,
    bank: BankId,
    currency: CurrencyCode,
    request: &SeriesRequest,
    page_end: DateTime<Utc>,
    most: usize,
    tz: chrono_tz::Tz,
    now: DateTime<Utc>,
) -> Result<(Vec<ratewire_readmodel::views::BankPoint>, DateTime<Utc>)> {
    if request.interval == Interval::Raw {
        let mut records =
            store::records_between(&mut *db, bank, currency, request.from, page_end, most + 1)
                .await?;
        let mut end = page_end;
        if records.len() > most {
            // Publish times are stored to the microsecond, and links say
            // milliseconds: the page ends where the millisecond of the
            // first point left out begins, and that millisecond's points
            // all go to the next page, so none is on two pages or on none.
            end = floor_millis(records[most].as_of);
            if end <= request.from {
                // Every point of the page is in its first millisecond:
                // that millisecond is the page, however many it holds (at
                // most a thousand, publish times being unique).
                end += Duration::milliseconds(1);
                records = store::records_between(
                    &mut *db,
                    bank,
                    currency,
                    request.from,
                    end,
                    most + MICROS_PER_MILLI,
                )
                .await?;
            }
            records.retain(|r| r.as_of < end);
        }
        return Ok((records.into_iter().map(|r| (r.as_of, r)).collect(), end));
    }
    let spans = intervals(request.interval, request.from, page_end, tz, now);
    let ends: Vec<DateTime<Utc>> = spans.iter().map(|(_, end)| *end).collect();
    let records = store::records_at_in(db, bank, currency, &ends).await?;
    let points = spans
        .iter()
        .zip(records)
        .filter_map(|((start, _), (_, record))| record.map(|r| (*start, r)))
        .collect();
    Ok((points, page_end))
}

#[cfg(test)]
mod tests;
