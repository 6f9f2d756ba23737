//! The National Bank's reference rates: imported as published, carried
//! over weekends, corrected, never a bank; and each bank's spread and
//! premium over them, checked against a computation of the test's own,
//! the same after a replay.

use std::str::FromStr;
use std::time::Duration;

use ratewire_e2e::{eventually, Board, Stack, ADMIN_TOKEN, VISIBLE_WITHIN};
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::Value;

/// A day as the National Bank publishes it: (code, name as published,
/// buying, selling, weighted average).
fn published(date: &str, rates: &[(&str, &str, &str, &str, &str)]) -> String {
    let data: Vec<String> = rates
        .iter()
        .enumerate()
        .map(|(i, (code, name, buying, selling, average))| {
            format!(
                r#"{{"id":"01kr{i:04}","currency_id":"01hc{i:04}","buying":"{buying}","selling":"{selling}","date":"{date}","weighted_average":"{average}","currency":{{"id":"01hc{i:04}","name":"{name}","code":"{code}"}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"success":true,"message":"OK","status":200,"data":[{}]}}"#,
        data.join(",")
    )
}

async fn import(stack: &Stack, body: &str) -> anyhow::Result<(u16, Value)> {
    let response = stack
        .http()
        .post(format!(
            "{}/v1/admin/reference-rates",
            stack.ingest_operator_url
        ))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await?;
    Ok((response.status().as_u16(), response.json().await?))
}

fn dec(text: &str) -> Decimal {
    Decimal::from_str(text).unwrap()
}

/// The issue's formulas, written as they are stated.
fn premium(side: &str, weighted_average: &str) -> f64 {
    let value = (dec(side) / dec(weighted_average) - Decimal::ONE) * Decimal::ONE_HUNDRED;
    rounded(value)
}

fn spread_percent(buying: &str, selling: &str) -> f64 {
    let (b, s) = (dec(buying), dec(selling));
    rounded((s - b) / ((b + s) / Decimal::TWO) * Decimal::ONE_HUNDRED)
}

fn rounded(value: Decimal) -> f64 {
    let text = value
        .round_dp_with_strategy(4, RoundingStrategy::MidpointAwayFromZero)
        .to_string();
    text.parse().unwrap()
}

fn number(text: &str) -> Value {
    Value::from(text.parse::<f64>().unwrap())
}

const THURSDAY: &str = "2026-05-14";
const FRIDAY: &str = "2026-05-15";
const MONDAY: &str = "2026-05-18";

fn thursday() -> String {
    published(
        THURSDAY,
        &[
            ("USD", "US DOLLAR", "156.9000", "158.4690", "156.9000"),
            ("EUR", "EURO", "170.1000", "171.8010", "170.9500"),
            ("XDR", "SDR", "214.5100", "216.6551", "215.5800"),
        ],
    )
}

fn friday() -> String {
    published(
        FRIDAY,
        &[
            ("USD", "US DOLLAR", "157.0012", "158.5712", "157.0012"),
            ("EUR", "EURO", "170.2000", "171.9020", "171.0100"),
            ("DKK", "DANISH KNRONER", "22.8000", "23.0280", "22.9100"),
            ("XDR", "SDR", "214.6000", "216.7460", "215.6000"),
        ],
    )
}

fn monday(usd_selling: &str, usd_average: &str) -> String {
    published(
        MONDAY,
        &[
            ("USD", "US DOLLAR", "157.227", usd_selling, usd_average),
            ("EUR", "EURO", "170.3000", "172.0030", "171.1000"),
            ("DKK", "DANISH KNRONER", "22.8100", "23.0381", "22.9200"),
            ("SEK", "SWIDISH KNRONER", "15.1000", "15.2510", "15.1700"),
        ],
    )
}

#[tokio::test]
async fn reference_days_are_served_as_published_carried_over_and_corrected() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("reference").await?;
    let (cbe, cbe_token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    // CBE's board is of a Saturday in May: premiums use Friday's reference.
    let cbe_board = Board::at("2026-05-16T08:00:00Z")
        .rate("USD", "155.5", "158.6")
        .transactional("USD", "155.0", "158.0");
    assert_eq!(
        stack.publish_board(cbe, &cbe_token, cbe_board).await?.0,
        202
    );
    // Awash quotes cash only, today.
    let awash_board = Board::at(ratewire_e2e::ago(0, 1)).rate("USD", "156.1", "159.9");
    assert_eq!(
        stack
            .publish_board(awash, &awash_token, awash_board)
            .await?
            .0,
        202
    );
    stack
        .wait_served("Awash's board", awash, &key, "159.9")
        .await?;

    // Nothing imported yet: no reference, no premium.
    let (status, body) = stack
        .get("/api/v1/reference-rates?currencyCode=USD", Some(&key))
        .await?;
    assert_eq!(status, 404, "{body}");
    let (status, body) = stack
        .get("/api/v1/rates/spreads?currencyCode=USD", Some(&key))
        .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["reference"], Value::Null);
    assert_eq!(
        body["data"]["banks"][0]["cashBuyingPremiumPercent"],
        Value::Null
    );

    // Three weekdays around a weekend; a day again with the same values
    // publishes nothing; other values for it are a correction.
    // Thursday through the feed tool, from a saved response; a broken file
    // beside it fails the run and posts nothing.
    let dir = std::env::temp_dir().join(format!("reference-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let (saved, broken) = (dir.join("2026-05-14.json"), dir.join("broken.json"));
    std::fs::write(&saved, thursday())?;
    std::fs::write(&broken, r#"{"success":true,"data":[{"buying":"x"}]}"#)?;
    let run = stack
        .run(
            "ratewire-feed",
            &[
                "reference",
                "import",
                saved.to_str().unwrap(),
                broken.to_str().unwrap(),
            ],
            &[],
        )
        .await?;
    let printed = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(2), "{printed}");
    assert!(
        printed.contains("2026-05-14 published (3 currencies)"),
        "{printed}"
    );
    assert!(printed.contains("broken.json: rejected (400"), "{printed}");
    std::fs::remove_dir_all(&dir)?;
    for day in [friday(), monday("158.7993", "157.227")] {
        let (status, answer) = import(&stack, &day).await?;
        assert_eq!(
            (status, &answer["outcome"]),
            (202, &Value::from("published")),
            "{answer}"
        );
    }
    let (status, again) = import(&stack, &friday()).await?;
    assert_eq!(
        (status, &again["outcome"]),
        (200, &Value::from("unchanged")),
        "{again}"
    );
    let (status, corrected) = import(&stack, &monday("158.8000", "157.3000")).await?;
    assert_eq!(
        (status, &corrected["outcome"]),
        (202, &Value::from("corrected")),
        "{corrected}"
    );

    // Bad bodies: every problem named, nothing published.
    let broken = published(
        MONDAY,
        &[
            ("USD", "US DOLLAR", "159", "158", "157"),
            ("QQQ", "NOTHING", "1", "2", "1"),
            ("EUR", "EURO", "-1", "2", "1"),
        ],
    );
    let (status, body) = import(&stack, &broken).await?;
    assert_eq!(status, 400, "{body}");
    for field in ["data[0].selling", "data[1].currency.code", "data[2].buying"] {
        assert!(body["errors"][field].is_array(), "{field}: {body}");
    }
    let future = published("2099-01-05", &[("USD", "US DOLLAR", "1", "2", "1")]);
    let (status, body) = import(&stack, &future).await?;
    assert_eq!(
        (status, body["errors"]["data[0].date"].is_array()),
        (400, true),
        "{body}"
    );
    let (status, body) = import(&stack, r#"{"success":true,"data":{}}"#).await?;
    assert_eq!(
        (status, body["errors"]["data"].is_array()),
        (400, true),
        "{body}"
    );
    let (status, _) = import(&stack, "not json").await?;
    assert_eq!(status, 400);

    // 2 registrations, 2 boards, 3 days and 1 correction.
    stack.wait_applied(8, Duration::from_secs(60)).await?;
    let served = |path: String| {
        let (stack, key) = (&stack, &key);
        async move { stack.get(&path, Some(key)).await }
    };
    let latest = eventually("the correction served", VISIBLE_WITHIN, || async {
        let (_, body) = served("/api/v1/reference-rates?currencyCode=usd".into())
            .await
            .ok()?;
        (body["data"]["weightedAverage"] == number("157.3")).then_some(body)
    })
    .await?;
    assert_eq!(latest["data"]["date"], MONDAY);
    assert_eq!(latest["data"]["source"], "NBE");
    assert_eq!(latest["data"]["currency"]["symbol"], "USD");
    assert_eq!(latest["data"]["currency"]["name"], "United States dollar");
    assert_eq!(latest["data"]["selling"], number("158.8"));
    // Exactly the published digits.
    let (_, raw) = stack
        .get_raw(
            "/api/v1/reference-rates?currencyCode=XDR&date=2026-05-14",
            Some(&key),
        )
        .await?;
    assert!(
        raw.contains(r#""buying":214.5100"#) && raw.contains(r#""selling":216.6551"#),
        "{raw}"
    );

    // The reference in force at the end of a day: a weekend gives Friday's.
    for (date, expected) in [
        ("2026-05-14", THURSDAY),
        ("2026-05-15", FRIDAY),
        ("2026-05-16", FRIDAY),
        ("2026-05-17", FRIDAY),
        ("2026-05-18", MONDAY),
        ("2026-11-01", MONDAY),
    ] {
        let (status, body) = served(format!(
            "/api/v1/reference-rates?currencyCode=USD&date={date}"
        ))
        .await?;
        assert_eq!(
            (status, &body["data"]["date"]),
            (200, &Value::from(expected)),
            "{date}"
        );
    }
    let (status, body) =
        served("/api/v1/reference-rates?currencyCode=USD&date=2026-05-13".into()).await?;
    assert_eq!(status, 404, "{body}");
    // Every currency of the day in force, names from our own table.
    let (_, every) = served("/api/v1/reference-rates?date=2026-05-17".into()).await?;
    let codes: Vec<&str> = every["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["currency"]["symbol"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["DKK", "EUR", "USD", "XDR"]);
    assert_eq!(every["data"][0]["currency"]["name"], "Danish krone");
    // Validation as in api-v1.
    let (status, body) =
        served("/api/v1/reference-rates?currencyCode=US1&date=2026-13-01".into()).await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"]["currencyCode"].is_array() && body["errors"]["date"].is_array());
    let (status, _) = served("/api/v1/reference-rates?currencyCode=QQQ".into()).await?;
    assert_eq!(status, 404);

    // A series of days: by default the 30 days to `to` (today without it),
    // as a rates series; a `from` after `to` is a 400.
    let dates = |body: &Value| -> Vec<String> {
        body["data"]["points"]
            .as_array()
            .map(|points| {
                points
                    .iter()
                    .map(|p| p["date"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (status, body) =
        served("/api/v1/reference-rates/series?currencyCode=USD&to=2026-05-18".into()).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(dates(&body), [THURSDAY, FRIDAY, MONDAY]);
    // 30 days, both ends included: from 2026-05-18, then from 2026-05-19.
    let (status, body) =
        served("/api/v1/reference-rates/series?currencyCode=USD&to=2026-06-16".into()).await?;
    assert_eq!(
        (status, dates(&body)),
        (200, vec![MONDAY.to_owned()]),
        "{body}"
    );
    let (status, body) =
        served("/api/v1/reference-rates/series?currencyCode=USD&to=2026-06-17".into()).await?;
    assert_eq!((status, dates(&body).len()), (200, 0), "{body}");
    let (status, body) = served("/api/v1/reference-rates/series?currencyCode=USD".into()).await?;
    assert_eq!(
        (status, dates(&body).len()),
        (200, 0),
        "none in the last 30 days: {body}"
    );
    let (status, body) = served(
        "/api/v1/reference-rates/series?currencyCode=USD&from=2026-05-18&to=2026-05-14".into(),
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["errors"],
        serde_json::json!({"from": ["from must not be after to (2026-05-14)"]})
    );
    let (status, _) = served("/api/v1/reference-rates?currencyCode=JPY".into()).await?;
    assert_eq!(status, 404, "a currency the day in force does not have");

    // Never a bank: not in /banks, /rates, /currencies, best rates.
    let (_, banks) = served("/api/v1/banks".into()).await?;
    assert_eq!(banks["data"].as_array().unwrap().len(), 2);
    let (_, currencies) = served("/api/v1/currencies".into()).await?;
    assert_eq!(
        currencies["data"].as_array().unwrap().len(),
        1,
        "{currencies}"
    );
    let (status, _) = served("/api/v1/rates/best-rates?currencyCode=XDR".into()).await?;
    assert_eq!(status, 404);

    check_spreads(&stack, &key, cbe, awash).await?;
    stack.assert_fold_matches_replay().await?;

    // A replay into a new generation serves the same references, spreads
    // and premiums.
    let before = spreads_without_ages(&stack, &key).await?;
    stack.replay(&["--schema", "readmodel_v2"]).await?;
    assert_eq!(stack.active_generation().await?, "readmodel_v2");
    stack.compare_schemas("readmodel", "readmodel_v2").await?;
    let after = eventually("the replayed generation served", VISIBLE_WITHIN, || async {
        let after = spreads_without_ages(&stack, &key).await.ok()?;
        (after == before).then_some(after)
    })
    .await;
    assert!(
        after.is_ok(),
        "{before} became {}",
        spreads_without_ages(&stack, &key).await?
    );
    check_spreads(&stack, &key, cbe, awash).await?;
    Ok(())
}

async fn spreads_without_ages(stack: &Stack, key: &str) -> anyhow::Result<Value> {
    let (_, mut body) = stack
        .get(
            "/api/v1/rates/spreads?currencyCode=USD&transactional=true",
            Some(key),
        )
        .await?;
    for row in body["data"]["banks"].as_array_mut().into_iter().flatten() {
        row.as_object_mut().map(|r| r.remove("ageSeconds"));
    }
    Ok(body)
}

async fn check_spreads(stack: &Stack, key: &str, cbe: i64, awash: i64) -> anyhow::Result<()> {
    let (status, body) = stack
        .get(
            "/api/v1/rates/spreads?currencyCode=USD&transactional=true",
            Some(key),
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    let data = &body["data"];
    assert_eq!(data["currency"]["symbol"], "USD");
    assert_eq!(
        data["reference"],
        serde_json::json!({"date": MONDAY, "buying": 157.227, "selling": 158.8, "weightedAverage": 157.3})
    );
    let banks = data["banks"].as_array().unwrap();
    let ids: Vec<i64> = banks
        .iter()
        .map(|b| b["bank"]["id"].as_i64().unwrap())
        .collect();
    // Narrowest cash spread first: CBE 3.1 on 157.05, Awash 3.8 on 158.
    assert_eq!(ids, [cbe, awash]);
    let (cbe_row, awash_row) = (&banks[0], &banks[1]);

    assert_eq!(cbe_row["referenceDate"], FRIDAY);
    assert_eq!(cbe_row["cashSpread"], number("3.1"));
    assert_eq!(
        cbe_row["cashSpreadPercent"],
        Value::from(spread_percent("155.5", "158.6"))
    );
    assert_eq!(
        cbe_row["cashBuyingPremiumPercent"],
        Value::from(premium("155.5", "157.0012"))
    );
    assert_eq!(
        cbe_row["cashSellingPremiumPercent"],
        Value::from(premium("158.6", "157.0012"))
    );
    assert_eq!(cbe_row["transactionalSpread"], number("3.0"));
    assert_eq!(
        cbe_row["transactionalSpreadPercent"],
        Value::from(spread_percent("155.0", "158.0"))
    );
    assert_eq!(
        cbe_row["transactionalSellingPremiumPercent"],
        Value::from(premium("158.0", "157.0012"))
    );
    assert_eq!(cbe_row["stale"], true, "a board from May");
    assert!(cbe_row["ageSeconds"].as_i64().unwrap() > 72 * 3600);

    assert_eq!(awash_row["referenceDate"], MONDAY);
    assert_eq!(
        awash_row["cashBuyingPremiumPercent"],
        Value::from(premium("156.1", "157.3"))
    );
    assert_eq!(
        awash_row["cashSellingPremiumPercent"],
        Value::from(premium("159.9", "157.3"))
    );
    assert_eq!(awash_row["transactionalSpread"], Value::Null, "cash only");
    assert_eq!(awash_row["stale"], false);

    // The 2 % cap: CBE's spreads (1.97 and 1.92 %) keep to it, Awash's
    // cash spread (2.41 %) does not; Awash quotes no transactional pair.
    assert_eq!(data["spreadCapPercent"], 2);
    let flags = |row: &Value| {
        (
            row["cashOverSpreadCap"].clone(),
            row["transactionalOverSpreadCap"].clone(),
        )
    };
    assert_eq!(flags(cbe_row), (Value::from(false), Value::from(false)));
    assert_eq!(flags(awash_row), (Value::from(true), Value::Null));

    // Without transactional=true, no transactional fields.
    let (_, cash) = stack
        .get("/api/v1/rates/spreads?currencyCode=USD", Some(key))
        .await?;
    assert!(cash["data"]["banks"][0]
        .get("transactionalSpread")
        .is_none());
    assert_eq!(
        cash["data"]["banks"][0]["transactionalOverSpreadCap"], false,
        "the flag is there without transactional=true"
    );
    // A currency only the reference quotes: no banks, the reference.
    let (status, dkk) = stack
        .get("/api/v1/rates/spreads?currencyCode=DKK", Some(key))
        .await?;
    assert_eq!(
        (status, dkk["data"]["banks"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    assert_eq!(dkk["data"]["reference"]["date"], MONDAY);
    let (status, _) = stack
        .get("/api/v1/rates/spreads?currencyCode=JPY", Some(key))
        .await?;
    assert_eq!(status, 404);
    let (status, body) = stack
        .get("/api/v1/rates/spreads?currencyCode=U", Some(key))
        .await?;
    assert_eq!(
        (status, body["errors"]["currencyCode"].is_array()),
        (400, true)
    );

    // Conversions say how old each quote is.
    let (_, converted) = stack
        .get("/api/v1/convert?from=USD&to=ETB&amount=100", Some(key))
        .await?;
    let stale: Vec<(i64, bool)> = converted["data"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["bank"]["id"].as_i64().unwrap(),
                r["stale"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(
        stale.contains(&(cbe, true)) && stale.contains(&(awash, false)),
        "{stale:?}"
    );

    // A weak ETag without the ages: 304 while nothing else changed.
    let url = format!("{}/api/v1/rates/spreads?currencyCode=USD", stack.api_url);
    let first = stack
        .http()
        .get(&url)
        .header("x-api-key", key)
        .send()
        .await?;
    let etag = first.headers()["etag"].to_str()?.to_owned();
    assert!(etag.starts_with("W/\""), "{etag}");
    // Until the ages in the body have moved on.
    let first = first.text().await?;
    eventually("the ages moved on", VISIBLE_WITHIN, || async {
        let now = stack
            .http()
            .get(&url)
            .header("x-api-key", key)
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        (now != first).then_some(())
    })
    .await?;
    let again = stack
        .http()
        .get(&url)
        .header("x-api-key", key)
        .header("if-none-match", &etag)
        .send()
        .await?;
    assert_eq!(again.status().as_u16(), 304);
    let url = format!("{}/api/v1/reference-rates", stack.api_url);
    let first = stack
        .http()
        .get(&url)
        .header("x-api-key", key)
        .send()
        .await?;
    let etag = first.headers()["etag"].to_str()?.to_owned();
    let again = stack
        .http()
        .get(&url)
        .header("x-api-key", key)
        .header("if-none-match", &etag)
        .send()
        .await?;
    assert_eq!(again.status().as_u16(), 304);
    Ok(())
}
