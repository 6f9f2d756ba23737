use super::*;
use crate::query::FromQuery;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

impl SeriesRequest {
    fn parse(
        query: Option<&str>,
        headers: &HeaderMap,
        tz: chrono_tz::Tz,
        now: DateTime<Utc>,
    ) -> Result<Self> {
        let query = SeriesQuery::parse(query).map_err(Error::Validation)?;
        Self::new(query, headers, tz, now)
    }
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
fn pages_end_on_a_boundary_of_their_interval() {
    let tz = chrono_tz::Africa::Addis_Ababa;
    let from = at("2026-01-10T10:30:00Z");
    assert_eq!(Interval::Raw.page_end(from, tz), at("2026-02-10T10:30:00Z"));
    assert_eq!(
        Interval::Hour.page_end(from, tz),
        at("2026-02-10T10:00:00Z")
    );
    // Days start at 21:00 UTC in Addis Ababa; 10:30 UTC is on the 10th.
    assert_eq!(Interval::Day.page_end(from, tz), at("2031-01-13T21:00:00Z"));
}

#[test]
fn the_next_link_spells_out_every_choice() {
    let now = at("2026-11-23T10:00:00Z");
    let request = SeriesRequest::parse(
        Some("currencyCode=eur&interval=hour&format=csv&from=2026-01-01"),
        &HeaderMap::new(),
        chrono_tz::UTC,
        now,
    )
    .unwrap();
    let eur = CurrencyCode::parse("EUR").unwrap();
    assert_eq!(
        request.next_link(eur, at("2026-02-01T00:00:00Z")),
        "/api/v1/rates/series?currencyCode=EUR&interval=hour&field=cashBuying&format=csv\
         &from=2026-02-01T00:00:00.000Z&to=2026-11-23T11:00:00.000Z"
    );
}

#[test]
fn read_as_known_at_an_instant_the_series_ends_then_and_its_next_page_too() {
    let query = SeriesQuery::parse(Some(
        "bankId=1&interval=hour&from=2026-01-01&asKnownAt=2026-03-01T12:30:00.25Z",
    ))
    .unwrap();
    // The handler's "now" is the instant.
    let then = query.as_known_at.unwrap().instant();
    let request = SeriesRequest::new(query, &HeaderMap::new(), chrono_tz::UTC, then).unwrap();
    assert_eq!(
        request.to,
        at("2026-03-01T13:00:00Z"),
        "the hour in progress then"
    );
    let usd = CurrencyCode::parse("USD").unwrap();
    assert_eq!(
        request.next_link(usd, at("2026-02-01T00:00:00Z")),
        "/api/v1/rates/series?bankId=1&currencyCode=USD&interval=hour\
         &from=2026-02-01T00:00:00.000Z&to=2026-03-01T13:00:00.000Z\
         &asKnownAt=2026-03-01T12:30:00.250Z"
    );
}

#[test]
fn any_range_is_accepted_and_raw_needs_a_bank() {
    let now = at("2026-11-23T10:00:00Z");
    let parse = |q: &str| SeriesRequest::parse(Some(q), &HeaderMap::new(), chrono_tz::UTC, now);
    assert!(parse("bankId=1&interval=raw&from=2026-01-01&to=2026-03-01").is_ok());
    assert!(parse("interval=hour&from=0001-01-01&to=9999-12-31").is_ok());
    assert!(parse("bankId=1&interval=day&from=2021-01-01&to=2026-01-01").is_ok());
    assert!(parse("interval=raw").is_err());
    assert!(parse("from=2026-11-23&to=2026-11-01").is_err());
    let Err(Error::Validation(errors)) = parse("bankId=1&field=cashSelling&currencyCode=US1")
    else {
        panic!("field with a bank")
    };
    assert_eq!(
        errors.keys().collect::<Vec<_>>(),
        ["currencyCode"],
        "a rule between parameters waits for each to be read"
    );
    let Err(Error::Validation(errors)) = parse("bankId=1&field=cashSelling") else {
        panic!("field with a bank")
    };
    assert!(errors["field"][0].contains("without bankId"), "{errors:?}");
    let csv = parse("format=csv").unwrap();
    assert!(csv.csv);
    let mut headers = HeaderMap::new();
    headers.insert(
        header::ACCEPT,
        axum::http::HeaderValue::from_static("text/csv"),
    );
    let by_accept = SeriesRequest::parse(None, &headers, chrono_tz::UTC, now).unwrap();
    assert!(by_accept.csv);
}
