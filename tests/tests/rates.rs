//! GET /api/v1/rates, as api-v1 §4.3 and decisions.md describe it, through
//! a bank's whole life.

use ratewire_e2e::{ago, eventually, Stack, VISIBLE_WITHIN};
use serde_json::{json, Value};

async fn get_when(
    stack: &Stack,
    key: &str,
    path: &str,
    ready: impl Fn(u16, &Value) -> bool,
) -> anyhow::Result<Value> {
    eventually(path, VISIBLE_WITHIN, || async {
        let (status, body) = stack.get(path, Some(key)).await.ok()?;
        ready(status, &body).then_some(body)
    })
    .await
}

#[tokio::test]
async fn a_bank_that_never_published_is_listed_with_no_rates() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("rates").await?;
    let bank = stack.register_bank("ENAT", "Enat Bank").await?;
    let body = get_when(
        &stack,
        &key,
        &format!("/api/v1/rates?bankId={bank}"),
        |s, _| s == 200,
    )
    .await?;
    let served = &body["data"][0]["data"][0];
    assert_eq!(served["exchangeRates"], json!([]));
    assert!(served["lastRatesUpdatedAt"].is_null());
    Ok(())
}

#[tokio::test]
async fn updates_show_everywhere_and_deactivation_removes_the_bank() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("rates").await?;
    let (cbe, cbe_token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    for (id, token, buying) in [(cbe, &cbe_token, 156), (awash, &awash_token, 155)] {
        let board = format!(
            r#"{{"asOf":"{}","rates":[{{"currency":"USD","cashBuying":{buying},"cashSelling":160}}]}}"#,
            ago(0, 1)
        );
        assert_eq!(stack.publish_board(id, token, &board).await?.0, 202);
    }
    get_when(&stack, &key, "/api/v1/rates", |_, b| {
        b["data"].as_array().is_some_and(|d| {
            d.len() == 2
                && d.iter()
                    .all(|e| !e["data"][0]["exchangeRates"][0].is_null())
        })
    })
    .await?;

    stack
        .update_bank(cbe, json!({"name": "CBE Bank", "imageUrl": "https://img.test/new.png", "socialLinks": [{"platform": "x", "url": "https://x.com/cbe"}]}))
        .await?;
    let body = get_when(
        &stack,
        &key,
        &format!("/api/v1/rates?bankId={cbe}&socialLinks=true"),
        |_, b| b["data"][0]["data"][0]["name"] == "CBE Bank",
    )
    .await?;
    let served = &body["data"][0]["data"][0];
    assert_eq!(served["imageUrl"], "https://img.test/new.png");
    assert_eq!(
        served["socialLinks"],
        json!([{"platform": "x", "url": "https://x.com/cbe"}])
    );
    get_when(
        &stack,
        &key,
        "/api/v1/rates/best-rates?currencyCode=USD",
        |_, b| b["data"]["cashBuying"]["bank"]["name"] == "CBE Bank",
    )
    .await?;

    stack.update_bank(cbe, json!({"active": false})).await?;
    get_when(
        &stack,
        &key,
        &format!("/api/v1/rates?bankId={cbe}"),
        |s, b| s == 404 && b["message"] == "Bank not found",
    )
    .await?;
    let body = get_when(&stack, &key, "/api/v1/rates", |_, b| {
        b["data"].as_array().is_some_and(|d| d.len() == 1)
    })
    .await?;
    assert_eq!(body["data"][0]["data"][0]["id"], awash);
    Ok(())
}

#[tokio::test]
async fn flags_accept_true_false_one_and_zero() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("rates").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let board = format!(
        r#"{{"asOf":"{}","rates":[{{"currency":"USD","cashBuying":1,"cashSelling":2,"transactionalBuying":1.5,"transactionalSelling":1.75}}]}}"#,
        ago(0, 1)
    );
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);
    for (query, transactional) in [
        ("transactional=true", true),
        ("transactional=1", true),
        ("transactional=false", false),
        ("transactional=0", false),
    ] {
        let body = get_when(
            &stack,
            &key,
            &format!("/api/v1/rates?bankId={bank}&{query}"),
            |s, b| s == 200 && !b["data"][0]["data"][0]["exchangeRates"][0].is_null(),
        )
        .await?;
        let rate = &body["data"][0]["data"][0]["exchangeRates"][0];
        assert_eq!(
            rate.get("transactionalSelling").is_some(),
            transactional,
            "{query}"
        );
        assert_eq!(
            rate["difference"].get("transactionalSelling").is_some(),
            transactional,
            "{query}"
        );
    }
    Ok(())
}
