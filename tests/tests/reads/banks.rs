//! GET /api/v1/banks, as api-v1 §4.1 and decisions.md describe it: the
//! reads in process (see `super::world::World`), and the list through bank
//! changes made at ingest's operator endpoint.

use ratewire_e2e::{ago, eventually, Board, Stack, VISIBLE_WITHIN};

use super::world::World;
use serde_json::{json, Value};

async fn banks_when(
    stack: &Stack,
    key: &str,
    query: &str,
    ready: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    eventually("the expected /banks", VISIBLE_WITHIN, || async {
        let (status, body) = stack
            .get(&format!("/api/v1/banks{query}"), Some(key))
            .await
            .ok()?;
        (status == 200 && ready(&body)).then_some(body)
    })
    .await
}

/// /banks`query`, required to be 200.
async fn banks(world: &World, key: &str, query: &str) -> anyhow::Result<Value> {
    let (status, body) = world
        .get(&format!("/api/v1/banks{query}"), Some(key))
        .await?;
    anyhow::ensure!(status == 200, "{query}: {status} {body}");
    Ok(body)
}

#[tokio::test]
async fn banks_lists_active_banks_by_id_with_string_ids() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("banks").await?;
    let cbe = world
        .register_bank("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let awash = world.register_bank("AWASH", "Awash Bank").await?;
    world
        .publish(cbe, &Board::at(ago(0, 1)).rate("USD", "155.10", "158.2"))
        .await?;

    let body = banks(&world, &key, "").await?;
    assert_eq!(body["message"], "Success");
    assert_eq!(body["status"], 200);
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(
        data[0]["id"],
        json!(cbe.to_string()),
        "the bank id is a string on /banks"
    );
    assert_eq!(data[1]["id"], json!(awash.to_string()));
    assert_eq!(data[0]["name"], "Commercial Bank of Ethiopia");
    assert_eq!(data[0]["code"], "CBE");
    assert_eq!(data[0]["imageUrl"], "https://img.test/CBE.png");
    assert!(!data[0]["lastRatesUpdatedAt"].is_null());
    assert!(
        data[0].get("exchangeRates").is_none(),
        "no rates without withRecentEx"
    );
    assert!(
        data[1]["lastRatesUpdatedAt"].is_null(),
        "a bank that never published"
    );
    Ok(())
}

#[tokio::test]
async fn with_recent_ex_includes_the_current_board_without_differences() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("banks").await?;
    let cbe = world
        .register_bank("CBE", "Commercial Bank of Ethiopia")
        .await?;
    for (hours, buying) in [(3, "150.5"), (1, "151.25")] {
        let board = Board::at(ago(0, hours))
            .rate("EUR", buying, 190)
            .transactional("EUR", 151, 189);
        world.publish(cbe, &board).await?;
    }
    let body = banks(&world, &key, "?withRecentEx=true").await?;
    let rate = &body["data"][0]["exchangeRates"][0];
    assert_eq!(rate["cashBuying"], 151.25);
    assert_eq!(rate["currency"]["symbol"], "EUR");
    assert_eq!(rate["transactionalBuying"], 151);
    assert!(rate.get("difference").is_none(), "no difference on /banks");
    assert_eq!(
        body["data"][0]["exchangeRates"].as_array().unwrap().len(),
        1,
        "one entry per currency"
    );
    Ok(())
}

#[tokio::test]
async fn bank_updates_show_and_deactivated_banks_leave_the_list() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("banks").await?;
    let cbe = stack
        .register_bank("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let awash = stack.register_bank("AWASH", "Awash Bank").await?;
    banks_when(&stack, &key, "", |b| {
        b["data"].as_array().is_some_and(|d| d.len() == 2)
    })
    .await?;

    stack
        .update_bank(awash, json!({"name": "Awash International Bank"}))
        .await?;
    banks_when(&stack, &key, "", |b| {
        b["data"][1]["name"] == "Awash International Bank"
    })
    .await?;

    // A change that changes nothing is refused, and changes nothing.
    let empty = stack.update_bank(awash, json!({})).await;
    let refusal = format!("{:#}", empty.expect_err("an empty change is refused"));
    assert!(
        refusal.contains("400") && refusal.contains("at least one of"),
        "{refusal}"
    );

    stack.update_bank(cbe, json!({"active": false})).await?;
    let body = banks_when(&stack, &key, "", |b| {
        b["data"].as_array().is_some_and(|d| d.len() == 1)
    })
    .await?;
    assert_eq!(body["data"][0]["code"], "AWASH");

    stack.update_bank(cbe, json!({"active": true})).await?;
    banks_when(&stack, &key, "", |b| {
        b["data"].as_array().is_some_and(|d| d.len() == 2)
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn banks_rejects_a_bad_flag_and_requires_a_key() -> anyhow::Result<()> {
    let world = World::new().await?;
    let key = world.api_key("banks").await?;
    let (status, body) = world
        .get("/api/v1/banks?withRecentEx=yes", Some(&key))
        .await?;
    assert_eq!(status, 400);
    assert_eq!(body["message"], "Validation errors occurred.");
    assert_eq!(
        body["errors"]["withRecentEx"],
        json!(["withRecentEx must be true, false, 1 or 0"])
    );
    let (status, body) = world.get("/api/v1/banks", None).await?;
    assert_eq!(
        (status, body["message"].as_str()),
        (401, Some("API key is required"))
    );
    Ok(())
}
