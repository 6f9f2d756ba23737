//! Rate alerts pushed as signed webhooks: one call per crossing, signed
//! as Standard Webhooks 1.0 says (checked with the `standardwebhooks`
//! crate), re-armed by a board that makes the condition false, retried
//! with the same id until the receiver takes it, never to an internal
//! address, and only ever seen by the key that owns them.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use ratewire_e2e::receiver::{crossing_id, Received, Receiver};
use ratewire_e2e::{eventually, minutes_ago, sse, Board, Stack, VISIBLE_WITHIN};
use serde_json::{json, Value};

/// A board of USD only, as of `minutes` before now.
fn usd(minutes: i64, buying: &str, selling: &str) -> Board {
    Board::at(minutes_ago(minutes)).rate("USD", buying, selling)
}

/// What most tests here start from: a key, CBE (its id and publisher
/// token), and the key's webhook to a receiver of the test's own (the
/// receiver, the webhook's id and its secret).
async fn watcher(
    stack: &Stack,
    name: &str,
) -> Result<(String, i64, String, Receiver, String, String)> {
    let key = stack.api_key(name).await?;
    let (cbe, token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let receiver = Receiver::start().await?;
    let (hook, secret) = stack.webhook(&key, &receiver.url()).await?;
    Ok((key, cbe, token, receiver, hook, secret))
}

/// Checks the request's signature with the `standardwebhooks` crate.
fn verify(secret: &str, request: &Received) -> Result<()> {
    let hook = standardwebhooks::Webhook::new(secret).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    hook.verify(&request.body, &request.headers)
        .map_err(|e| anyhow::anyhow!("signature of {}: {e:?}", request.id()))
}

/// Once every call the fold decided is made, `receiver` has had
/// `expected` requests: nothing more is on its way.
async fn quiet(stack: &Stack, receiver: &Receiver, expected: usize) -> Result<()> {
    stack.wait_calls_settled(VISIBLE_WITHIN).await?;
    let received = receiver.received();
    ensure!(
        received.len() == expected,
        "expected {expected} requests, got {}: {:?}",
        received.len(),
        received.iter().map(Received::json).collect::<Vec<_>>()
    );
    Ok(())
}

#[tokio::test]
async fn a_crossing_calls_the_webhook_once_signed_and_a_board_below_rearms_it() -> Result<()> {
    let stack = Stack::start().await?;
    let (key, cbe, token, receiver, hook, secret) = watcher(&stack, "alerts").await?;
    assert!(secret.starts_with("whsec_"));

    let first = stack
        .push_and_wait(cbe, &token, &usd(50, "155.00", "158.00"))
        .await?;
    assert!(first["eventId"].is_string(), "{first}");
    let id = stack
        .alert(
            &key,
            json!({"webhookId": hook, "currencyCode": "usd", "field": "cashBuying",
               "condition": "above", "threshold": 160, "bankId": cbe}),
        )
        .await?;
    let created = stack.listed_alert(&key, &id).await?;
    assert_eq!(created["currencyCode"], "USD");
    assert_eq!(created["threshold"], 160);
    assert_eq!(created["lastValue"], 155.0, "the value when it was made");
    assert!(created["triggered"].is_null(), "not known before a board");

    // Below: evaluated, nothing sent.
    stack
        .publish_board(cbe, &token, usd(40, "155.50", "158.00"))
        .await?;
    let below = stack.alert_evaluated(&key, &id, 155.5).await?;
    assert_eq!(below["triggered"], false);
    // Crossing: one call.
    let (_, crossing) = stack
        .publish_board(cbe, &token, usd(30, "160.25", "163.00"))
        .await?;
    let received = receiver.wait_for(1, VISIBLE_WITHIN).await?;
    let call = &received[0];
    verify(&secret, call)?;
    assert!(call.header("webhook-signature").starts_with("v1,"));
    assert_eq!(call.header("content-type"), "application/json");
    let event = crossing["eventId"].as_str().unwrap();
    assert_eq!(
        call.id(),
        crossing_id(&id, event),
        "derived from alert and event"
    );
    let body = call.json();
    assert_eq!(body["type"], "rate.threshold_crossed");
    assert!(body["timestamp"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        body["data"],
        json!({
            "alertId": id,
            "bank": {"id": cbe, "name": "Commercial Bank of Ethiopia", "code": "CBE"},
            "currencyCode": "USD",
            "field": "cashBuying",
            "condition": "above",
            "threshold": 160,
            "previous": 155.5,
            "current": 160.25,
            "updatedAt": body["data"]["updatedAt"],
            "eventId": event,
        })
    );
    // Still above: nothing. Below again: re-armed, nothing. Above: a second call.
    stack
        .publish_board(cbe, &token, usd(20, "161.00", "163.00"))
        .await?;
    stack.alert_evaluated(&key, &id, 161.0).await?;
    stack
        .publish_board(cbe, &token, usd(10, "159.00", "163.00"))
        .await?;
    let rearmed = stack.alert_evaluated(&key, &id, 159.0).await?;
    assert_eq!(rearmed["triggered"], false);
    quiet(&stack, &receiver, 1).await?;
    let (_, again) = stack
        .publish_board(cbe, &token, usd(5, "162.00", "163.00"))
        .await?;
    let received = receiver.wait_for(2, VISIBLE_WITHIN).await?;
    verify(&secret, &received[1])?;
    assert_eq!(
        received[1].id(),
        crossing_id(&id, again["eventId"].as_str().unwrap())
    );
    assert_eq!(received[1].json()["data"]["previous"], 159.0);
    quiet(&stack, &receiver, 2).await?;
    let listed = stack.listed_alert(&key, &id).await?;
    assert_eq!(listed["fired"], 2);
    assert_eq!(listed["triggered"], true);

    // A deleted alert calls no more.
    assert_eq!(
        stack.delete(&format!("/api/v1/alerts/{id}"), &key).await?,
        204
    );
    stack
        .publish_board(cbe, &token, usd(4, "150.00", "163.00"))
        .await?;
    stack
        .push_and_wait(cbe, &token, &usd(3, "170.00", "173.00"))
        .await?;
    quiet(&stack, &receiver, 2).await?;
    assert_eq!(
        stack.delete(&format!("/api/v1/alerts/{id}"), &key).await?,
        404
    );
    Ok(())
}

#[tokio::test]
async fn an_alert_on_the_best_rate_follows_whichever_bank_quotes_best() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("best").await?;
    let (cbe, cbe_token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    let receiver = Receiver::start().await?;
    let (hook, secret) = stack.webhook(&key, &receiver.url()).await?;
    stack
        .publish_board(cbe, &cbe_token, usd(50, "155", "159.00"))
        .await?;
    stack
        .publish_board(awash, &awash_token, usd(50, "154", "159.50"))
        .await?;
    eventually("both boards served", VISIBLE_WITHIN, || async {
        let (_, body) = stack
            .get("/api/v1/rates/best-rates?currencyCode=USD", Some(&key))
            .await
            .ok()?;
        (body["data"]["cashSelling"]["price"] == 159.0).then_some(())
    })
    .await?;
    // The lowest selling rate drops below 158.5.
    let id = stack
        .alert(
            &key,
            json!({"webhookId": hook, "currencyCode": "USD", "field": "cashSelling",
               "condition": "below", "threshold": 158.5}),
        )
        .await?;
    assert_eq!(stack.listed_alert(&key, &id).await?["bankId"], Value::Null);
    stack
        .publish_board(awash, &awash_token, usd(40, "154", "158.75"))
        .await?;
    stack.alert_evaluated(&key, &id, 158.75).await?;
    let (_, crossing) = stack
        .publish_board(awash, &awash_token, usd(30, "154", "158.25"))
        .await?;
    let received = receiver.wait_for(1, VISIBLE_WITHIN).await?;
    verify(&secret, &received[0])?;
    let data = &received[0].json()["data"];
    assert_eq!(data["bank"]["id"], awash, "the bank quoting best");
    assert_eq!(
        (data["previous"].clone(), data["current"].clone()),
        (json!(158.75), json!(158.25))
    );
    assert_eq!(data["eventId"], crossing["eventId"]);
    // Awash leaves the best (deactivated): CBE's 159 is the best again, re-armed.
    stack.update_bank(awash, json!({"active": false})).await?;
    let rearmed = stack.alert_evaluated(&key, &id, 159.0).await?;
    assert_eq!(rearmed["triggered"], false);
    // CBE then crosses.
    stack
        .publish_board(cbe, &cbe_token, usd(20, "155", "158"))
        .await?;
    let received = receiver.wait_for(2, VISIBLE_WITHIN).await?;
    assert_eq!(received[1].json()["data"]["bank"]["id"], cbe);
    quiet(&stack, &receiver, 2).await?;
    Ok(())
}

#[tokio::test]
async fn a_failing_receiver_gets_the_same_message_again_and_its_owner_sees_why() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("retries").await?;
    let receiver = Receiver::start().await?;
    let (hook, secret) = stack.webhook(&key, &receiver.url()).await?;
    receiver.answer_next(&[500]);
    let (status, test) = stack.test_call(&key, &hook).await?;
    assert_eq!(status, 202, "{test}");
    let received = receiver.wait_for(1, VISIBLE_WITHIN).await?;
    assert_eq!(received[0].json()["type"], "webhook.test");
    assert_eq!(received[0].id(), test["data"]["messageId"]);
    let failing = eventually("the webhook failing", VISIBLE_WITHIN, || async {
        let (_, body) = stack.get("/api/v1/webhooks", Some(&key)).await.ok()?;
        let hook = body["data"][0].clone();
        (hook["status"] == "failing").then_some(hook)
    })
    .await?;
    assert!(
        failing["lastError"].as_str().unwrap().contains("500"),
        "{failing}"
    );
    assert_eq!(failing["pending"], 1);
    // The first retry comes within 10 s, with the same id, signed anew.
    let received = receiver.wait_for(2, Duration::from_secs(12)).await?;
    assert_eq!(received[1].id(), received[0].id());
    assert_eq!(received[1].body, received[0].body);
    let waited = received[1].at - received[0].at;
    assert!(
        waited >= Duration::from_secs(4) && waited <= Duration::from_secs(10),
        "{waited:?}"
    );
    verify(&secret, &received[1])?;
    let healthy = eventually("the webhook active again", VISIBLE_WITHIN, || async {
        let (_, body) = stack.get("/api/v1/webhooks", Some(&key)).await.ok()?;
        let hook = body["data"][0].clone();
        (hook["status"] == "active" && hook["pending"] == 0).then_some(hook)
    })
    .await?;
    assert!(healthy["lastSuccessAt"].is_string());
    assert!(healthy.get("secret").is_none(), "never listed: {healthy}");
    quiet(&stack, &receiver, 2).await?;
    Ok(())
}

#[tokio::test]
async fn a_message_for_a_receiver_that_is_down_arrives_after_the_projector_restarts() -> Result<()>
{
    let mut stack = Stack::start().await?;
    let (key, cbe, token, mut receiver, hook, secret) = watcher(&stack, "restart").await?;
    stack
        .push_and_wait(cbe, &token, &usd(20, "140", "158"))
        .await?;
    stack
        .alert(
            &key,
            json!({"webhookId": hook, "currencyCode": "USD", "field": "cashBuying",
               "condition": "above", "threshold": 150, "bankId": cbe}),
        )
        .await?;
    receiver.down().await;
    stack
        .publish_board(cbe, &token, usd(10, "155", "158"))
        .await?;
    // Its first attempt found nobody.
    eventually("a failed attempt", VISIBLE_WITHIN, || async {
        let (_, body) = stack.get("/api/v1/webhooks", Some(&key)).await.ok()?;
        (body["data"][0]["status"] == "failing").then_some(())
    })
    .await?;
    stack.kill("ratewire-projector")?;
    stack.start_process("ratewire-projector")?;
    receiver.up().await?;
    let received = receiver.wait_for(1, Duration::from_secs(30)).await?;
    verify(&secret, &received[0])?;
    assert_eq!(received[0].json()["data"]["current"], 155);
    quiet(&stack, &receiver, 1).await?;
    Ok(())
}

#[tokio::test]
async fn a_rotated_secret_signs_beside_the_old_one() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("rotation").await?;
    let receiver = Receiver::start().await?;
    let (hook, old) = stack.webhook(&key, &receiver.url()).await?;
    let (status, rotated) = stack
        .post(
            &format!("/api/v1/webhooks/{hook}/rotate-secret"),
            &key,
            json!(null),
        )
        .await?;
    assert_eq!(status, 200, "{rotated}");
    let new = rotated["data"]["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(rotated["data"]["previousSecretUntil"].is_string());
    stack.test_call(&key, &hook).await?;
    let received = receiver.wait_for(1, VISIBLE_WITHIN).await?;
    assert_eq!(
        received[0].header("webhook-signature").split(' ').count(),
        2
    );
    verify(&new, &received[0])?;
    verify(&old, &received[0])?;
    let stranger = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    assert!(verify(stranger, &received[0]).is_err());
    Ok(())
}

#[tokio::test]
async fn another_keys_webhooks_and_alerts_are_not_found_and_plans_bound_alerts() -> Result<()> {
    let stack = Stack::start().await?;
    let owner = stack.api_key("owner").await?;
    let stranger = stack.api_key_on("stranger", "free").await?;
    let receiver = Receiver::start().await?;
    let (hook, _) = stack.webhook(&owner, &receiver.url()).await?;
    let id = stack
        .alert(
            &owner,
            json!({"webhookId": hook, "currencyCode": "USD", "field": "cashBuying",
               "condition": "above", "threshold": 160}),
        )
        .await?;
    let (_, listed) = stack.get("/api/v1/webhooks", Some(&stranger)).await?;
    assert_eq!(listed["data"], json!([]));
    let (_, listed) = stack.get("/api/v1/alerts", Some(&stranger)).await?;
    assert_eq!(listed["data"], json!([]));
    for path in [
        format!("/api/v1/webhooks/{hook}/test"),
        format!("/api/v1/webhooks/{hook}/rotate-secret"),
    ] {
        let (status, body) = stack.post(&path, &stranger, json!(null)).await?;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["message"], "Webhook not found");
    }
    assert_eq!(
        stack
            .delete(&format!("/api/v1/webhooks/{hook}"), &stranger)
            .await?,
        404
    );
    assert_eq!(
        stack
            .delete(&format!("/api/v1/alerts/{id}"), &stranger)
            .await?,
        404
    );
    assert_eq!(
        stack.delete("/api/v1/alerts/not-a-uuid", &stranger).await?,
        404
    );
    let (status, body) = stack
        .post(
            "/api/v1/alerts",
            &stranger,
            json!({"webhookId": hook, "currencyCode": "USD", "field": "cashBuying",
               "condition": "above", "threshold": 160}),
        )
        .await?;
    assert_eq!(status, 400);
    assert_eq!(
        body["errors"],
        json!({"webhookId": ["no webhook with this id"]})
    );

    // A free key keeps 5 alerts.
    let (own_hook, _) = stack.webhook(&stranger, &receiver.url()).await?;
    for n in 0..5 {
        stack
            .alert(
                &stranger,
                json!({"webhookId": own_hook, "currencyCode": "EUR", "field": "cashSelling",
                   "condition": "below", "threshold": 170 + n}),
            )
            .await?;
    }
    let (status, body) = stack
        .post(
            "/api/v1/alerts",
            &stranger,
            json!({"webhookId": own_hook, "currencyCode": "EUR", "field": "cashSelling",
               "condition": "below", "threshold": 1}),
        )
        .await?;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "LIMIT_REACHED");
    assert_eq!(
        body["message"],
        "Alert limit reached: this key has 5 and its plan keeps 5; delete one first"
    );
    // Deleting the webhook takes its alerts with it.
    assert_eq!(
        stack
            .delete(&format!("/api/v1/webhooks/{own_hook}"), &stranger)
            .await?,
        204
    );
    let (_, listed) = stack.get("/api/v1/alerts", Some(&stranger)).await?;
    assert_eq!(listed["data"], json!([]));
    Ok(())
}

#[tokio::test]
async fn webhooks_never_reach_internal_addresses() -> Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_WEBHOOK_ALLOW_PRIVATE", "false")
        .start()
        .await?;
    let key = stack.api_key("ssrf").await?;
    let receiver = Receiver::start().await?;
    let long = format!("https://example.com/{}", "a".repeat(2048));
    for (url, says) in [
        (receiver.url(), "loopback"),
        ("http://localhost:9/".to_owned(), "loopback"),
        ("http://10.0.0.8/hook".to_owned(), "private"),
        ("http://[::1]:8080/".to_owned(), "loopback"),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "link-local",
        ),
        ("http://[fe80::1]/".to_owned(), "link-local"),
        ("http://0.0.0.0:80/".to_owned(), "not publicly routable"),
        ("ftp://example.com/".to_owned(), "http or https"),
        ("https://user:pw@example.com/".to_owned(), "credentials"),
        (long, "2048"),
    ] {
        let (status, body) = stack
            .post("/api/v1/webhooks", &key, json!({"url": url}))
            .await?;
        assert_eq!(status, 400, "{url}: {body}");
        let error = body["errors"]["url"][0].as_str().unwrap_or_default();
        assert!(error.contains(says), "{url}: {error}");
    }
    let (_, listed) = stack.get("/api/v1/webhooks", Some(&key)).await?;
    assert_eq!(listed["data"], json!([]));

    // A name that pointed elsewhere when registered and now resolves to
    // loopback (as after DNS rebinding) is refused at delivery.
    let (hook, _) = {
        // Registered as a public address, then re-pointed: written here
        // as the row would read after registration.
        let (status, body) = stack
            .post(
                "/api/v1/webhooks",
                &key,
                json!({"url": "http://93.184.216.34:9/"}),
            )
            .await?;
        assert_eq!(status, 201, "{body}");
        (body["data"]["id"].as_str().unwrap().to_owned(), ())
    };
    stack
        .sql(&format!(
            "UPDATE alerts.webhooks SET url = 'http://localhost:{}/hooks' WHERE id = '{hook}'",
            receiver.port
        ))
        .await?;
    stack.test_call(&key, &hook).await?;
    let refused = eventually("the delivery refused", VISIBLE_WITHIN, || async {
        let (_, body) = stack.get("/api/v1/webhooks", Some(&key)).await.ok()?;
        let error = body["data"][0]["lastError"].as_str()?.to_owned();
        Some(error)
    })
    .await?;
    assert!(
        refused.contains("refused") && refused.contains("loopback"),
        "{refused}"
    );
    assert!(receiver.received().is_empty());
    Ok(())
}

#[tokio::test]
async fn link_local_stays_refused_when_private_addresses_are_allowed() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("metadata").await?;
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://100.100.100.200/",
    ] {
        let (status, body) = stack
            .post("/api/v1/webhooks", &key, json!({"url": url}))
            .await?;
        assert_eq!(status, 400, "{url}: {body}");
    }
    let receiver = Receiver::start().await?;
    let (hook, _) = stack.webhook(&key, &receiver.url()).await?;
    stack
        .sql(&format!(
            "UPDATE alerts.webhooks SET url = 'http://169.254.169.254/latest/meta-data/' WHERE id = '{hook}'"
        ))
        .await?;
    stack.test_call(&key, &hook).await?;
    let refused = eventually("the delivery refused", VISIBLE_WITHIN, || async {
        let (_, body) = stack.get("/api/v1/webhooks", Some(&key)).await.ok()?;
        body["data"][0]["lastError"].as_str().map(str::to_owned)
    })
    .await?;
    assert!(refused.contains("link-local"), "{refused}");
    Ok(())
}

#[tokio::test]
async fn the_live_stream_carries_a_keys_alerts_to_that_key_only() -> Result<()> {
    let stack = Stack::start().await?;
    let (key, cbe, token, receiver, hook, _) = watcher(&stack, "watcher").await?;
    let other = stack.api_key("other").await?;
    stack
        .push_and_wait(cbe, &token, &usd(20, "140", "158"))
        .await?;
    let id = stack
        .alert(
            &key,
            json!({"webhookId": hook, "currencyCode": "USD", "field": "cashBuying",
               "condition": "above", "threshold": 150, "bankId": cbe}),
        )
        .await?;
    let mut mine = sse::subscribe(&stack, &key, "events=alert", None).await;
    let mut theirs = sse::subscribe(&stack, &other, "events=alert", None).await;
    stack
        .publish_board(cbe, &token, usd(10, "155", "158"))
        .await?;
    let (event, event_id, data) = sse::next_event(&mut mine, VISIBLE_WITHIN).await?;
    assert_eq!(event, "alert");
    assert_eq!(event_id, "", "live only: nothing to resume from");
    assert_eq!(data["type"], "rate.threshold_crossed");
    assert_eq!(data["data"]["alertId"], id);
    assert_eq!(data["data"]["current"], 155);
    let delivered = receiver.wait_for(1, VISIBLE_WITHIN).await?;
    assert_eq!(data["id"], delivered[0].id(), "the webhook's message");
    assert_eq!(data["data"], delivered[0].json()["data"]);
    let nothing = sse::next_event(&mut theirs, Duration::from_secs(2)).await;
    assert!(nothing.is_err(), "another key's stream: {nothing:?}");
    Ok(())
}

/// The fenced block of `language` under docs/api.md's "Verifying a
/// signature".
fn documented_verifier(language: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md");
    let text = std::fs::read_to_string(path).expect("docs/api.md");
    let section = &text[text.find("### Verifying a signature").expect("the section")..];
    let fence = format!("```{language}\n");
    let start = section.find(&fence).expect("the block") + fence.len();
    section[start..start + section[start..].find("```").expect("its end")].to_owned()
}

#[tokio::test]
async fn the_documented_python_and_javascript_verifiers_accept_a_real_call() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("verifiers").await?;
    let receiver = Receiver::start().await?;
    let (hook, secret) = stack.webhook(&key, &receiver.url()).await?;
    stack.test_call(&key, &hook).await?;
    let call = receiver.wait_for(1, VISIBLE_WITHIN).await?.remove(0);
    let dir = stack.logs.join("verifiers");
    std::fs::create_dir_all(&dir)?;
    let headers: serde_json::Map<String, Value> = call
        .headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), json!(v.to_str().unwrap_or_default())))
        .collect();
    std::fs::write(dir.join("headers.json"), Value::Object(headers).to_string())?;
    std::fs::write(dir.join("body"), &call.body)?;
    let python = format!(
        "{}\nimport json, sys\nverify(sys.argv[1], json.load(open('headers.json')), open('body', 'rb').read())\nprint('verified')\n",
        documented_verifier("python")
    );
    let javascript = format!(
        "{}\nimport {{ readFileSync }} from 'node:fs';\nverify(process.argv[1], JSON.parse(readFileSync('headers.json', 'utf8')), readFileSync('body'));\nconsole.log('verified');\n",
        documented_verifier("js")
    );
    let stranger = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    for (program, args) in [
        ("python3", vec!["-c".to_owned(), python]),
        (
            "node",
            vec![
                "--input-type=module".to_owned(),
                "-e".to_owned(),
                javascript,
            ],
        ),
    ] {
        for (given, holds) in [(&secret, true), (&stranger.to_owned(), false)] {
            let output = std::process::Command::new(program)
                .args(&args)
                .arg(given)
                .current_dir(&dir)
                .output()
                .with_context(|| format!("{program} is needed for this test"))?;
            let said = String::from_utf8_lossy(&output.stdout);
            assert_eq!(
                output.status.success() && said.contains("verified"),
                holds,
                "{program} with {}: {said}{}",
                if holds {
                    "its secret"
                } else {
                    "another secret"
                },
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_slow_receiver_never_delays_another_ones_calls() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("isolation").await?;
    let slow = Receiver::start().await?;
    slow.delay(Some(Duration::from_secs(8)));
    let fast = Receiver::start().await?;
    let (slow_hook, _) = stack.webhook(&key, &slow.url()).await?;
    let (fast_hook, _) = stack.webhook(&key, &fast.url()).await?;
    for _ in 0..40 {
        let (status, _) = stack.test_call(&key, &slow_hook).await?;
        assert_eq!(status, 202);
    }
    // 16 calls at once to one endpoint at most, each held 8 s.
    slow.wait_for(16, VISIBLE_WITHIN).await?;
    let sent = std::time::Instant::now();
    stack.test_call(&key, &fast_hook).await?;
    fast.wait_for(1, Duration::from_secs(5)).await?;
    let took = sent.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the fast receiver waited {took:?}"
    );
    assert_eq!(
        slow.received().len(),
        16,
        "no more than 16 in flight to one endpoint"
    );
    Ok(())
}

#[tokio::test]
async fn a_retraction_and_a_correction_are_judged_like_any_board() -> Result<()> {
    let stack = Stack::start().await?;
    let (key, cbe, token, receiver, hook, _) = watcher(&stack, "corrections").await?;
    let original = usd(30, "150", "160");
    stack.push_and_wait(cbe, &token, &original).await?;
    let id = stack
        .alert(
            &key,
            json!({"webhookId": hook, "currencyCode": "USD", "field": "cashBuying",
               "condition": "above", "threshold": 155, "bankId": cbe}),
        )
        .await?;
    // A wrong board crosses: one call.
    let wrong = usd(20, "159", "160");
    let (_, published) = stack.publish_board(cbe, &token, &wrong).await?;
    receiver.wait_for(1, VISIBLE_WITHIN).await?;
    // Retracted: the bank's rate is 150 again, the alert re-armed, nothing sent.
    let retracted = stack
        .http()
        .delete(format!(
            "{}/v1/banks/{cbe}/boards/{}",
            stack.ingest_url,
            published["eventId"].as_str().unwrap()
        ))
        .bearer_auth(&token)
        .send()
        .await?;
    assert_eq!(retracted.status(), 202);
    let rearmed = stack.alert_evaluated(&key, &id, 150.0).await?;
    assert_eq!(rearmed["triggered"], false);
    // A correction of the remaining board (its as-of again) that crosses: a call.
    let as_of = original.as_of_time().expect("an as-of time");
    let corrected = Board::at(as_of).rate("USD", "156.5", 160);
    let (_, correction) = stack.publish_board(cbe, &token, &corrected).await?;
    let received = receiver.wait_for(2, VISIBLE_WITHIN).await?;
    let data = &received[1].json()["data"];
    assert_eq!(
        (data["previous"].clone(), data["current"].clone()),
        (json!(150), json!(156.5))
    );
    assert_eq!(data["eventId"], correction["eventId"]);
    quiet(&stack, &receiver, 2).await?;
    let (_, history) = stack
        .get(&format!("/api/v1/rates?bankId={cbe}"), Some(&key))
        .await?;
    assert_eq!(
        history["data"][0]["data"][0]["exchangeRates"][0]["cashBuying"], 156.5,
        "the correction replaced the board"
    );
    Ok(())
}

/// Whether `json` has no whitespace outside its strings.
fn compact(json: &str) -> bool {
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') | (false, _, '"') => in_string = !in_string,
            (false, _, c) if c.is_whitespace() => return false,
            _ => {}
        }
    }
    true
}

#[tokio::test]
async fn an_alert_keeps_every_digit_as_given_in_answers_calls_and_the_stream() -> Result<()> {
    let stack = Stack::start().await?;
    let (key, cbe, token, receiver, hook, secret) = watcher(&stack, "digits").await?;
    stack
        .push_and_wait(cbe, &token, &usd(20, "157.00", "160.00"))
        .await?;
    // Written as a client writes it: a JSON value would read 157.50 as 157.5.
    let (status, created) = stack
        .post_text(
            "/api/v1/alerts",
            &key,
            &format!(
                r#"{{"webhookId": "{hook}", "currencyCode": "USD", "field": "cashBuying",
                    "condition": "above", "threshold": 157.50, "bankId": {cbe}}}"#
            ),
        )
        .await?;
    assert_eq!(status, 201, "{created}");
    for digits in [r#""threshold":157.50"#, r#""lastValue":157.00"#] {
        assert!(created.contains(digits), "{digits} in {created}");
    }
    let (_, listed) = stack.get_raw("/api/v1/alerts", Some(&key)).await?;
    for digits in [r#""threshold":157.50"#, r#""lastValue":157.00"#] {
        assert!(listed.contains(digits), "{digits} in {listed}");
    }

    let mut stream = sse::subscribe(&stack, &key, "events=alert", None).await;
    stack
        .publish_board(cbe, &token, usd(10, "158.10", "160.00"))
        .await?;
    let call = receiver.wait_for(1, VISIBLE_WITHIN).await?.remove(0);
    verify(&secret, &call)?;
    let body = String::from_utf8(call.body.to_vec())?;
    for digits in [
        r#""threshold":157.50"#,
        r#""previous":157.00"#,
        r#""current":158.10"#,
    ] {
        assert!(body.contains(digits), "{digits} in {body}");
    }
    assert!(compact(&body), "the call's body is compact JSON: {body}");
    let (event, _, data) = sse::next_event_text(&mut stream, VISIBLE_WITHIN).await?;
    assert_eq!(event, "alert");
    assert_eq!(
        data,
        format!(r#"{{"id":"{}",{}"#, call.id(), &body[1..]),
        "the stream's data is the call's body, its id first"
    );
    assert!(compact(&data), "{data}");
    eventually("the alert evaluated at 158.10", VISIBLE_WITHIN, || async {
        let (_, listed) = stack.get_raw("/api/v1/alerts", Some(&key)).await.ok()?;
        listed.contains(r#""lastValue":158.10"#).then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_bad_alert_or_webhook_names_every_bad_field_at_once() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("fields").await?;
    let stranger = stack.api_key("stranger").await?;
    let receiver = Receiver::start().await?;
    let (hook, _) = stack.webhook(&key, &receiver.url()).await?;
    let (theirs, _) = stack.webhook(&stranger, &receiver.url()).await?;
    let named = |body: &Value| -> Vec<String> {
        body["errors"]
            .as_object()
            .map(|errors| errors.keys().cloned().collect())
            .unwrap_or_default()
    };

    // A field not listed and a bank that does not exist: both named.
    let (status, body) = stack
        .post(
            "/api/v1/alerts",
            &key,
            json!({"webhookId": hook, "currencyCode": "USD", "field": "mid",
               "condition": "above", "threshold": 150, "bankId": 999}),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(named(&body), ["bankId", "field"], "{body}");
    assert_eq!(body["errors"]["bankId"], json!(["no bank with this id"]));
    // Wrong types, values out of their range, another key's webhook and a
    // field the body should not have, together.
    let (status, body) = stack
        .post(
            "/api/v1/alerts",
            &key,
            json!({"webhookId": theirs, "currencyCode": "XYZ", "field": 7,
               "condition": "over", "threshold": "a lot", "bankId": 999, "extra": 1}),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        named(&body),
        [
            "bankId",
            "condition",
            "currencyCode",
            "extra",
            "field",
            "threshold",
            "webhookId"
        ],
        "{body}"
    );
    // A missing field beside a bad one.
    let (status, body) = stack
        .post(
            "/api/v1/alerts",
            &key,
            json!({"webhookId": hook, "field": "cashBuying", "condition": "above",
               "threshold": 0}),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(named(&body), ["currencyCode", "threshold"], "{body}");
    let (_, listed) = stack.get("/api/v1/alerts", Some(&key)).await?;
    assert_eq!(listed["data"], json!([]), "nothing created");

    // A webhook's address and its description, both bad.
    let (status, body) = stack
        .post(
            "/api/v1/webhooks",
            &key,
            json!({"url": "ftp://example.com/", "description": "x".repeat(501)}),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(named(&body), ["description", "url"], "{body}");
    let (status, body) = stack
        .post(
            "/api/v1/webhooks",
            &key,
            json!({"url": 5, "description": 7, "colour": "red"}),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(named(&body), ["colour", "description", "url"], "{body}");
    let (_, listed) = stack.get("/api/v1/webhooks", Some(&key)).await?;
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(1));
    Ok(())
}

#[tokio::test]
async fn a_webhook_registered_without_a_description_has_none_not_an_empty_one() -> Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("described").await?;
    let receiver = Receiver::start().await?;
    let (status, bare) = stack
        .post("/api/v1/webhooks", &key, json!({"url": receiver.url()}))
        .await?;
    assert_eq!(status, 201, "{bare}");
    assert_eq!(bare["data"]["description"], Value::Null, "{bare}");
    let (status, described) = stack
        .post(
            "/api/v1/webhooks",
            &key,
            json!({"url": receiver.url(), "description": "my laptop"}),
        )
        .await?;
    assert_eq!(status, 201, "{described}");
    let (_, listed) = stack.get("/api/v1/webhooks", Some(&key)).await?;
    let descriptions: Vec<&Value> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| &w["description"])
        .collect();
    assert_eq!(descriptions, [&Value::Null, &json!("my laptop")]);
    let id = bare["data"]["id"].as_str().unwrap();
    let (status, one) = stack
        .get(&format!("/api/v1/webhooks/{id}"), Some(&key))
        .await?;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["data"]["description"], Value::Null);
    Ok(())
}

#[tokio::test]
async fn a_key_at_its_webhook_limit_gets_a_409_worded_like_every_other_answer() -> Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_WEBHOOKS_PER_KEY", "1")
        .start()
        .await?;
    let key = stack.api_key("limited").await?;
    let receiver = Receiver::start().await?;
    stack.webhook(&key, &receiver.url()).await?;
    let (status, body) = stack
        .post("/api/v1/webhooks", &key, json!({"url": receiver.url()}))
        .await?;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body,
        json!({"status": 409, "code": "LIMIT_REACHED",
               "message": "Webhook limit reached: this key has 1 and a key may register 1; delete one first"})
    );
    Ok(())
}
