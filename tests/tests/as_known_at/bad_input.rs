//! Bad input is refused and changes nothing.

use chrono::Utc;
use ratewire_e2e::known_at::{as_known_at, instant};
use ratewire_e2e::{ago, Board, Stack};
use serde_json::{json, Value};

use super::revisions::revisions;
use super::steps::event_id;

/// Each read of rate data, once, for the bad-input checks.
const READS: [&str; 10] = [
    "/api/v1/banks",
    "/api/v1/currencies",
    "/api/v1/rates",
    "/api/v1/rates/best-rates?currencyCode=USD",
    "/api/v1/history?bankId=1&date=2026-01-01",
    "/api/v1/rates/series?bankId=1&currencyCode=USD",
    "/api/v1/convert?from=USD&to=ETB&amount=100",
    "/api/v1/rates/spreads?currencyCode=USD",
    "/api/v1/reference-rates",
    "/api/v1/reference-rates/series?currencyCode=USD",
];

#[tokio::test]
async fn bad_instants_and_board_ids_are_refused_and_an_instant_before_anything_finds_nothing(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("bad-input").await?;
    let (cbe, token) = stack.bank_with_token("CBE", "Commercial Bank").await?;
    let first = Board::at(ago(0, 2)).rate("USD", "155.10", "158.20");
    let accepted = stack.push_and_wait(cbe, &token, &first).await?;
    let before = stack
        .get_raw(&format!("/api/v1/rates?bankId={cbe}"), Some(&key))
        .await?;

    let future = instant(Utc::now() + chrono::Duration::hours(1));
    for read in READS {
        for bad in [
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-29",
            future.as_str(),
        ] {
            let path = as_known_at(read, bad);
            let (status, body) = stack.get(&path, Some(&key)).await?;
            assert_eq!(status, 400, "{path}: {body}");
            assert_eq!(
                body["message"], "Validation errors occurred.",
                "{path}: {body}"
            );
            assert!(
                body["errors"]["asKnownAt"]
                    .as_array()
                    .is_some_and(|e| !e.is_empty()),
                "{path}: {body}"
            );
        }
    }

    // Before the bank existed: what the API would have answered then.
    let long_ago = "2020-01-01T00:00:00Z";
    let (status, banks) = stack
        .get(&as_known_at("/api/v1/banks", long_ago), Some(&key))
        .await?;
    assert_eq!((status, &banks["data"]), (200, &json!([])), "{banks}");
    assert_eq!(banks["asKnownAt"], "2020-01-01T00:00:00.000Z", "{banks}");
    let (status, rates) = stack
        .get(
            &as_known_at(&format!("/api/v1/rates?bankId={cbe}"), long_ago),
            Some(&key),
        )
        .await?;
    assert_eq!(
        (status, &rates["message"]),
        (404, &json!("Bank not found")),
        "{rates}"
    );
    // An instant with an offset is the same instant in UTC, to the
    // millisecond.
    let (status, rates) = stack
        .get(
            &as_known_at(
                &format!("/api/v1/rates?bankId={cbe}"),
                &instant(Utc::now()).replace('Z', "%2B00:00"),
            ),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200, "{rates}");
    assert!(
        rates["asKnownAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z') && t.len() == 24),
        "{rates}"
    );

    // Board ids: unknown, malformed.
    let unknown = uuid::Uuid::now_v7();
    let (status, body) = stack
        .get(&format!("/api/v1/boards/{unknown}"), Some(&key))
        .await?;
    assert_eq!(status, 404, "{body}");
    let (status, body) = stack.get("/api/v1/boards/not-a-uuid", Some(&key)).await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"]["eventId"].is_array(), "{body}");
    let (status, body) = stack
        .get(
            &format!("/api/v1/boards/{}", event_id(&accepted)),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    // Revisions: a malformed bank or instant.
    for bad in [
        "?bankId=abc",
        "?from=yesterday",
        "?to=2026-13-01T00:00:00Z",
        "?format=xml",
    ] {
        let path = format!("/api/v1/revisions{bad}");
        let (status, body) = stack.get(&path, Some(&key)).await?;
        assert_eq!(status, 400, "{path}: {body}");
    }

    // An overlong reason, on a board and on a retraction: 400, nothing
    // published.
    let long = "x".repeat(501);
    let (status, body) = stack
        .publish_board(
            cbe,
            &token,
            Board::at(ago(0, 1))
                .rate("USD", "155.20", "158.30")
                .reason(&long),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"]["reason"].is_array(), "{body}");
    let response = stack
        .http()
        .delete(format!(
            "{}/v1/banks/{cbe}/boards/{}",
            stack.ingest_url,
            event_id(&accepted)
        ))
        .bearer_auth(&token)
        .json(&json!({ "reason": long }))
        .send()
        .await?;
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await?;
    assert!(body["errors"]["reason"].is_array(), "{body}");

    // Nothing changed.
    let after = stack
        .get_raw(&format!("/api/v1/rates?bankId={cbe}"), Some(&key))
        .await?;
    assert_eq!(before, after);
    let (_, revisions) = stack.get("/api/v1/revisions", Some(&key)).await?;
    assert!(self::revisions(&revisions).is_empty(), "{revisions}");
    Ok(())
}
