//! Boards that repeat their bank's values (docs/operations.md, "Boards
//! stored against a base"): each is still recorded with its time, its
//! repeated values are stored once, and every reader answers as if each
//! board held all of its values, the fold equal to a replay.

use ratewire_e2e::{hours_apart_in_one_month, Board, Stack, VISIBLE_WITHIN};
use serde_json::{json, Value};

/// A board of four currencies, EUR's cash buying as given.
fn four(as_of: &str, eur: &str) -> Board {
    Board::at(as_of)
        .rate("USD", "155.10", "158.20")
        .transactional("USD", "156.00", "157.50")
        .rate("EUR", eur, "173.00")
        .rate("GBP", "199.00", "203.00")
        .rate("CHF", "181.00", "185.00")
}

/// The board's values of `code` as `/boards/{eventId}` shows them.
async fn on_board(stack: &Stack, key: &str, event_id: &str, code: &str) -> anyhow::Result<Value> {
    let (status, board) = stack
        .get(&format!("/api/v1/boards/{event_id}"), Some(key))
        .await?;
    anyhow::ensure!(status == 200, "board {event_id}: {status} {board}");
    let rate = board["data"]["rates"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["currency"]["symbol"] == code)
        .cloned()
        .unwrap_or(Value::Null);
    Ok(json!([rate["cashBuying"], rate["transactionalSelling"]]))
}

#[tokio::test]
async fn a_board_repeating_its_bank_s_values_stores_only_what_changed_and_answers_in_full(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("repeats").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let (mut ids, mut known) = (Vec::new(), Vec::new());
    // One month's boards: a base never reaches into the month before.
    let times = hours_apart_in_one_month(3);
    for (as_of, eur) in times.iter().zip(["170.00", "170.00", "170.50"]) {
        let board = four(as_of, eur);
        let (status, accepted) = stack.publish_board(bank, &token, &board).await?;
        assert_eq!(status, 202, "{accepted}");
        ids.push(accepted["eventId"].as_str().unwrap_or_default().to_owned());
        known.push(accepted["knownAt"].as_str().unwrap_or_default().to_owned());
        stack.wait_board_served(bank, &board).await?;
    }
    stack.wait_applied(4, VISIBLE_WITHIN).await?;

    // The second board stores nothing of its own, the third EUR alone;
    // both read the rest from the first.
    let stored = |id: &str| {
        format!(
            "SELECT json_build_array(base_id,
                    cardinality(array_remove(cash_buying, NULL)))
             FROM readmodel.board_versions WHERE event_id = '{id}'"
        )
    };
    assert_eq!(
        stack.sql_json(&stored(&ids[0])).await?,
        Some(json!([null, 4]))
    );
    assert_eq!(
        stack.sql_json(&stored(&ids[1])).await?,
        Some(json!([ids[0], 0]))
    );
    assert_eq!(
        stack.sql_json(&stored(&ids[2])).await?,
        Some(json!([ids[0], 1]))
    );

    // /rates: the latest board in full, its difference from the one before.
    let (_, rates) = stack
        .get(
            &format!("/api/v1/rates?bankId={bank}&transactional=true"),
            Some(&key),
        )
        .await?;
    let served: Vec<Value> = rates["data"][0]["data"][0]["exchangeRates"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            json!([
                r["currency"]["symbol"],
                r["cashBuying"],
                r["difference"]["cashBuying"],
                r["transactionalSelling"]
            ])
        })
        .collect();
    for expected in [
        json!(["USD", 155.1, 0.0, 157.5]),
        json!(["EUR", 170.5, 0.5, null]),
        json!(["CHF", 181.0, 0.0, null]),
    ] {
        assert!(served.contains(&expected), "{expected} in {served:?}");
    }

    // Each board as published, the repeated ones included.
    for id in &ids {
        assert_eq!(
            on_board(&stack, &key, id, "USD").await?,
            json!([155.1, 157.5])
        );
    }
    assert_eq!(
        on_board(&stack, &key, &ids[1], "EUR").await?,
        json!([170.0, null])
    );

    // The raw series: one point per board, each with its board's time.
    let (status, series) = stack
        .get(
            &format!(
                "/api/v1/rates/series?bankId={bank}&currencyCode=USD&interval=raw&from={}",
                &times[0][..10]
            ),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200, "{series}");
    let points = series["data"]["points"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(points.len(), 3, "{series}");
    assert!(
        points
            .iter()
            .all(|p| p["cashBuying"] == 155.1 && p["transactionalSelling"] == 157.5),
        "{series}"
    );

    // As known when the second board was: the second, in full, no
    // difference from the first.
    let (status, then) = stack
        .get(
            &format!("/api/v1/rates?bankId={bank}&asKnownAt={}", known[1]),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200, "{then}");
    let eur = then["data"][0]["data"][0]["exchangeRates"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["currency"]["symbol"] == "EUR")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(eur["cashBuying"], 170.0, "{then}");
    assert_eq!(eur["difference"]["cashBuying"], 0.0, "{then}");

    stack.assert_fold_matches_replay().await?;
    Ok(())
}
