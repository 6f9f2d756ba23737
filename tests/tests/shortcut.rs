//! The API answers its most common reads (a kept view, a key it knows) on
//! a shortcut around its router. Those answers are the router's: the same
//! status, body and headers, request for request, as an instance with the
//! shortcut switched off gives; and everything the shortcut does not take
//! (browser pages, refused queries, unknown keys) still gets the router's.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use ratewire_e2e::{eventually, room_in_this_minute, sample, Stack};

/// Headers that differ between any two answers: when, which request, and
/// the limit's countdown (two instances count one key's requests together).
const VARYING: [&str; 5] = [
    "date",
    "x-request-id",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    // The IETF form of the two above.
    "ratelimit",
];

/// An answer as compared: status, headers but the varying ones, body bytes.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    headers: BTreeMap<String, Vec<String>>,
    body: Vec<u8>,
}

async fn answer(
    stack: &Stack,
    base: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(Answer, reqwest::header::HeaderMap)> {
    let mut request = stack.http().get(format!("{base}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await?;
    let all = response.headers().clone();
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in response.headers() {
        if !VARYING.contains(&name.as_str()) {
            headers
                .entry(name.as_str().to_owned())
                .or_default()
                .push(value.to_str()?.to_owned());
        }
    }
    Ok((
        Answer {
            status: response.status().as_u16(),
            headers,
            body: response.bytes().await?.to_vec(),
        },
        all,
    ))
}

/// Answers the shortcut gave so far, from the instance's `/metrics`.
async fn shortcut_answers(stack: &Stack, operator: &str) -> Result<u64> {
    let text = stack
        .text_at(&format!("{operator}/metrics"))
        .await
        .context("metrics")?;
    Ok(sample(&text, "ratewire_api_shortcut_answers_total") as u64)
}

/// `path` asked of the main instance, answered on its shortcut. A key's
/// answer and a kept view each last a second here; the request that finds
/// one just run out goes to the router (which learns it again), so a
/// request that was not counted is asked once more, up to ten times: on a
/// loaded machine (CI, 2 cores) a second passed between tries often enough
/// that three failed 1 run in 15.
async fn on_the_shortcut(
    stack: &Stack,
    instances: &Instances,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(Answer, reqwest::header::HeaderMap)> {
    for _ in 0..10 {
        let before = shortcut_answers(stack, &instances.main_operator).await?;
        let answered = answer(stack, &instances.main, path, headers).await?;
        if shortcut_answers(stack, &instances.main_operator).await? == before + 1 {
            return Ok(answered);
        }
    }
    anyhow::bail!("{path} {headers:?} never took the shortcut")
}

/// A stack's API (the shortcut on) and a second one with it off.
struct Instances {
    main: String,
    main_operator: String,
    router: String,
    router_operator: String,
}

async fn two_instances() -> Result<(Stack, Instances)> {
    let mut stack = Stack::start().await?;
    let (router, router_operator) = stack
        .start_api_with("api-router", &[("RATEWIRE_SHORTCUT", "false".into())])
        .await?;
    let instances = Instances {
        main: stack.api_url.clone(),
        main_operator: stack.api_operator_url.clone(),
        router,
        router_operator,
    };
    Ok((stack, instances))
}

#[tokio::test]
async fn shortcut_answers_are_the_routers_header_for_header() -> Result<()> {
    let (stack, instances) = two_instances().await?;
    let Instances {
        main,
        main_operator,
        router,
        router_operator,
    } = &instances;
    let key = stack.api_key_on("shortcut", "pro").await?;
    let (bank, token) = stack.bank_with_token("SHC", "Shortcut Bank").await?;
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
    // Every view on the main instance, now in Redis.
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
    for path in &paths {
        eventually(path, Duration::from_secs(10), || async {
            let (status, _) = stack.get(path, Some(&key)).await.ok()?;
            (status == 200).then_some(())
        })
        .await?;
    }

    let with_key = [("x-api-key", key.as_str())];
    for path in &paths {
        let etag = {
            let (_, headers) = answer(&stack, main, path, &with_key).await?;
            headers.get("etag").context("an etag")?.to_str()?.to_owned()
        };
        let variants: [Vec<(&str, &str)>; 4] = [
            vec![],
            vec![("accept-encoding", "gzip")],
            vec![("if-none-match", etag.as_str())],
            vec![("x-request-id", "from-the-client")],
        ];
        for extra in &variants {
            let headers: Vec<(&str, &str)> = with_key.iter().chain(extra).copied().collect();
            // Kept and known on both instances after a first request; a
            // list's gzip encoding is made aside, so asked for until made.
            for base in [main, router] {
                eventually("a gzip encoding", Duration::from_secs(10), || async {
                    let (answer, _) = answer(&stack, base, path, &headers).await.ok()?;
                    let gzip = answer.headers.contains_key("content-encoding");
                    let wanted = extra.contains(&("accept-encoding", "gzip"))
                        && answer.body.len() > 200
                        && answer
                            .headers
                            .get("vary")
                            .is_some_and(|v| v[0] == "accept-encoding");
                    (gzip || !wanted).then_some(())
                })
                .await?;
            }
            let (shortcut, all) = on_the_shortcut(&stack, &instances, path, &headers).await?;
            let (routed, _) = answer(&stack, router, path, &headers).await?;
            assert_eq!(shortcut, routed, "{path} with {extra:?}");
            assert!(all.contains_key("x-ratelimit-remaining") && all.contains_key("ratelimit"));
            let id = all.get("x-request-id").context("a request id")?.to_str()?;
            if extra.iter().any(|(n, _)| *n == "x-request-id") {
                assert_eq!(id, "from-the-client");
            } else {
                assert_eq!(id.len(), 36, "a new request id: {id}");
            }
            if extra.iter().any(|(n, _)| *n == "if-none-match") {
                assert_eq!(shortcut.status, 304, "{path}");
            }
            if extra.contains(&("accept-encoding", "gzip")) && path.contains("/rates?bankId") {
                assert!(
                    shortcut.headers.contains_key("content-encoding"),
                    "{path} gzip"
                );
            }
        }
    }
    assert_eq!(shortcut_answers(&stack, router_operator).await?, 0);

    // What the shortcut leaves to the router: a browser page, a query the
    // handler refuses, a key nobody knows, no key, another method.
    let unknown = "rwk_abcdefgh_0123456789abcdef0123456789abcdef";
    let others: [(&str, Vec<(&str, &str)>); 5] = [
        (
            one.as_str(),
            vec![("x-api-key", &key), ("origin", "https://rates.example")],
        ),
        ("/api/v1/rates?bankId=zero", vec![("x-api-key", &key)]),
        (
            "/api/v1/rates/best-rates?currencyCode=XXX",
            vec![("x-api-key", &key)],
        ),
        (one.as_str(), vec![("x-api-key", unknown)]),
        (one.as_str(), vec![]),
    ];
    for (path, headers) in &others {
        let before = shortcut_answers(&stack, main_operator).await?;
        let (routed_here, _) = answer(&stack, main, path, headers).await?;
        let (routed, _) = answer(&stack, router, path, headers).await?;
        assert_eq!(routed_here, routed, "{path} with {headers:?}");
        assert_eq!(shortcut_answers(&stack, main_operator).await?, before);
    }
    let head = stack
        .http()
        .head(format!("{main}{one}"))
        .header("x-api-key", &key)
        .send()
        .await?;
    assert_eq!(head.status(), 200);
    Ok(())
}

#[tokio::test]
async fn a_caller_over_its_limit_is_refused_on_the_shortcut_as_on_the_router() -> Result<()> {
    let (stack, instances) = two_instances().await?;
    let Instances {
        main,
        main_operator,
        router,
        ..
    } = &instances;
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
        statuses.push(answer(&stack, main, &path, &with_key).await?.0.status);
    }
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    assert!(admitted <= 60, "{admitted}");
    assert_eq!(statuses.last(), Some(&429));
    assert!(shortcut_answers(&stack, main_operator).await? > 0);
    let (mut refused, all) = on_the_shortcut(&stack, &instances, &path, &with_key).await?;
    let (mut routed, routed_all) = answer(&stack, router, &path, &with_key).await?;
    assert_eq!(refused.status, 429);
    // Seconds to the window's end: the two answers may straddle a second.
    let wait = |headers: &reqwest::header::HeaderMap| -> Option<i64> {
        headers.get("retry-after")?.to_str().ok()?.parse().ok()
    };
    let (a, b) = (
        wait(&all).context("retry-after")?,
        wait(&routed_all).context("retry-after")?,
    );
    assert!((a - b).abs() <= 1, "retry-after {a} and {b}");
    refused.headers.remove("retry-after");
    routed.headers.remove("retry-after");
    assert_eq!(refused, routed);
    Ok(())
}
