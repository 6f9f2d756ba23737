//! Views kept in the API's memory change as soon as the projector changes
//! them in Redis: every kind of view, a bank's removal included, shows its
//! change well within the cache's age limit, here a minute, so nothing
//! below is explained by entries running out.

use std::io::Read;
use std::time::Duration;

use ratewire_e2e::{eventually, Board, Stack};
use serde_json::{json, Value};

/// Far longer than any wait below: a change seen within those waits was
/// seen because its entry dropped the kept view.
const KEPT_FOR: &str = "60000";
const SEEN_WITHIN: Duration = Duration::from_secs(10);

async fn served(stack: &Stack, path: &str, key: &str) -> Option<Value> {
    let (status, body) = stack.get(path, Some(key)).await.ok()?;
    (status == 200).then_some(body)
}

/// Polls `path` until `check` holds for its body.
async fn until(
    stack: &Stack,
    what: &str,
    path: &str,
    key: &str,
    check: impl Fn(&Value) -> bool,
) -> anyhow::Result<()> {
    eventually(what, SEEN_WITHIN, || async {
        let body = served(stack, path, key).await?;
        check(&body).then_some(())
    })
    .await
}

fn mentions(body: &Value, needle: &str) -> bool {
    body.to_string().contains(needle)
}

#[tokio::test]
async fn every_kept_view_changes_when_the_projector_changes_it() -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_VIEW_CACHE_MS", KEPT_FOR)
        .start()
        .await?;
    let key = stack.api_key_on("kept", "pro").await?;
    let (bank, token) = stack.bank_with_token("KPT", "Kept Bank").await?;
    let first = Board::now().rate("USD", "101.25", 104);
    assert_eq!(stack.publish_board(bank, &token, first).await?.0, 202);
    stack
        .wait_served("the first board", bank, &key, "101.25")
        .await?;

    let one = format!("/api/v1/rates?bankId={bank}");
    let views = [
        one.as_str(),
        "/api/v1/rates",
        "/api/v1/banks?withRecentEx=true",
        "/api/v1/rates/best-rates?currencyCode=USD",
        "/api/v1/currencies",
    ];
    // Each view as the first board made it, read often enough to be kept.
    for path in views {
        let expect = if path.ends_with("currencies") {
            "USD"
        } else {
            "101.25"
        };
        until(&stack, path, path, &key, |b| mentions(b, expect)).await?;
        for _ in 0..3 {
            served(&stack, path, &key).await;
        }
    }

    let second = Board::now()
        .rate("USD", "102.5", 104)
        .rate("EUR", "120.75", 125);
    assert_eq!(stack.publish_board(bank, &token, second).await?.0, 202);
    for path in &views[..4] {
        until(&stack, path, path, &key, |b| mentions(b, "102.5")).await?;
    }
    until(&stack, "/currencies names EUR", views[4], &key, |b| {
        mentions(b, "\"EUR\"")
    })
    .await?;
    until(
        &stack,
        "best-rates EUR",
        "/api/v1/rates/best-rates?currencyCode=EUR",
        &key,
        |b| mentions(b, "120.75"),
    )
    .await?;

    // Its removal too: the views go, and the lists lose it.
    stack.update_bank(bank, json!({"active": false})).await?;
    eventually("the bank's rates gone", SEEN_WITHIN, || async {
        let (status, _) = stack.get_raw(&one, Some(&key)).await.ok()?;
        (status == 404).then_some(())
    })
    .await?;
    for path in &views[1..3] {
        until(&stack, path, path, &key, |b| !mentions(b, "Kept Bank")).await?;
    }
    eventually("best-rates USD gone", SEEN_WITHIN, || async {
        let (status, _) = stack.get_raw(views[3], Some(&key)).await.ok()?;
        (status == 404).then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_list_is_sent_gzip_encoded_to_clients_that_take_it() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key_on("gzip", "pro").await?;
    let (bank, token) = stack.bank_with_token("GZP", "Gzip Bank").await?;
    let board = ["USD", "EUR", "GBP", "CHF", "JPY", "CNY", "AED", "SAR"]
        .iter()
        .enumerate()
        .fold(Board::now(), |board, (i, c)| {
            board.rate(c, format!("{}.5", 10 + i), format!("{}.75", 11 + i))
        });
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    until(&stack, "the list", "/api/v1/rates", &key, |b| {
        mentions(b, "17.5")
    })
    .await?;
    let url = format!("{}/api/v1/rates", stack.api_url);
    let plain = stack
        .http()
        .get(&url)
        .header("x-api-key", &key)
        .send()
        .await?;
    assert_eq!(plain.headers()["vary"], "accept-encoding");
    assert!(plain.headers().get("content-encoding").is_none());
    let plain_tag = plain.headers()["etag"].to_str()?.to_owned();
    let plain_body = plain.bytes().await?;
    // The encoding is made once the list is kept in memory: ask until then.
    let (encoded, tag) = eventually("a gzip answer", SEEN_WITHIN, || async {
        let response = stack
            .http()
            .get(&url)
            .header("x-api-key", &key)
            .header("accept-encoding", "br;q=1.0, gzip;q=0.8")
            .send()
            .await
            .ok()?;
        let gzip = response
            .headers()
            .get("content-encoding")
            .is_some_and(|v| v == "gzip");
        let tag = response.headers().get("etag")?.to_str().ok()?.to_owned();
        let body = response.bytes().await.ok()?;
        gzip.then_some((body, tag))
    })
    .await?;
    let mut decoded = Vec::new();
    flate2::read::GzDecoder::new(&encoded[..]).read_to_end(&mut decoded)?;
    assert_eq!(decoded, plain_body, "the same answer");
    assert!(
        encoded.len() * 3 < plain_body.len(),
        "{} of {}",
        encoded.len(),
        plain_body.len()
    );
    assert_eq!(tag, format!("{}-gz\"", plain_tag.trim_end_matches('"')));
    // The encoded answer is its own representation: asking again with its
    // tag is answered 304.
    let again = stack
        .http()
        .get(&url)
        .header("x-api-key", &key)
        .header("accept-encoding", "gzip")
        .header("if-none-match", &tag)
        .send()
        .await?;
    assert_eq!(again.status(), 304, "{:?} asked {tag}", again.headers());
    Ok(())
}
