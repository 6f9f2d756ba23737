//! A read answered from a view kept in the API carries what every read
//! gets through the router: its `ETag` (and a 304 for it), the limit
//! headers, the CORS headers (the layer's own for a browser's request),
//! a request id, gzip for a large list; and a caller over its limit is
//! refused with the same headers.

use std::time::Duration;

use anyhow::{Context, Result};
use ratewire_e2e::{eventually, room_in_this_minute, sample, Stack};
use reqwest::header::HeaderMap;

/// What every read carries, whatever it answers.
const EVERY_READ: [&str; 8] = [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "ratelimit",
    "ratelimit-policy",
    "access-control-allow-origin",
    "access-control-expose-headers",
    "x-request-id",
];

async fn answer(
    stack: &Stack,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, HeaderMap, Vec<u8>)> {
    let mut request = stack.http().get(format!("{}{path}", stack.api_url));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    Ok((status, headers, response.bytes().await?.to_vec()))
}

fn carries_every_read_header(path: &str, headers: &HeaderMap) {
    for name in EVERY_READ {
        assert!(headers.contains_key(name), "{path}: no {name}: {headers:?}");
    }
    let vary: Vec<&str> = headers
        .get_all("vary")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert!(
        vary.iter().any(|v| v.contains("origin")),
        "{path}: vary {vary:?}"
    );
}

/// Views served from this process's memory so far, from the API's
/// `/metrics`.
async fn kept_served(stack: &Stack) -> Result<f64> {
    let text = stack
        .text_at(&format!("{}/metrics", stack.api_operator_url))
        .await
        .context("metrics")?;
    Ok(sample(&text, "ratewire_api_views_kept_served_total"))
}

#[tokio::test]
async fn a_kept_view_is_answered_with_every_header_a_read_gets() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key_on("reader", "pro").await?;
    let (bank, token) = stack.bank_with_token("KPT", "Kept Bank").await?;
    // Enough currencies for the lists to be sent gzip-encoded (1 KB).
    let mut rates = vec![r#"{"currency":"USD","cashBuying":101.25,"cashSelling":104,"transactionalBuying":101.5,"transactionalSelling":103.5}"#.to_owned()];
    for (i, code) in [
        "EUR", "GBP", "CHF", "JPY", "CAD", "AUD", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF", "TRY",
        "CNY",
    ]
    .iter()
    .enumerate()
    {
        rates.push(format!(
            r#"{{"currency":"{code}","cashBuying":{}.5,"cashSelling":{}.75}}"#,
            10 + i,
            11 + i
        ));
    }
    let board = format!(r#"{{"rates":[{}]}}"#, rates.join(","));
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);
    stack.wait_served("the board", bank, &key, "101.25").await?;
    let one = format!("/api/v1/rates?bankId={bank}");
    let paths = [
        one.clone(),
        format!("{one}&transactional=true&socialLinks=1"),
        "/api/v1/rates".to_owned(),
        "/api/v1/banks".to_owned(),
        "/api/v1/banks?withRecentEx=true".to_owned(),
        "/api/v1/rates/best-rates?currencyCode=usd".to_owned(),
        "/api/v1/currencies".to_owned(),
    ];
    let with_key = [("x-api-key", key.as_str())];
    for path in &paths {
        // Kept after a first read, and answered from memory.
        eventually(path, Duration::from_secs(10), || async {
            let before = kept_served(&stack).await.ok()?;
            let (status, _, _) = answer(&stack, path, &with_key).await.ok()?;
            (status == 200 && kept_served(&stack).await.ok()? > before).then_some(())
        })
        .await?;
        let (status, headers, body) = answer(&stack, path, &with_key).await?;
        assert_eq!(status, 200, "{path}");
        carries_every_read_header(path, &headers);
        assert_eq!(headers["cache-control"], "no-cache", "{path}");
        assert_eq!(headers["x-request-id"].len(), 36, "{path}: a new UUID");
        let etag = headers.get("etag").context("an etag")?.to_str()?.to_owned();

        let unchanged = [("x-api-key", key.as_str()), ("if-none-match", &etag)];
        let (status, headers, body_304) = answer(&stack, path, &unchanged).await?;
        assert_eq!(status, 304, "{path}");
        assert!(body_304.is_empty(), "{path}");
        assert_eq!(headers["etag"], etag.as_str(), "{path}");
        carries_every_read_header(path, &headers);

        let traced = [("x-api-key", key.as_str()), ("x-request-id", "trace-me-7")];
        let (_, headers, _) = answer(&stack, path, &traced).await?;
        assert_eq!(headers["x-request-id"], "trace-me-7", "{path}");

        // A browser's request: the CORS layer's own answer, the same body.
        let page = [
            ("x-api-key", key.as_str()),
            ("origin", "https://rates.example"),
        ];
        let (status, headers, from_page) = answer(&stack, path, &page).await?;
        assert_eq!(status, 200, "{path}");
        carries_every_read_header(path, &headers);
        assert_eq!(from_page, body, "{path}");
    }

    // A list is made gzip-encoded aside, then sent so to clients that
    // take it, as another representation (its own `ETag`).
    let gzip = [("x-api-key", key.as_str()), ("accept-encoding", "gzip")];
    let headers = eventually("a gzip encoding", Duration::from_secs(10), || async {
        let (_, headers, _) = answer(&stack, &one, &gzip).await.ok()?;
        headers.contains_key("content-encoding").then_some(headers)
    })
    .await?;
    assert_eq!(headers["content-encoding"], "gzip");
    assert!(headers["etag"].to_str()?.ends_with("-gz\""), "{headers:?}");
    carries_every_read_header(&one, &headers);

    let head = stack
        .http()
        .head(format!("{}{one}", stack.api_url))
        .header("x-api-key", &key)
        .send()
        .await?;
    assert_eq!(head.status(), 200);
    Ok(())
}

#[tokio::test]
async fn a_caller_over_its_limit_is_refused_with_the_limit_headers() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key_on("limited", "free").await?;
    let (bank, token) = stack.bank_with_token("LIM", "Limited Bank").await?;
    let board = r#"{"rates":[{"currency":"USD","cashBuying":101.25,"cashSelling":104}]}"#;
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    let path = format!("/api/v1/rates?bankId={bank}");
    let with_key = [("x-api-key", key.as_str())];
    stack.wait_served("the board", bank, &key, "101.25").await?;
    // The free plan's 60 a minute, spent within one minute.
    room_in_this_minute(20).await;
    let mut statuses = Vec::new();
    for _ in 0..70 {
        statuses.push(answer(&stack, &path, &with_key).await?.0);
    }
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    assert!(admitted <= 60, "{admitted}");
    assert_eq!(statuses.last(), Some(&429));

    let (status, headers, body) = answer(&stack, &path, &with_key).await?;
    assert_eq!(status, 429);
    let body: serde_json::Value = serde_json::from_slice(&body)?;
    assert_eq!(body["code"], "RATE_LIMIT_EXCEEDED");
    carries_every_read_header(&path, &headers);
    assert_eq!(headers["x-ratelimit-remaining"], "0");
    let retry_after: u64 = headers["retry-after"].to_str()?.parse()?;
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(
        headers["ratelimit"].to_str()?,
        format!(
            "\"minute\";r=0;t={}",
            headers["x-ratelimit-reset"].to_str()?
        )
    );
    Ok(())
}
