//! Time series, conversion, conditional requests (the API in process: see
//! `super::world::World`) and cross-origin reads, each answer checked
//! against the API's OpenAPI document.

use chrono::{Datelike, Duration, Utc};
use ratewire_e2e::{ago, Board, Stack};

use super::world::World;
use serde_json::Value;

/// A board of `rates` (currency, buying, selling), each quoted the same for
/// cash and transactions.
fn board(rates: &[(&str, &str, &str)], as_of: &str) -> Board {
    rates.iter().fold(Board::at(as_of), |board, &(c, b, s)| {
        board.rate(c, b, s).transactional(c, b, s)
    })
}

/// Two banks with USD over three days, and EUR at the first.
async fn two_banks(world: &mut World) -> anyhow::Result<(i64, i64, String)> {
    let key = world.api_key("series").await?;
    let a = world.register_bank("CBE", "CBE").await?;
    let b = world.register_bank("AWASH", "Awash").await?;
    for (days, usd) in [(2, "150.5"), (1, "151.00"), (0, "152")] {
        let as_of = ago(days, 1);
        world
            .publish(
                a,
                &board(&[("USD", usd, "160"), ("EUR", "170", "175")], &as_of),
            )
            .await?;
    }
    world
        .publish(b, &board(&[("USD", "149", "158")], &ago(1, 2)))
        .await?;
    Ok((a, b, key))
}

#[tokio::test]
async fn days_and_hours_carried_over_a_weekend_say_from_which_board() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("weekend").await?;
    let bank = world.register_bank("WKND", "Weekend Bank").await?;
    // The Friday of two weeks ago at 09:00 UTC (the service time zone), and
    // the Monday after it.
    let today = Utc::now().date_naive();
    let friday = today - Duration::days(14 + i64::from(today.weekday().num_days_from_monday()))
        + Duration::days(4);
    let at = |day: chrono::NaiveDate| format!("{day}T09:00:00Z");
    let monday = friday + Duration::days(3);
    world
        .publish(bank, &board(&[("USD", "155.10", "158")], &at(friday)))
        .await?;
    world
        .publish(bank, &board(&[("USD", "155.30", "158")], &at(monday)))
        .await?;
    let friday_board = format!("{friday}T09:00:00.000Z");

    let (status, days) = world
        .get(
            &format!("/api/v1/rates/series?bankId={bank}&from={friday}&to={monday}"),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200, "{days}");
    let carried: Vec<&Value> = days["data"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["carriedFrom"])
        .collect();
    let from_friday = Value::from(friday_board.as_str());
    assert_eq!(
        carried,
        [&Value::Null, &from_friday, &from_friday, &Value::Null],
        "Friday's and Monday's own boards, the weekend carried: {days}"
    );

    // Saturday 00:00-01:00 UTC is carried; Friday 09:00-10:00 is not.
    let saturday = friday + Duration::days(1);
    let (_, hours) = world
        .get(
            &format!(
                "/api/v1/rates/series?bankId={bank}&interval=hour&from={friday}T09:00:00Z&to={saturday}T01:00:00Z"
            ),
            Some(&key),
        )
        .await?;
    let points = hours["data"]["points"].as_array().unwrap();
    assert!(points.first().unwrap()["carriedFrom"].is_null(), "{hours}");
    assert_eq!(
        points.last().unwrap()["carriedFrom"],
        from_friday,
        "{hours}"
    );

    // The best series says it too, and CSV has it as its last column.
    let (_, best) = world
        .get_raw(
            &format!("/api/v1/rates/series?currencyCode=USD&from={friday}&to={monday}&format=csv"),
            Some(&key),
        )
        .await?;
    let lines: Vec<&str> = best.lines().collect();
    assert_eq!(lines[0], "timestamp,updatedAt,value,bankId,carriedFrom");
    assert!(lines[1].ends_with(','), "{best}");
    assert!(lines[2].ends_with(&format!(",{friday_board}")), "{best}");

    // A raw point is a board: it has no carriedFrom.
    let (_, raw) = world
        .get(
            &format!("/api/v1/rates/series?bankId={bank}&interval=raw&from={friday}&to={monday}"),
            Some(&key),
        )
        .await?;
    assert!(
        raw["data"]["points"][0].get("carriedFrom").is_none(),
        "{raw}"
    );
    Ok(())
}

#[tokio::test]
async fn a_bank_series_and_the_best_series_as_json_and_csv() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let (a, _, key) = two_banks(&mut world).await?;
    let from = (Utc::now() - Duration::days(3)).date_naive();

    let (status, raw) = world
        .get(
            &format!("/api/v1/rates/series?bankId={a}&currencyCode=usd&interval=raw&from={from}"),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200, "{raw}");
    let values: Vec<&Value> = raw["data"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["cashBuying"])
        .collect();
    assert_eq!(values, [150.5, 151.0, 152.0]);
    assert_eq!(raw["data"]["interval"], "raw");
    // The daily series runs to the end of today by default; near midnight
    // that is a day after the last board, so the test ends it at that board.
    let last_day = &raw["data"]["points"][2]["timestamp"].as_str().unwrap()[..10];

    let (_, daily) = world
        .get(
            &format!("/api/v1/rates/series?bankId={a}&from={from}&to={last_day}"),
            Some(&key),
        )
        .await?;
    let points = daily["data"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "one a day from the first board: {daily}");
    assert_eq!(points.last().unwrap()["cashBuying"], 152);

    let (status, text) = world
        .get_raw(
            &format!("/api/v1/rates/series?bankId={a}&interval=raw&from={from}&format=csv"),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "timestamp,updatedAt,cashBuying,cashSelling,transactionalBuying,transactionalSelling,carriedFrom"
    );
    assert_eq!(lines.len(), 4);
    assert!(
        lines[2].contains(",151.00,"),
        "published digits: {}",
        lines[2]
    );
    let by_accept = world
        .send(
            axum::http::Request::get(format!("/api/v1/rates/series?bankId={a}&from={from}"))
                .header("accept", "text/csv"),
            Some(&key),
        )
        .await?;
    assert_eq!(by_accept.header("content-type"), "text/csv; charset=utf-8");

    // Without a bank: the best across banks, per day.
    let (_, best) = world
        .get(
            &format!("/api/v1/rates/series?currencyCode=USD&field=cashSelling&from={from}"),
            Some(&key),
        )
        .await?;
    let sellers: Vec<(&Value, &Value)> = best["data"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (&p["value"], &p["bankId"]))
        .collect();
    assert!(
        sellers.iter().skip(1).all(|(v, _)| **v == 158),
        "bank b sells lower from its board on: {sellers:?}"
    );

    for bad in [
        "interval=raw".to_owned(),
        format!("bankId={a}&from=2026-11-20&to=2026-11-01"),
        format!("bankId={a}&interval=minute"),
    ] {
        let (status, body) = world
            .get(&format!("/api/v1/rates/series?{bad}"), Some(&key))
            .await?;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, _) = world
        .get("/api/v1/rates/series?bankId=999", Some(&key))
        .await?;
    assert_eq!(status, 404);
    Ok(())
}

#[tokio::test]
async fn a_bank_series_refuses_field_with_a_400_that_says_why() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let (a, _, key) = two_banks(&mut world).await?;
    let (status, body) = world
        .get(
            &format!("/api/v1/rates/series?bankId={a}&field=cashSelling"),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["errors"],
        serde_json::json!({"field": [
            "field chooses the rate of the best across banks, without bankId; a bank's points carry every rate"
        ]})
    );
    // Every bad parameter in one answer, this rule's too.
    let (status, body) = world
        .get(
            "/api/v1/rates/series?field=cashSelling&interval=raw&format=xml",
            Some(&key),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    let named: Vec<&String> = body["errors"].as_object().unwrap().keys().collect();
    assert_eq!(named, ["format"], "the rules wait for every parameter read");
    let (status, body) = world
        .get("/api/v1/rates/series?interval=raw", Some(&key))
        .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"]["interval"].is_array(), "{body}");
    Ok(())
}

/// The day `days` days ago, YYYY-MM-DD.
fn day_before(days: i64) -> String {
    (Utc::now() - Duration::days(days))
        .format("%Y-%m-%d")
        .to_string()
}

/// Follows `next` from `first` to the end of the range: each page's
/// points, checking that its `Link` header agrees.
async fn pages(world: &World, key: &str, first: String) -> anyhow::Result<Vec<Vec<Value>>> {
    let mut pages = Vec::new();
    let mut path = Some(first);
    while let Some(at) = path.take() {
        anyhow::ensure!(pages.len() < 100, "more than 100 pages");
        let response = world
            .send(axum::http::Request::get(at.as_str()), Some(key))
            .await?;
        assert_eq!(response.status, 200, "{at}");
        let link = response
            .headers
            .get("link")
            .map(|l| l.to_str().unwrap().to_owned());
        let body = response.json();
        world.conforms(&at, response.status, &body);
        let next = body["data"]["next"].as_str().map(str::to_owned);
        assert_eq!(
            link,
            next.as_ref().map(|n| format!("<{n}>; rel=\"next\"")),
            "{body}"
        );
        if let Some(next) = &next {
            // A page that is not the last ends where the next begins, and
            // its times are the API's, to the millisecond.
            let to = body["data"]["to"].as_str().unwrap().to_owned();
            let from = next.split("&from=").nth(1).unwrap();
            assert_eq!(to, from.split('&').next().unwrap(), "{body}");
            for time in next.split(['=', '&']).filter(|p| p.ends_with('Z')) {
                assert_eq!(time.len(), "2026-11-23T08:00:00.000Z".len(), "{next}");
            }
        }
        pages.push(body["data"]["points"].as_array().unwrap().clone());
        path = next;
    }
    Ok(pages)
}

#[tokio::test]
async fn a_range_of_any_length_is_answered_page_by_page() -> anyhow::Result<()> {
    let mut world = World::builder()
        .arg("--series-page-points", "2")
        .start()
        .await?;
    let (a, _, key) = two_banks(&mut world).await?;

    // Raw over 80 days: 31 days a page, and 2 points at most.
    let from = (Utc::now() - Duration::days(80)).date_naive();
    let raw = pages(
        &world,
        &key,
        format!("/api/v1/rates/series?bankId={a}&interval=raw&from={from}"),
    )
    .await?;
    let sizes: Vec<usize> = raw.iter().map(Vec::len).collect();
    assert_eq!(sizes, [0, 0, 2, 1], "31 + 31 days, then 2 of the last 18");
    let values: Vec<&Value> = raw.iter().flatten().map(|p| &p["cashBuying"]).collect();
    assert_eq!(values, [150.5, 151.0, 152.0], "each board once, in order");

    // Hourly over 80 days: every hour from the first board's once, in order.
    let hourly = pages(
        &world,
        &key,
        format!("/api/v1/rates/series?bankId={a}&interval=hour&from={from}"),
    )
    .await?;
    assert_eq!(hourly.len(), 3);
    let stamps: Vec<chrono::DateTime<Utc>> = hourly
        .iter()
        .flatten()
        .map(|p| p["timestamp"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(stamps.len() >= 48, "{}", stamps.len());
    assert!(
        stamps.windows(2).all(|w| w[1] - w[0] == Duration::hours(1)),
        "hours in a row across pages"
    );

    // Boards within one millisecond (published to the microsecond): each
    // once, though a page holds two points at most and links say
    // milliseconds.
    let c = world.register_bank("DASHEN", "Dashen").await?;
    let second = (Utc::now() - Duration::days(1))
        .format("%Y-%m-%dT%H:%M:%S")
        .to_string();
    for (micros, buying) in [
        ("000100", "1"),
        ("000200", "2"),
        ("000300", "3"),
        ("500000", "4"),
    ] {
        let as_of = format!("{second}.{micros}Z");
        world
            .publish(c, &board(&[("USD", buying, "9")], &as_of))
            .await?;
    }
    let fine = pages(
        &world,
        &key,
        format!(
            "/api/v1/rates/series?bankId={c}&interval=raw&from={}",
            day_before(2)
        ),
    )
    .await?;
    let values: Vec<&Value> = fine.iter().flatten().map(|p| &p["cashBuying"]).collect();
    assert_eq!(values, [1, 2, 3, 4], "each board once, in order: {fine:?}");

    // The best across banks per day over six years: two pages.
    let daily = pages(
        &world,
        &key,
        "/api/v1/rates/series?currencyCode=USD&from=2020-11-01".to_owned(),
    )
    .await?;
    assert_eq!(daily.len(), 2);
    assert!(daily[0].is_empty());
    assert!(daily[1].len() >= 3);
    Ok(())
}

#[tokio::test]
async fn an_amount_converted_at_every_bank_best_first() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let (a, b, key) = two_banks(&mut world).await?;
    // Conversions read the list of every bank.
    let (status, sold) = world
        .get("/api/v1/convert?from=USD&to=ETB&amount=100", Some(&key))
        .await?;
    assert_eq!(status, 200);
    assert_eq!(
        sold["data"]["results"].as_array().map(Vec::len),
        Some(2),
        "both banks in the list"
    );
    let results = sold["data"]["results"].as_array().unwrap();
    assert_eq!(results[0]["bank"]["id"], a, "152 beats 149");
    assert_eq!(results[0]["amount"], 15200);
    assert_eq!(results[0]["legs"][0]["side"], "buying");
    assert_eq!(results[1]["bank"]["id"], b);

    let (_, bought) = world
        .get("/api/v1/convert?from=ETB&to=USD&amount=15800", Some(&key))
        .await?;
    let results = bought["data"]["results"].as_array().unwrap();
    assert_eq!(results[0]["bank"]["id"], b, "158 is the lower selling rate");
    assert_eq!(results[0]["amount"], 100);
    assert_eq!(results[0]["legs"][0]["side"], "selling");

    let (_, cross) = world
        .get("/api/v1/convert?from=USD&to=EUR&amount=175", Some(&key))
        .await?;
    let results = cross["data"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "only bank a quotes EUR");
    assert_eq!(results[0]["amount"], 152);

    let (_, one) = world
        .get(
            &format!("/api/v1/convert?from=USD&to=ETB&amount=1&bankId={b}&transactional=true"),
            Some(&key),
        )
        .await?;
    assert_eq!(one["data"]["results"].as_array().unwrap().len(), 1);

    // A currency to itself: the amount at rate 1 at every bank, no legs.
    let (got, same) = world
        .get("/api/v1/convert?from=USD&to=USD&amount=12.5", Some(&key))
        .await?;
    assert_eq!(got, 200, "{same}");
    for result in same["data"]["results"].as_array().unwrap() {
        assert_eq!(
            (&result["amount"], &result["rate"]),
            (&12.5.into(), &1.into())
        );
        assert!(result["legs"].as_array().unwrap().is_empty());
    }

    for (query, status) in [
        ("from=USD&to=ETB&amount=0", 400),
        ("from=USD&to=ETB&amount=-5", 400),
        ("from=USD&to=ETB&amount=1e30", 400),
        ("from=QQQ&to=ETB&amount=1", 400),
        ("from=USD&to=ETB&amount=1&bankId=999", 404),
    ] {
        let (got, body) = world
            .get(&format!("/api/v1/convert?{query}"), Some(&key))
            .await?;
        assert_eq!(got, status, "{query}: {body}");
    }
    Ok(())
}

#[tokio::test]
async fn converting_what_no_bank_quotes_is_404_not_found() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let (_, b, key) = two_banks(&mut world).await?;
    for (query, message) in [
        (
            "from=JPY&to=ETB&amount=1".to_owned(),
            "Currency not found: JPY has no rates from any active bank".to_owned(),
        ),
        (
            format!("from=ETB&to=EUR&amount=1&bankId={b}"),
            format!("Currency not found: EUR has no rates from bank {b}"),
        ),
        (
            "from=JPY&to=EUR&amount=1&transactional=true".to_owned(),
            "Currency not found: JPY has no transactional rates from any active bank".to_owned(),
        ),
    ] {
        let (status, body) = world
            .get(&format!("/api/v1/convert?{query}"), Some(&key))
            .await?;
        assert_eq!(
            (status, &body),
            (404, &serde_json::json!({"status": 404, "message": message})),
            "{query}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_known_etag_is_answered_304_and_still_counted() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let (a, _, key) = two_banks(&mut world).await?;
    let today = Utc::now().date_naive();
    for path in [
        format!("/api/v1/rates?bankId={a}"),
        "/api/v1/rates".to_owned(),
        "/api/v1/currencies".to_owned(),
        "/api/v1/rates/best-rates?currencyCode=USD".to_owned(),
        format!("/api/v1/history?bankId={a}&date={today}"),
        format!("/api/v1/rates/series?bankId={a}"),
    ] {
        let first = world
            .send(axum::http::Request::get(path.as_str()), Some(&key))
            .await?;
        assert!(first.headers.contains_key("etag"), "an etag: {path}");
        assert_eq!(first.header("cache-control"), "no-cache", "{path}");
        let etag = first.header("etag").to_owned();
        assert!(
            etag.starts_with('"') && etag.ends_with('"'),
            "strong: {etag}"
        );
        let remaining: u64 = first.header("x-ratelimit-remaining").parse()?;
        let again = world
            .send(
                axum::http::Request::get(path.as_str()).header("if-none-match", &etag),
                Some(&key),
            )
            .await?;
        assert_eq!(again.status, 304, "{path}");
        assert_eq!(again.header("etag"), etag);
        let after: u64 = again.header("x-ratelimit-remaining").parse()?;
        assert!(after < remaining, "a 304 is counted: {path}");
        assert!(again.body.is_empty());
    }
    // A new board, a new tag.
    let path = format!("/api/v1/rates?bankId={a}");
    let before = world
        .send(axum::http::Request::get(path.as_str()), Some(&key))
        .await?;
    let etag = before.header("etag").to_owned();
    world
        .publish(a, &board(&[("USD", "153", "160")], &ago(0, 0)))
        .await?;
    let after = world
        .send(
            axum::http::Request::get(path.as_str()).header("if-none-match", &etag),
            Some(&key),
        )
        .await?;
    assert_eq!(after.status, 200);
    Ok(())
}

#[tokio::test]
async fn pages_on_other_origins_may_read_and_operators_send_no_cors() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("cors").await?;
    let preflight = stack
        .http()
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/api/v1/rates", stack.api_url),
        )
        .header("origin", "https://rates.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "x-api-key")
        .send()
        .await?;
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers();
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert!(headers["access-control-allow-headers"]
        .to_str()?
        .contains("x-api-key"));
    assert_eq!(headers["access-control-max-age"], "600");

    let read = stack
        .http()
        .get(format!("{}/api/v1/currencies", stack.api_url))
        .header("origin", "https://rates.example")
        .header("x-api-key", &key)
        .send()
        .await?;
    let exposed = read.headers()["access-control-expose-headers"]
        .to_str()?
        .to_lowercase();
    for header in ["x-ratelimit-remaining", "etag", "retry-after"] {
        assert!(exposed.contains(header), "{exposed}");
    }

    let ingest = stack
        .http()
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/banks/1/boards", stack.ingest_url),
        )
        .header("origin", "https://rates.example")
        .header("access-control-request-method", "POST")
        .send()
        .await?;
    assert!(!ingest.headers().contains_key("access-control-allow-origin"));
    Ok(())
}
