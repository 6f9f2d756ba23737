//! Errors every endpoint shares (api-v1 §7): JSON bodies in the spec's
//! format, for unknown paths and methods too, and no internals on a 500.

use ratewire_e2e::{ago, eventually, Stack, VISIBLE_WITHIN};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn unknown_paths_are_404_and_wrong_methods_405_as_json() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("errors").await?;
    let (status, body) = stack.get("/api/v1/nothing-here", Some(&key)).await?;
    assert_eq!(
        (status, body),
        (404, json!({"status": 404, "message": "Not Found"}))
    );

    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let response = stack
            .http()
            .request(method.clone(), format!("{}/api/v1/rates", stack.api_url))
            .header("x-api-key", &key)
            .send()
            .await?;
        assert_eq!(response.status(), 405, "{method}");
        let body: Value = response.json().await?;
        assert_eq!(
            body,
            json!({"status": 405, "message": "Method Not Allowed"})
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_server_failure_is_500_with_the_cause_only_in_the_logs() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("errors").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let board = format!(
        r#"{{"asOf":"{}","rates":[{{"currency":"USD","cashBuying":1,"cashSelling":2}}]}}"#,
        ago(1, 0)
    );
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let path = format!("/api/v1/history?bankId={bank}&date={today}");
    eventually("the board in history", VISIBLE_WITHIN, || async {
        (stack.get(&path, Some(&key)).await.ok()?.0 == 200).then_some(())
    })
    .await?;

    stack
        .sql("ALTER TABLE readmodel.rates RENAME TO rates_gone")
        .await?;
    let (status, body) = stack.get(&path, Some(&key)).await?;
    assert_eq!(
        (status, body),
        (
            500,
            json!({"status": 500, "message": "Internal Server Error"})
        )
    );
    let log = std::fs::read_to_string(stack.logs.join("ratewire-api.log"))?;
    assert!(log.contains("rates"), "the cause is logged");
    Ok(())
}
