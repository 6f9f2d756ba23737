//! GET /api/v1/currencies, as api-v1 §4.2 and decisions.md describe it.

use ratewire_e2e::{ago, eventually, Stack, VISIBLE_WITHIN};
use serde_json::{json, Value};

fn symbols(body: &Value) -> Vec<String> {
    body["data"].as_array().map_or(vec![], |d| {
        d.iter()
            .map(|c| c["symbol"].as_str().unwrap_or("").to_owned())
            .collect()
    })
}

#[tokio::test]
async fn currencies_are_ordered_by_how_many_active_banks_quote_them_then_code() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let key = stack.api_key("currencies").await?;
    let boards = [
        (
            "CBE",
            r#"[{"currency":"USD","cashBuying":1,"cashSelling":2},{"currency":"EUR","cashBuying":1,"cashSelling":2}]"#,
        ),
        (
            "AWASH",
            r#"[{"currency":"USD","cashBuying":1,"cashSelling":2},{"currency":"GBP","cashBuying":1,"cashSelling":2}]"#,
        ),
        (
            "DASHEN",
            r#"[{"currency":"USD","cashBuying":1,"cashSelling":2},{"currency":"GBP","cashBuying":1,"cashSelling":2},{"currency":"AED","cashBuying":1,"cashSelling":2}]"#,
        ),
    ];
    let mut ids = vec![];
    for (code, rates) in boards {
        let (id, token) = stack.bank_with_token(code, code).await?;
        let board = format!(r#"{{"asOf":"{}","rates":{rates}}}"#, ago(0, 1));
        assert_eq!(stack.publish_board(id, &token, &board).await?.0, 202);
        ids.push(id);
    }
    let body = eventually("four currencies", VISIBLE_WITHIN, || async {
        let (_, body) = stack.get("/api/v1/currencies", Some(&key)).await.ok()?;
        (symbols(&body).len() == 4).then_some(body)
    })
    .await?;
    assert_eq!(body["message"], "success");
    assert_eq!(body["status"], 200);
    assert_eq!(symbols(&body), ["USD", "GBP", "AED", "EUR"]);
    assert_eq!(body["data"][0]["id"], "USD");
    assert!(body["data"][0]["name"]
        .as_str()
        .is_some_and(|n| !n.is_empty()));
    assert!(body["data"][0]["imageUrl"]
        .as_str()
        .is_some_and(|u| u.starts_with("https://")));

    // A deactivated bank's quotes stop counting.
    stack.update_bank(ids[2], json!({"active": false})).await?;
    eventually(
        "AED gone and GBP down to one bank",
        VISIBLE_WITHIN,
        || async {
            let (_, body) = stack.get("/api/v1/currencies", Some(&key)).await.ok()?;
            (symbols(&body) == ["USD", "EUR", "GBP"]).then_some(())
        },
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn currencies_is_empty_before_any_board_and_needs_a_key() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("currencies").await?;
    let (status, body) = stack.get("/api/v1/currencies", Some(&key)).await?;
    assert_eq!((status, &body["data"]), (200, &json!([])));
    let (status, _) = stack
        .get(
            "/api/v1/currencies",
            Some("rwk_00000000_00000000000000000000000000000000"),
        )
        .await?;
    assert_eq!(status, 401);
    Ok(())
}
