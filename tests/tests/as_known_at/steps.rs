//! What the story's steps do: publish, retract, import a reference day,
//! and wait until the step is served.

use anyhow::ensure;
use chrono::{DateTime, Utc};
use ratewire_e2e::{eventually, Board, Stack, ADMIN_TOKEN, VISIBLE_WITHIN};
use serde_json::{json, Value};

/// A board quoting USD and EUR, each with a transactional pair unless
/// `None`.
pub(crate) fn board(
    as_of: &str,
    usd: [&str; 4],
    eur: [&str; 2],
    eur_transactional: Option<[&str; 2]>,
) -> Board {
    let board = Board::at(as_of)
        .rate("USD", usd[0], usd[1])
        .transactional("USD", usd[2], usd[3])
        .rate("EUR", eur[0], eur[1]);
    match eur_transactional {
        Some([buying, selling]) => board.transactional("EUR", buying, selling),
        None => board,
    }
}

/// Pushes `board` for `bank`, requires 202 and waits until it is served;
/// ingest's answer (`eventId`, `knownAt`).
pub(crate) async fn publish(
    stack: &Stack,
    bank: i64,
    token: &str,
    board: &Board,
) -> anyhow::Result<Value> {
    stack.push_and_wait(bank, token, board).await
}

/// Retracts `board` of `bank` with a reason; the retraction's 202 answer.
pub(crate) async fn retract(
    stack: &Stack,
    bank: i64,
    token: &str,
    board: &str,
    reason: &str,
) -> anyhow::Result<Value> {
    let response = stack
        .http()
        .delete(format!(
            "{}/v1/banks/{bank}/boards/{board}",
            stack.ingest_url
        ))
        .bearer_auth(token)
        .json(&json!({ "reason": reason }))
        .send()
        .await?;
    let status = response.status().as_u16();
    let body: Value = response.json().await?;
    ensure!(status == 202, "retracting {board}: {status} {body}");
    Ok(body)
}

/// Imports a National Bank day through ingest's operator listener.
pub(crate) async fn import_reference_day(stack: &Stack, body: &str) -> anyhow::Result<()> {
    let response = stack
        .http()
        .post(format!(
            "{}/v1/admin/reference-rates",
            stack.ingest_operator_url
        ))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await?;
    let status = response.status().as_u16();
    ensure!(
        status == 202,
        "importing a reference day: {status} {}",
        response.text().await?
    );
    Ok(())
}

/// Waits until GET `path` answers `status` with a body containing
/// `needle`.
pub(crate) async fn wait_for(
    stack: &Stack,
    key: &str,
    path: &str,
    status: u16,
    needle: &str,
) -> anyhow::Result<()> {
    eventually(
        &format!("{path} answering {status} with {needle}"),
        VISIBLE_WITHIN,
        || async {
            let (seen, body) = stack.get_raw(path, Some(key)).await.ok()?;
            (seen == status && body.contains(needle)).then_some(())
        },
    )
    .await
}

pub(crate) fn event_id(answer: &Value) -> String {
    answer["eventId"].as_str().expect("an eventId").to_owned()
}

pub(crate) fn time(text: &Value) -> Option<DateTime<Utc>> {
    text.as_str()?.parse().ok()
}
