//! GET /api/v1/rates/best-rates, as api-v1 §4.4 and decisions.md describe
//! it (the API in process: see `super::world::World`).

use ratewire_e2e::{ago, Board};

use super::world::World;
use serde_json::{json, Value};

/// The best rates of `code`, required to be 200.
async fn best(world: &World, key: &str, code: &str) -> anyhow::Result<Value> {
    let (status, body) = world
        .get(
            &format!("/api/v1/rates/best-rates?currencyCode={code}"),
            Some(key),
        )
        .await?;
    anyhow::ensure!(status == 200, "{code}: {status} {body}");
    Ok(body)
}

#[tokio::test]
async fn best_buying_is_highest_best_selling_lowest_with_difference_and_series(
) -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("best").await?;
    let cbe = world
        .register_bank("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let awash = world.register_bank("AWASH", "Awash Bank").await?;
    // CBE buys USD best (155.10, up 0.25 from its previous board); Awash sells lowest.
    let cbe_boards = [(2, "154.85", "160"), (0, "155.10", "160.5")];
    for (days, buying, selling) in cbe_boards {
        let board = Board::at(ago(days, 1)).rate("USD", buying, selling);
        world.publish(cbe, &board).await?;
    }
    let board = Board::at(ago(0, 2))
        .rate("USD", 154, "158.75")
        .transactional("USD", "154.5", 158);
    world.publish(awash, &board).await?;

    let body = best(&world, &key, "usd").await?;
    assert_eq!(body["data"]["cashBuying"]["price"], 155.10);
    assert_eq!(body["data"]["cashSelling"]["price"], 158.75);
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

    let (_, raw) = world
        .get_raw("/api/v1/rates/best-rates?currencyCode=USD", Some(&key))
        .await?;
    assert!(raw.contains(r#""price":155.10"#), "published digits: {raw}");
    Ok(())
}

#[tokio::test]
async fn fields_no_bank_quotes_are_null_and_deactivated_banks_do_not_compete() -> anyhow::Result<()>
{
    let mut world = World::new().await?;
    let key = world.api_key("best").await?;
    let cbe = world.register_bank("CBE", "CBE").await?;
    let awash = world.register_bank("AWASH", "Awash").await?;
    for (id, buying) in [(cbe, 21), (awash, 20)] {
        world
            .publish(id, &Board::at(ago(0, 1)).rate("CNY", buying, 22))
            .await?;
    }
    let body = best(&world, &key, "CNY").await?;
    assert_eq!(body["data"]["cashBuying"]["bank"]["id"], cbe);
    assert!(body["data"]["transactionalBuying"].is_null());
    assert!(body["data"]["transactionalSelling"].is_null());

    world.update_bank(cbe, json!({"active": false})).await?;
    let body = best(&world, &key, "CNY").await?;
    assert_eq!(body["data"]["cashBuying"]["bank"]["id"], awash);
    world.update_bank(awash, json!({"active": false})).await?;
    // No active bank quotes CNY.
    let (status, body) = world
        .get("/api/v1/rates/best-rates?currencyCode=CNY", Some(&key))
        .await?;
    assert_eq!(
        (status, body["message"].as_str()),
        (404, Some("Currency not found"))
    );
    Ok(())
}

#[tokio::test]
async fn best_rates_validates_the_currency_code() -> anyhow::Result<()> {
    let world = World::new().await?;
    let key = world.api_key("best").await?;
    for query in [
        "",
        "?currencyCode=",
        "?currencyCode=US1",
        "?currencyCode=USDT",
    ] {
        let (status, body) = world
            .get(&format!("/api/v1/rates/best-rates{query}"), Some(&key))
            .await?;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["message"], "Validation errors occurred.");
        assert!(body["errors"]["currencyCode"].is_array(), "{body}");
    }
    for code in ["QQQ", "JPY"] {
        let (status, body) = world
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

/// The board `id`, required to be 200.
async fn board(world: &World, key: &str, id: uuid::Uuid) -> anyhow::Result<Value> {
    let (status, body) = world
        .get(&format!("/api/v1/boards/{id}"), Some(key))
        .await?;
    anyhow::ensure!(status == 200, "{status} {body}");
    Ok(body)
}

/// A newcomer's board with USD at ten times the market's (issue 60): the
/// board is accepted, its values are flagged on the board, and best-rates
/// keeps it out until the newcomer's next board repeats it.
#[tokio::test]
async fn a_tenfold_typo_is_flagged_kept_out_of_the_best_rates_and_unflagged_when_confirmed(
) -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("outliers").await?;
    let cbe = world
        .register_bank("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let awash = world.register_bank("AWASH", "Awash Bank").await?;
    let cbe_board = world
        .publish(cbe, &Board::at(ago(0, 4)).rate("USD", "155.10", "158.20"))
        .await?;
    world
        .publish(awash, &Board::at(ago(0, 4)).rate("USD", "154.90", "158.00"))
        .await?;
    let dashen = world.register_bank("DASHEN", "Dashen Bank").await?;
    world
        .publish(
            dashen,
            &Board::at(ago(0, 4)).rate("USD", "155.00", "158.30"),
        )
        .await?;
    let newcomer = world.register_bank("NEW", "New Bank").await?;
    let typo = world
        .publish(
            newcomer,
            &Board::at(ago(0, 3)).rate("USD", "1555.00", "1581.00"),
        )
        .await?;

    let flagged = board(&world, &key, typo).await?;
    assert_eq!(
        flagged["data"]["outliers"],
        json!([
            {"currencyCode": "USD", "field": "cashBuying", "value": 1555.0,
             "previous": null, "median": 155.0},
            {"currencyCode": "USD", "field": "cashSelling", "value": 1581.0,
             "previous": null, "median": 158.2}
        ]),
        "held against the median of CBE's, Awash's and Dashen's: {flagged}"
    );
    assert_eq!(
        board(&world, &key, cbe_board).await?["data"]["outliers"],
        json!([]),
        "nothing to hold CBE's first board against"
    );
    let body = best(&world, &key, "USD").await?;
    assert_eq!(body["data"]["cashBuying"]["price"], 155.10, "{body}");
    assert_eq!(body["data"]["cashBuying"]["bank"]["id"], cbe);
    assert_eq!(
        body["data"]["cashSelling"]["bank"]["id"], awash,
        "the newcomer's selling rate is flagged too"
    );

    // The newcomer's next board repeats the value: confirmed.
    let confirmed = world
        .publish(
            newcomer,
            &Board::at(ago(0, 2)).rate("USD", "1555.00", "1581.00"),
        )
        .await?;
    assert_eq!(
        board(&world, &key, confirmed).await?["data"]["outliers"],
        json!([])
    );
    let body = best(&world, &key, "USD").await?;
    assert_eq!(body["data"]["cashBuying"]["price"], 1555.0, "{body}");
    assert_eq!(body["data"]["cashBuying"]["bank"]["id"], newcomer);
    Ok(())
}
