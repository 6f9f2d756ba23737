//! `RATEWIRE_READ_DATABASE_URL`: the API reads history and series from a
//! replica, and from the primary while the replica does not answer.

use chrono::{Duration, Utc};
use ratewire_e2e::{at, day, eventually, Board, Stack, VISIBLE_WITHIN};
use serde_json::Value;

/// Waits until the API's /readyz reports the replica `up` (or not) and the
/// `status` that goes with it.
async fn replica_reported(stack: &Stack, up: bool, status: &str) -> anyhow::Result<()> {
    eventually(
        &format!("readiness: replica {up}, {status}"),
        VISIBLE_WITHIN,
        || async {
            let ready: Value = stack.json_at(&format!("{}/readyz", stack.api_url)).await?;
            (ready["replica"] == up && ready["status"] == status).then_some(())
        },
    )
    .await
}

#[tokio::test]
async fn history_and_series_read_the_replica_and_the_primary_while_it_is_away() -> anyhow::Result<()>
{
    let mut stack = Stack::builder()
        .postgres_through_proxy()
        .read_replica()
        .start()
        .await?;
    let key = stack.api_key("replica").await?;
    let (cbe, token) = stack.bank_with_token("CBE", "CBE").await?;
    let board = Board::at(at(2, 9)).rate("USD", "151", "160");
    assert_eq!(stack.publish_board(cbe, &token, &board).await?.0, 202);
    let history = format!("/api/v1/history?bankId={cbe}&date={}", day(2));
    let from = (Utc::now() - Duration::days(3)).date_naive();
    let series = format!("/api/v1/rates/series?bankId={cbe}&from={from}");
    eventually("the board in history", VISIBLE_WITHIN, || async {
        let (status, body) = stack.get(&history, Some(&key)).await.ok()?;
        (status == 200 && body["data"]["cashBuying"] == 151).then_some(())
    })
    .await?;
    replica_reported(&stack, true, "ready").await?;

    // The primary cut off: history and series still answer, from the replica.
    stack.postgres_down()?;
    let (status, body) = stack.get(&history, Some(&key)).await?;
    assert_eq!(
        (status, &body["data"]["cashBuying"]),
        (200, &151.into()),
        "{body}"
    );
    let (status, body) = stack.get(&series, Some(&key)).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["points"].as_array().unwrap().len(), 3);
    stack.postgres_up().await?;

    // The replica cut off: readiness says so, and the primary answers.
    stack.replica_down()?;
    replica_reported(&stack, false, "degraded").await?;
    let (status, body) = stack.get(&history, Some(&key)).await?;
    assert_eq!(
        (status, &body["data"]["cashBuying"]),
        (200, &151.into()),
        "{body}"
    );
    let (status, _) = stack.get(&series, Some(&key)).await?;
    assert_eq!(status, 200);

    // And it is read again once it answers.
    stack.replica_up().await?;
    replica_reported(&stack, true, "ready").await?;
    stack.postgres_down()?;
    let (status, _) = stack.get(&history, Some(&key)).await?;
    assert_eq!(status, 200);
    stack.postgres_up().await?;
    Ok(())
}
