//! `GET /api/v1/rates/series`: one bank's values of one currency over a
//! range, or the best value across active banks, as JSON or CSV.

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Duration, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::store;
use ratewire_readmodel::views::{
    bank_series_csv, bank_series_json, best_series_csv, best_series_json, Field, SeriesOf,
};

use super::json_body;
use crate::auth::ApiKey;
use crate::error::{Error, Result};
use crate::query::{start_of_day, Checker, CurrencyArg, Params};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/rates/series", get(series))
}

/// The longest range of `raw` and `hour` series.
pub const MOST_DAYS_FINE: i64 = 31;
/// The longest range of `day` series: five years.
pub const MOST_DAYS_DAILY: i64 = 5 * 366;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interval {
    Raw,
    Hour,
    Day,
}

impl Interval {
    fn name(self) -> &'static str {
        match self {
            Interval::Raw => "raw",
            Interval::Hour => "hour",
            Interval::Day => "day",
        }
    }

    fn most_days(self) -> i64 {
        match self {
            Interval::Raw | Interval::Hour => MOST_DAYS_FINE,
            Interval::Day => MOST_DAYS_DAILY,
        }
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
    csv: bool,
}

impl SeriesRequest {
    fn parse(
        query: Option<&str>,
        headers: &HeaderMap,
        tz: chrono_tz::Tz,
        now: DateTime<Utc>,
    ) -> Result<Self> {
        let params = Params::parse(query)?;
        let mut check = Checker::new(&params);
        let bank = check.bank_id("bankId", false);
        let currency = check.currency("currencyCode", Some("USD"));
        let interval = check
            .choice("interval", &["raw", "hour", "day"], "day")
            .map(|i| match i {
                "raw" => Interval::Raw,
                "hour" => Interval::Hour,
                _ => Interval::Day,
            });
        let field = check
            .choice(
                "field",
                &[
                    "cashBuying",
                    "cashSelling",
                    "transactionalBuying",
                    "transactionalSelling",
                ],
                "cashBuying",
            )
            .and_then(|key| Field::ALL.into_iter().find(|f| f.key() == key));
        let format = check.choice("format", &["json", "csv"], "");
        // By default, to the end of the interval in progress: the answer
        // stays the same (and keeps its ETag) until something changes.
        let to = check
            .instant("to", tz, true)
            .unwrap_or_else(|| match interval {
                Some(Interval::Day) => start_of_day(
                    now.with_timezone(&tz)
                        .date_naive()
                        .succ_opt()
                        .unwrap_or_default(),
                    tz,
                ),
                _ => DateTime::from_timestamp((now.timestamp().div_euclid(3600) + 1) * 3600, 0)
                    .unwrap_or(now),
            });
        let days = interval.map_or(30, |i| i.most_days().min(30));
        let from = check
            .instant("from", tz, false)
            .unwrap_or(to - Duration::days(days));
        check.finish()?;
        let (Some(currency), Some(interval), Some(field), Some(format)) =
            (currency, interval, field, format)
        else {
            unreachable!("finish() reports every bad parameter");
        };
        if from >= to {
            return Err(Error::validation("from", "from must be before to"));
        }
        if to - from > Duration::days(interval.most_days()) {
            return Err(Error::validation(
                "to",
                format!(
                    "the range is longer than {} days, the most interval={} returns{}",
                    interval.most_days(),
                    interval.name(),
                    if interval == Interval::Day {
                        ""
                    } else {
                        " (interval=day returns up to five years)"
                    }
                ),
            ));
        }
        if interval == Interval::Raw && bank.is_none() {
            return Err(Error::validation(
                "interval",
                "interval=raw needs a bankId (the best across banks is given per hour or day)",
            ));
        }
        let csv = match format {
            "csv" => true,
            "json" => false,
            _ => wants_csv(headers),
        };
        Ok(Self {
            bank,
            currency,
            field,
            interval,
            from,
            to,
            csv,
        })
    }
}

/// Whether `Accept` prefers CSV to JSON.
fn wants_csv(headers: &HeaderMap) -> bool {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    accept.contains("text/csv") && !accept.contains("application/json")
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
            let mut start = DateTime::from_timestamp(from.timestamp().div_euclid(3600) * 3600, 0)
                .unwrap_or(from);
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
    params(
        ("bankId" = Option<i64>, Query, minimum = 1, description = "The bank; without it, the best value across active banks of `field` per interval"),
        ("currencyCode" = Option<String>, Query, pattern = "^[A-Za-z]{3}$", description = "ISO 4217 code, any case; default USD"),
        ("from" = Option<String>, Query, description = "Start: a date YYYY-MM-DD (its start in the service time zone) or an RFC 3339 time; default 30 days before `to`"),
        ("to" = Option<String>, Query, description = "End: a date (its end) or an RFC 3339 time; default the end of the interval in progress (today, or this hour)"),
        ("interval" = Option<String>, Query, pattern = "^(raw|hour|day)$", description = "raw: every published board (31 days at most, needs bankId); hour or day: the value in force at the end of each hour (UTC, 31 days at most) or day (service time zone, five years at most); default day"),
        ("field" = Option<String>, Query, pattern = "^(cashBuying|cashSelling|transactionalBuying|transactionalSelling)$", description = "For the best across banks: which rate; default cashBuying"),
        ("format" = Option<String>, Query, pattern = "^(json|csv)$", description = "json or csv; default by Accept (text/csv), else json"),
    ),
    responses(
        (status = 200, description = "The points, oldest first (JSON, or CSV with a header row)",
            content((crate::openapi::SeriesResponse = "application/json"), (String = "text/csv"))),
        (status = 404, description = "Bank not found or Currency not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn series(
    _: ApiKey,
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let now = Utc::now();
    let request = SeriesRequest::parse(query.as_deref(), &headers, state.timezone, now)?;
    let CurrencyArg::Known(currency) = request.currency else {
        return Err(Error::NotFound("Currency not found"));
    };
    let read = state.read.current();
    let of = SeriesOf {
        currency,
        interval: request.interval.name(),
        from: request.from,
        to: request.to,
    };
    let body = match request.bank {
        Some(bank) => {
            if store::bank(read.history(), bank).await?.is_none() {
                return Err(Error::NotFound("Bank not found"));
            }
            let points = bank_points(
                read.history(),
                bank,
                currency,
                &request,
                state.timezone,
                now,
            )
            .await?;
            if request.csv {
                bank_series_csv(&points)
            } else {
                bank_series_json(of, bank, &points)
            }
        }
        None => {
            let spans = intervals(
                request.interval,
                request.from,
                request.to,
                state.timezone,
                now,
            );
            let ends: Vec<DateTime<Utc>> = spans.iter().map(|(_, end)| *end).collect();
            let best = store::best_at(read.history(), currency, request.field, &ends).await?;
            let points: Vec<_> = spans
                .iter()
                .zip(best)
                .filter_map(|((start, _), (_, best))| {
                    best.map(|(bank, value, at)| (*start, bank, value, at))
                })
                .collect();
            if request.csv {
                best_series_csv(&points)
            } else {
                best_series_json(of, request.field, &points)
            }
        }
    };
    Ok(if request.csv {
        csv_body(body)
    } else {
        json_body(body)
    })
}

async fn bank_points(
    pool: &sqlx::PgPool,
    bank: BankId,
    currency: CurrencyCode,
    request: &SeriesRequest,
    tz: chrono_tz::Tz,
    now: DateTime<Utc>,
) -> Result<Vec<ratewire_readmodel::views::BankPoint>> {
    if request.interval == Interval::Raw {
        let records =
            store::records_between(pool, bank, currency, request.from, request.to).await?;
        return Ok(records.into_iter().map(|r| (r.as_of, r)).collect());
    }
    let spans = intervals(request.interval, request.from, request.to, tz, now);
    let ends: Vec<DateTime<Utc>> = spans.iter().map(|(_, end)| *end).collect();
    let records = store::records_at(pool, bank, currency, &ends).await?;
    Ok(spans
        .iter()
        .zip(records)
        .filter_map(|((start, _), (_, record))| record.map(|r| (*start, r)))
        .collect())
}

fn csv_body(body: String) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn days_are_the_service_zones_and_the_last_shows_now() {
        let tz = chrono_tz::Africa::Addis_Ababa;
        let spans = intervals(
            Interval::Day,
            at("2026-11-20T21:00:00Z"),
            at("2026-11-23T21:00:00Z"),
            tz,
            at("2026-11-23T10:00:00Z"),
        );
        assert_eq!(
            spans,
            [
                (at("2026-11-20T21:00:00Z"), at("2026-11-21T21:00:00Z")),
                (at("2026-11-21T21:00:00Z"), at("2026-11-22T21:00:00Z")),
                (at("2026-11-22T21:00:00Z"), at("2026-11-23T10:00:00Z")),
            ]
        );
    }

    #[test]
    fn hours_start_on_the_hour() {
        let spans = intervals(
            Interval::Hour,
            at("2026-11-23T08:30:00Z"),
            at("2026-11-23T10:00:00Z"),
            chrono_tz::UTC,
            at("2026-11-24T00:00:00Z"),
        );
        assert_eq!(
            spans,
            [
                (at("2026-11-23T08:00:00Z"), at("2026-11-23T09:00:00Z")),
                (at("2026-11-23T09:00:00Z"), at("2026-11-23T10:00:00Z")),
            ]
        );
    }

    #[test]
    fn ranges_are_bounded_and_raw_needs_a_bank() {
        let now = at("2026-11-23T10:00:00Z");
        let parse = |q: &str| SeriesRequest::parse(Some(q), &HeaderMap::new(), chrono_tz::UTC, now);
        assert!(parse("bankId=1&interval=raw&from=2026-01-01&to=2026-03-01").is_err());
        assert!(parse("bankId=1&interval=day&from=2021-01-01&to=2026-01-01").is_ok());
        assert!(parse("interval=raw").is_err());
        assert!(parse("from=2026-11-23&to=2026-11-01").is_err());
        let csv = parse("format=csv").unwrap();
        assert!(csv.csv);
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("text/csv"));
        let by_accept = SeriesRequest::parse(None, &headers, chrono_tz::UTC, now).unwrap();
        assert!(by_accept.csv);
    }
}
