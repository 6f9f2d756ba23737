//! Bank changes and the log never disagree: a change is committed with its
//! events, which reach the log as soon as the broker can take them, in
//! order, before any later board of that bank.

use std::time::Duration;

use ratewire_e2e::{eventually, Board, Stack};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn a_bank_registered_while_the_broker_is_frozen_reaches_the_log_before_its_boards(
) -> anyhow::Result<()> {
    let stack = Stack::builder()
        .own_broker()
        .env("RATEWIRE_PUBLISH_TIMEOUT_MS", "1000")
        .start()
        .await?;
    let key = stack.api_key("watcher").await?;
    stack.pause_broker(true)?;
    // Committed and answered although the broker cannot take its event yet.
    let bank = stack.register_bank("OUT", "Outbox Bank").await?;
    let token = stack.publisher_token(bank).await?;
    let board = Board::now().rate("USD", "155.1", "158");
    let (status, _) = stack.publish_board(bank, &token, &board).await?;
    assert_eq!(status, 503, "no board before its bank is on the log");
    assert_eq!(
        stack
            .sql_number("SELECT count(*) FROM ingest.outbox")
            .await?,
        Some(1),
        "the registration waits in the outbox"
    );

    stack.pause_broker(false)?;
    stack
        .wait_count(
            "the outbox drained",
            "SELECT count(*) FROM ingest.outbox",
            0,
            Duration::from_secs(15),
        )
        .await?;
    eventually("the board accepted", Duration::from_secs(15), || async {
        let (status, _) = stack.publish_board(bank, &token, &board).await.ok()?;
        (status == 202).then_some(())
    })
    .await?;
    stack.wait_served("the board", bank, &key, "155.1").await?;
    assert_eq!(
        stack
            .sql_number("SELECT count(*) FROM readmodel.dead_letters")
            .await?,
        Some(0),
        "nothing out of order on the log"
    );
    Ok(())
}

#[tokio::test]
async fn boards_outside_what_is_kept_exactly_are_refused_with_400() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("RUL", "Rules Bank").await?;
    for (board, field, message) in [
        (
            Board::at("0001-01-01T00:00:00Z").rate("USD", 1, 2),
            "asOf",
            "must not be before 1990-01-01T00:00:00Z",
        ),
        (
            Board::now().rate("USD", "1.0000000000000000000000000001", "2"),
            "rates[0].cashBuying",
            "must have at most 28 significant digits (they are kept exactly, never rounded)",
        ),
        (
            Board::now().rate("USD", "1", "99999999999"),
            "rates[0].cashSelling",
            "must be at most 1000000000",
        ),
    ] {
        let (status, body) = stack.publish_board(bank, &token, board).await?;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["errors"][field][0], message, "{body}");
    }
    Ok(())
}

#[tokio::test]
async fn a_schedule_is_set_changed_and_cleared_on_the_log_and_a_bad_one_changes_nothing(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let hourly = json!({"every": "PT1H"});
    let (status, bank) = stack
        .ingest_admin(
            Method::POST,
            "/v1/admin/banks",
            Some(json!({
                "code": "SCHED",
                "name": "Scheduled Bank",
                "imageUrl": "https://img.test/sched.png",
                "schedule": {"every": "PT60M"},
            })),
        )
        .await?;
    assert_eq!(status, 201, "{bank}");
    assert_eq!(bank["schedule"], hourly, "written in its shortest form");
    let id = bank["id"].as_i64().unwrap();
    let path = format!("/v1/admin/banks/{id}");
    let in_read_model = format!("SELECT schedule FROM readmodel.banks WHERE id = {id}");
    stack
        .wait_json("the schedule folded", &in_read_model, &hourly)
        .await?;

    // Each bad schedule is a 400 naming it, and changes nothing.
    for bad in [
        json!({"every": "PT5S"}),
        json!({"every": "P1M"}),
        json!({"days": ["Monday"], "by": "09:00"}),
        json!({"days": ["Mon"], "by": "9am"}),
        json!({"days": ["Mon"]}),
        json!({"every": "PT1H", "days": ["Mon"], "by": "09:00"}),
        json!("hourly"),
    ] {
        let (status, body) = stack
            .ingest_admin(Method::PATCH, &path, Some(json!({"schedule": bad})))
            .await?;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["errors"]["schedule"].is_array(), "{bad}: {body}");
        let (_, bank) = stack.ingest_admin(Method::GET, &path, None).await?;
        assert_eq!(bank["schedule"], hourly, "{bad} changed nothing");
    }
    let (status, body) = stack
        .ingest_admin(
            Method::POST,
            "/v1/admin/banks",
            Some(
                json!({"code": "BADS", "name": "Bad", "imageUrl": "https://img.test/b.png",
                        "schedule": {"every": "soon"}}),
            ),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"]["schedule"].is_array(), "{body}");
    let (_, banks) = stack
        .ingest_admin(Method::GET, "/v1/admin/banks", None)
        .await?;
    assert!(
        banks
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["code"] != "BADS"),
        "no bank registered: {banks}"
    );

    // A daily deadline, then none.
    let weekdays = json!({"days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "by": "09:30"});
    let changed = stack
        .update_bank(
            id,
            json!({"schedule": {"by": "09:30", "days": ["Fri", "Thu", "Wed", "Tue", "Mon"]}}),
        )
        .await?;
    assert_eq!(changed["schedule"], weekdays, "days in week order");
    stack
        .wait_json("the new schedule folded", &in_read_model, &weekdays)
        .await?;
    let cleared = stack.update_bank(id, json!({"schedule": null})).await?;
    assert!(cleared["schedule"].is_null(), "{cleared}");
    stack
        .wait_json("the schedule cleared", &in_read_model, &Value::Null)
        .await?;
    // Every version is kept: hourly, weekdays, none.
    let versions = stack
        .sql_number(&format!(
            "SELECT count(*) FROM readmodel.bank_versions WHERE id = {id}"
        ))
        .await?;
    assert_eq!(versions, Some(3));
    stack.assert_fold_matches_replay().await?;
    Ok(())
}
