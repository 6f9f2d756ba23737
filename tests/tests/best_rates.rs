//! GET /api/v1/rates/best-rates, as api-v1 §4.4 and decisions.md describe it.

use ratewire_e2e::{ago, eventually, Stack, VISIBLE_WITHIN};
use serde_json::{json, Value};

async fn best_when(
    stack: &Stack,
    key: &str,
    code: &str,
    ready: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    eventually("the expected best rates", VISIBLE_WITHIN, || async {
        let (status, body) = stack
            .get(
                &format!("/api/v1/rates/best-rates?currencyCode={code}"),
                Some(key),
            )
            .await
            .ok()?;
        (status == 200 && ready(&body)).then_some(body)
    })
    .await
}

#[tokio::test]
async fn best_buying_is_highest_best_selling_lowest_with_difference_and_series(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("best").await?;
    let (cbe, cbe_token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    // CBE buys USD best (155.10, up 0.25 from its previous board); Awash sells lowest.
    let cbe_boards = [(2, "154.85", "160"), (0, "155.10", "160.5")];
    for (days, buying, selling) in cbe_boards {
        let board = format!(
            r#"{{"asOf":"{}","rates":[{{"currency":"USD","cashBuying":{buying},"cashSelling":{selling}}}]}}"#,
            ago(days, 1)
        );
        assert_eq!(stack.publish_board(cbe, &cbe_token, &board).await?.0, 202);
    }
    let board = format!(
        r#"{{"asOf":"{}","rates":[{{"currency":"USD","cashBuying":154,"cashSelling":158.75,"transactionalBuying":154.5,"transactionalSelling":158}}]}}"#,
        ago(0, 2)
    );
    assert_eq!(
        stack.publish_board(awash, &awash_token, &board).await?.0,
        202
    );

    let body = best_when(&stack, &key, "usd", |b| {
        b["data"]["cashBuying"]["price"] == 155.10 && b["data"]["cashSelling"]["price"] == 158.75
    })
    .await?;
    assert_eq!(body["message"], "success");
    assert_eq!(body["status"], 200);
    let data = &body["data"];
    let buying = &data["cashBuying"];
    assert_eq!(
        buying["bank"],
        json!({"id": cbe, "name": "Commercial Bank of Ethiopia", "code": "CBE", "imageUrl": "https://img.test/CBE.png"})
    );
    assert_eq!(buying["difference"], "+0.2500");
    assert!(buying["updatedAt"].is_string() && buying["timestamp"].is_string());
    let series = buying["rates"].as_array().unwrap();
    assert_eq!(
        series.len(),
        2,
        "both CBE boards fall in the last 30 days: {series:?}"
    );
    assert_eq!(series[0]["value"], 154.85, "oldest first");
    assert_eq!(series[1]["value"], 155.10);

    let selling = &data["cashSelling"];
    assert_eq!(selling["price"], 158.75);
    assert_eq!(selling["bank"]["id"], awash);
    assert_eq!(selling["difference"], "0.0000", "no previous value");
    // Only Awash publishes transactional rates, so it wins both.
    assert_eq!(data["transactionalBuying"]["bank"]["id"], awash);
    assert_eq!(data["transactionalSelling"]["price"], 158);

    let (_, raw) = stack
        .get_raw("/api/v1/rates/best-rates?currencyCode=USD", Some(&key))
        .await?;
    assert!(raw.contains(r#""price":155.10"#), "published digits: {raw}");
    Ok(())
}

#[tokio::test]
async fn fields_no_bank_quotes_are_null_and_deactivated_banks_do_not_compete() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let key = stack.api_key("best").await?;
    let (cbe, cbe_token) = stack.bank_with_token("CBE", "CBE").await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash").await?;
    for (id, token, buying) in [(cbe, &cbe_token, 21), (awash, &awash_token, 20)] {
        let board = format!(
            r#"{{"asOf":"{}","rates":[{{"currency":"CNY","cashBuying":{buying},"cashSelling":22}}]}}"#,
            ago(0, 1)
        );
        assert_eq!(stack.publish_board(id, token, &board).await?.0, 202);
    }
    let body = best_when(&stack, &key, "CNY", |b| {
        b["data"]["cashBuying"]["bank"]["id"] == cbe
    })
    .await?;
    assert!(body["data"]["transactionalBuying"].is_null());
    assert!(body["data"]["transactionalSelling"].is_null());

    stack.update_bank(cbe, json!({"active": false})).await?;
    best_when(&stack, &key, "CNY", |b| {
        b["data"]["cashBuying"]["bank"]["id"] == awash
    })
    .await?;
    stack.update_bank(awash, json!({"active": false})).await?;
    eventually("no active bank quotes CNY", VISIBLE_WITHIN, || async {
        let (status, body) = stack
            .get("/api/v1/rates/best-rates?currencyCode=CNY", Some(&key))
            .await
            .ok()?;
        (status == 404 && body["message"] == "Currency not found").then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn best_rates_validates_the_currency_code() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("best").await?;
    for query in [
        "",
        "?currencyCode=",
        "?currencyCode=US1",
        "?currencyCode=USDT",
    ] {
        let (status, body) = stack
            .get(&format!("/api/v1/rates/best-rates{query}"), Some(&key))
            .await?;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["message"], "Validation errors occurred.");
        assert!(body["errors"]["currencyCode"].is_array(), "{body}");
    }
    for code in ["QQQ", "JPY"] {
        let (status, body) = stack
            .get(
                &format!("/api/v1/rates/best-rates?currencyCode={code}"),
                Some(&key),
            )
            .await?;
        assert_eq!(
            (status, body["message"].as_str()),
            (404, Some("Currency not found")),
            "{code}"
        );
        assert_eq!(body["status"], 404);
    }
    Ok(())
}
