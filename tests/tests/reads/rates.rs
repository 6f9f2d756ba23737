//! GET /api/v1/rates, as api-v1 §4.3 and decisions.md describe it, through
//! a bank's whole life (the API in process: see `super::world::World`).

use ratewire_e2e::{ago, Board};

use super::world::World;
use serde_json::json;

#[tokio::test]
async fn a_bank_that_never_published_is_listed_with_no_rates() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("rates").await?;
    let bank = world.register_bank("ENAT", "Enat Bank").await?;
    let (status, body) = world
        .get(&format!("/api/v1/rates?bankId={bank}"), Some(&key))
        .await?;
    assert_eq!(status, 200);
    let served = &body["data"][0]["data"][0];
    assert_eq!(served["exchangeRates"], json!([]));
    assert!(served["lastRatesUpdatedAt"].is_null());
    Ok(())
}

#[tokio::test]
async fn updates_show_everywhere_and_deactivation_removes_the_bank() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("rates").await?;
    let cbe = world
        .register_bank("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let awash = world.register_bank("AWASH", "Awash Bank").await?;
    for (id, buying) in [(cbe, 156), (awash, 155)] {
        world
            .publish(id, &Board::at(ago(0, 1)).rate("USD", buying, 160))
            .await?;
    }
    let (_, body) = world.get("/api/v1/rates", Some(&key)).await?;
    let list = body["data"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert!(list
        .iter()
        .all(|e| !e["data"][0]["exchangeRates"][0].is_null()));

    world
        .update_bank(cbe, json!({"name": "CBE Bank", "imageUrl": "https://img.test/new.png", "socialLinks": [{"platform": "x", "url": "https://x.com/cbe"}]}))
        .await?;
    let (_, body) = world
        .get(
            &format!("/api/v1/rates?bankId={cbe}&socialLinks=true"),
            Some(&key),
        )
        .await?;
    let served = &body["data"][0]["data"][0];
    assert_eq!(served["name"], "CBE Bank");
    assert_eq!(served["imageUrl"], "https://img.test/new.png");
    assert_eq!(
        served["socialLinks"],
        json!([{"platform": "x", "url": "https://x.com/cbe"}])
    );
    let (_, body) = world
        .get("/api/v1/rates/best-rates?currencyCode=USD", Some(&key))
        .await?;
    assert_eq!(body["data"]["cashBuying"]["bank"]["name"], "CBE Bank");

    world.update_bank(cbe, json!({"active": false})).await?;
    let (status, body) = world
        .get(&format!("/api/v1/rates?bankId={cbe}"), Some(&key))
        .await?;
    assert_eq!((status, &body["message"]), (404, &json!("Bank not found")));
    let (_, body) = world.get("/api/v1/rates", Some(&key)).await?;
    assert_eq!(body["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(body["data"][0]["data"][0]["id"], awash);
    Ok(())
}

#[tokio::test]
async fn flags_accept_true_false_one_and_zero() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("rates").await?;
    let bank = world.register_bank("CBE", "CBE").await?;
    let board = Board::at(ago(0, 1))
        .rate("USD", 1, 2)
        .transactional("USD", "1.5", "1.75");
    world.publish(bank, &board).await?;
    for (query, transactional) in [
        ("transactional=true", true),
        ("transactional=1", true),
        ("transactional=false", false),
        ("transactional=0", false),
    ] {
        let (status, body) = world
            .get(&format!("/api/v1/rates?bankId={bank}&{query}"), Some(&key))
            .await?;
        assert_eq!(status, 200, "{query}");
        let rate = &body["data"][0]["data"][0]["exchangeRates"][0];
        assert!(!rate.is_null(), "{query}");
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
