//! GET /api/v1/currencies, as api-v1 §4.2 and decisions.md describe it (the
//! API in process: see `super::world::World`).

use ratewire_e2e::{ago, Board};

use super::world::World;
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
    let mut world = World::new().await?;
    let key = world.api_key("currencies").await?;
    let boards = [
        ("CBE", vec!["USD", "EUR"]),
        ("AWASH", vec!["USD", "GBP"]),
        ("DASHEN", vec!["USD", "GBP", "AED"]),
    ];
    let mut ids = vec![];
    for (code, currencies) in boards {
        let id = world.register_bank(code, code).await?;
        let board = currencies
            .into_iter()
            .fold(Board::at(ago(0, 1)), |board, c| board.rate(c, 1, 2));
        world.publish(id, &board).await?;
        ids.push(id);
    }
    let (_, body) = world.get("/api/v1/currencies", Some(&key)).await?;
    assert_eq!(symbols(&body).len(), 4, "four currencies: {body}");
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

    // A deactivated bank's quotes stop counting: AED gone and GBP down to
    // one bank.
    world.update_bank(ids[2], json!({"active": false})).await?;
    let (_, body) = world.get("/api/v1/currencies", Some(&key)).await?;
    assert_eq!(symbols(&body), ["USD", "EUR", "GBP"]);
    Ok(())
}

#[tokio::test]
async fn currencies_is_empty_before_any_board_and_needs_a_key() -> anyhow::Result<()> {
    let world = World::new().await?;
    let key = world.api_key("currencies").await?;
    let (status, body) = world.get("/api/v1/currencies", Some(&key)).await?;
    assert_eq!((status, &body["data"]), (200, &json!([])));
    let (status, _) = world
        .get(
            "/api/v1/currencies",
            Some("rwk_00000000_00000000000000000000000000000000"),
        )
        .await?;
    assert_eq!(status, 401);
    Ok(())
}
