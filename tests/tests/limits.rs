//! Keys, plans and limits (decisions.md "Keys, limits, usage"), counted in
//! the real Redis.

use std::time::Duration;

use ratewire_e2e::{room_in_this_minute, Stack, ADMIN_TOKEN};
use reqwest::header::HeaderMap;
use serde_json::{json, Value};

fn limit_headers(headers: &HeaderMap) -> (u64, u64, u64) {
    let number = |name: &str| {
        headers
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    (
        number("x-ratelimit-limit"),
        number("x-ratelimit-remaining"),
        number("x-ratelimit-reset"),
    )
}

/// The IETF fields (draft-ietf-httpapi-ratelimit-headers) agree with the
/// X- ones: the plan's two policies, and the minute window's numbers, or
/// the month's after a quota 429 (then `t` is Retry-After).
fn assert_ietf_fields_agree(headers: &HeaderMap, month_quota: u64, quota_refused: bool) {
    let text = |name: &str| {
        headers
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    let (limit, remaining, reset) = limit_headers(headers);
    assert_eq!(
        text("ratelimit-policy"),
        format!("\"minute\";q={limit};w=60, \"month\";q={month_quota};w=2592000")
    );
    let expected = if quota_refused {
        format!("\"month\";r=0;t={}", text("retry-after"))
    } else {
        format!("\"minute\";r={remaining};t={reset}")
    };
    assert_eq!(text("ratelimit"), expected);
}

async fn call(
    stack: &Stack,
    path: &str,
    key: Option<&str>,
    forwarded_for: Option<&str>,
) -> anyhow::Result<(u16, HeaderMap, Value)> {
    let mut request = stack.http().get(format!("{}{path}", stack.api_url));
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    if let Some(ip) = forwarded_for {
        request = request.header("x-forwarded-for", ip);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body: Value = response.json().await?;
    stack.conforms(path, status, &body);
    Ok((status, headers, body))
}

#[tokio::test]
async fn every_response_carries_the_rate_limit_headers() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key_on("headers", "free").await?;
    for (path, key, status) in [
        ("/api/v1/currencies", Some(key.as_str()), 200),
        ("/api/v1/rates?bankId=x", Some(key.as_str()), 400),
        ("/api/v1/rates?bankId=9", Some(key.as_str()), 404),
        ("/api/v1/unknown", Some(key.as_str()), 404),
        ("/api/v1/currencies", None, 401),
    ] {
        let (got, headers, _) = call(&stack, path, key, None).await?;
        assert_eq!(got, status, "{path}");
        let (limit, remaining, reset) = limit_headers(&headers);
        assert_eq!(limit, if key.is_some() { 60 } else { 10 }, "{path}");
        assert_ietf_fields_agree(&headers, if key.is_some() { 10_000 } else { 1_000 }, false);
        assert!(remaining < limit, "{path}: this request was counted");
        assert!(
            (1..=60).contains(&reset),
            "reset is seconds to the window's end: {reset}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_free_key_admits_exactly_60_of_1000_concurrent_requests() -> anyhow::Result<()> {
    // Shared counting, with Redis answering: a budget no busy test machine
    // overruns. Counting while Redis is slow or gone has tests of its own
    // (redis_faults.rs), which can only promise "never more than 60".
    let stack = Stack::builder()
        .env("RATEWIRE_REDIS_BUDGET_MS", "2000")
        .start()
        .await?;
    let key = stack.api_key_on("burst", "free").await?;
    room_in_this_minute(20).await;
    let url = format!("{}/api/v1/currencies", stack.api_url);
    let requests = (0..1000).map(|_| {
        let request = stack.http().get(&url).header("x-api-key", &key).send();
        async move {
            let response = request.await?;
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap_or("").to_owned());
            assert_ietf_fields_agree(response.headers(), 10_000, false);
            if status == 429 {
                let retry_after = retry_after.as_deref().unwrap_or_default();
                let reset = response.headers()["x-ratelimit-reset"].to_str()?;
                assert_eq!(retry_after, reset, "the minute's reset");
            }
            let body: Value = response.json().await?;
            anyhow::Ok((status, retry_after, body))
        }
    });
    let results = futures_util::future::join_all(requests).await;
    let mut admitted = 0;
    let mut refused = 0;
    for result in results {
        let (status, retry_after, body) = result?;
        match status {
            200 => admitted += 1,
            429 => {
                refused += 1;
                assert_eq!(body["code"], "RATE_LIMIT_EXCEEDED");
                assert_eq!(body["status"], 429);
                let seconds: u64 = retry_after.expect("Retry-After on a 429").parse()?;
                assert!((1..=60).contains(&seconds));
            }
            other => panic!("unexpected status {other}: {body}"),
        }
    }
    assert_eq!((admitted, refused), (60, 940));
    Ok(())
}

#[tokio::test]
async fn keyless_and_unknown_key_callers_are_counted_per_ip_before_their_401() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    room_in_this_minute(10).await;
    for i in 0..10 {
        let key = (i % 2 == 1).then_some("rwk_unknown0_00000000000000000000000000000000");
        let (status, headers, _) = call(&stack, "/api/v1/rates", key, None).await?;
        assert_eq!(status, 401);
        assert_eq!(
            limit_headers(&headers).1,
            9 - i,
            "remaining after request {i}"
        );
    }
    let (status, headers, body) = call(&stack, "/api/v1/rates", None, None).await?;
    assert_eq!(status, 429);
    assert_eq!(
        body,
        json!({"status": 429, "message": "Rate limit exceeded", "code": "RATE_LIMIT_EXCEEDED"})
    );
    assert!(headers.get("retry-after").is_some());
    // A valid key is counted on its own, not with its IP.
    let key = stack.api_key("own").await?;
    assert_eq!(
        call(&stack, "/api/v1/currencies", Some(&key), None)
            .await?
            .0,
        200
    );
    Ok(())
}

#[tokio::test]
async fn forwarded_for_counts_only_behind_a_trusted_proxy() -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_TRUSTED_PROXIES", "127.0.0.1")
        .start()
        .await?;
    room_in_this_minute(10).await;
    for _ in 0..10 {
        assert_eq!(
            call(&stack, "/api/v1/rates", None, Some("198.51.100.7"))
                .await?
                .0,
            401
        );
    }
    assert_eq!(
        call(&stack, "/api/v1/rates", None, Some("198.51.100.7"))
            .await?
            .0,
        429
    );
    // Another client behind the same proxy has its own window.
    assert_eq!(
        call(&stack, "/api/v1/rates", None, Some("198.51.100.8"))
            .await?
            .0,
        401
    );
    Ok(())
}

#[tokio::test]
async fn the_monthly_allowance_ends_with_quota_exceeded_until_next_month() -> anyhow::Result<()> {
    let plans = "tiny=100/3,free=60/10000,anonymous=10/1000";
    let stack = Stack::builder()
        .env("RATEWIRE_PLANS", plans)
        .start()
        .await?;
    let key = stack.api_key_on("tiny", "tiny").await?;
    for _ in 0..3 {
        assert_eq!(
            call(&stack, "/api/v1/currencies", Some(&key), None)
                .await?
                .0,
            200
        );
    }
    // /me and /usage never count toward the month.
    let (status, _, usage) = call(&stack, "/api/v1/usage", Some(&key), None).await?;
    assert_eq!(status, 200);
    assert_eq!(usage["data"]["month"]["used"], 3);
    assert_eq!(usage["data"]["month"]["remaining"], 0);
    let (status, headers, body) = call(&stack, "/api/v1/currencies", Some(&key), None).await?;
    assert_eq!(status, 429);
    assert_eq!(body["code"], "QUOTA_EXCEEDED");
    let retry_after: u64 = headers["retry-after"].to_str()?.parse()?;
    assert_ietf_fields_agree(&headers, 3, true);
    assert!(
        retry_after > 60 && retry_after <= 31 * 86_400,
        "to the start of next month: {retry_after}"
    );
    Ok(())
}

#[tokio::test]
async fn me_and_usage_describe_the_caller() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key_on("dashboard", "pro").await?;
    room_in_this_minute(15).await;
    for path in ["/me", "/api/v1/me"] {
        let (status, _, body) = call(&stack, path, Some(&key), None).await?;
        assert_eq!(status, 200, "{path}");
        assert_eq!(body["data"]["name"], "dashboard");
        assert_eq!(body["data"]["plan"], "pro");
        assert_eq!(
            body["data"]["limits"],
            json!({"perMinute": 1000, "perMonth": 1000000})
        );
        assert!(body["data"]["createdAt"].is_string());
    }
    call(&stack, "/api/v1/currencies", Some(&key), None).await?;
    let (_, _, usage) = call(&stack, "/usage", Some(&key), None).await?;
    let minute = &usage["data"]["minute"];
    let month = &usage["data"]["month"];
    assert_eq!(minute["limit"], 1000);
    assert!(
        minute["used"].as_u64().unwrap() >= 4,
        "/me twice, a data call and this one: {minute}"
    );
    assert_eq!(
        month["used"], 1,
        "only the data call counts toward the month"
    );
    assert_eq!(month["remaining"], 999_999);
    assert!(month["reset"].as_u64().unwrap() > 0);
    let (status, _, _) = call(&stack, "/me", None, None).await?;
    assert_eq!(status, 401);
    Ok(())
}

#[tokio::test]
async fn a_revoked_key_stops_working_at_once() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("soon-revoked").await?;
    assert_eq!(
        call(&stack, "/api/v1/currencies", Some(&key), None)
            .await?
            .0,
        200
    );
    let listed: Value = stack
        .http()
        .get(format!("{}/v1/admin/keys", stack.api_operator_url))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await?
        .json()
        .await?;
    let entry = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "soon-revoked")
        .unwrap()
        .clone();
    assert!(entry.get("key").is_none(), "lists never show secrets");
    let prefix = entry["prefix"].as_str().unwrap();
    assert_eq!(stack.revoke_key(prefix).await?, 204);
    let (status, _, body) = call(&stack, "/api/v1/currencies", Some(&key), None).await?;
    assert_eq!(
        (status, body["message"].as_str()),
        (401, Some("Invalid API key"))
    );
    Ok(())
}

#[tokio::test]
async fn operators_can_open_read_access_to_keyless_callers() -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_ANONYMOUS_ACCESS", "true")
        .start()
        .await?;
    let (status, headers, _) = call(&stack, "/api/v1/currencies", None, None).await?;
    assert_eq!(status, 200);
    assert_eq!(limit_headers(&headers).0, 10, "under the anonymous plan");
    let (_, _, me) = call(&stack, "/me", None, None).await?;
    assert_eq!(me["data"]["plan"], "anonymous");
    // A wrong key is still refused.
    assert_eq!(
        call(
            &stack,
            "/api/v1/currencies",
            Some("rwk_unknown0_00000000000000000000000000000000"),
            None
        )
        .await?
        .0,
        401
    );
    Ok(())
}

#[tokio::test]
async fn the_monthly_count_survives_redis_losing_it() -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_PLANS", "tiny=100/5,anonymous=10/1000")
        .env("RATEWIRE_USAGE_SYNC_SECS", "1")
        .start()
        .await?;
    let key = stack.api_key_on("tiny", "tiny").await?;
    for _ in 0..3 {
        assert_eq!(
            call(&stack, "/api/v1/currencies", Some(&key), None)
                .await?
                .0,
            200
        );
    }
    ratewire_e2e::eventually(
        "the count saved to postgres",
        Duration::from_secs(10),
        || async {
            let used = stack
                .sql_number("SELECT used FROM api.usage_months WHERE subject LIKE 'key:%'")
                .await
                .ok()??;
            (used == 3).then_some(())
        },
    )
    .await?;

    stack.flush_redis().await?;
    // Within one reconciliation interval the count is back...
    ratewire_e2e::eventually(
        "the count restored into redis",
        Duration::from_secs(10),
        || async {
            let (_, _, usage) = call(&stack, "/api/v1/usage", Some(&key), None).await.ok()?;
            (usage["data"]["month"]["used"] == 3).then_some(())
        },
    )
    .await?;
    // ...and the allowance ends where it would have.
    for _ in 0..2 {
        assert_eq!(
            call(&stack, "/api/v1/currencies", Some(&key), None)
                .await?
                .0,
            200
        );
    }
    let (status, _, body) = call(&stack, "/api/v1/currencies", Some(&key), None).await?;
    assert_eq!(
        (status, body["code"].as_str()),
        (429, Some("QUOTA_EXCEEDED"))
    );
    Ok(())
}
