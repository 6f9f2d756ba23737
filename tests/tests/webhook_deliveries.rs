//! Webhooks their owners can debug: one read alone, the attempts made at
//! its messages (newest first, paged with `next` and `Link`), and a message
//! sent again on request (one waiting for a retry, or one given up); all of
//! it for the owning key only.

use std::time::Duration;

use anyhow::{Context, Result};
use ratewire_e2e::receiver::Receiver;
use ratewire_e2e::{eventually, Stack, VISIBLE_WITHIN};
use serde_json::{json, Value};

/// A key and its webhook to a receiver of the test's own.
async fn owner(stack: &Stack, name: &str) -> Result<(String, Receiver, String)> {
    let key = stack.api_key(name).await?;
    let receiver = Receiver::start().await?;
    let (hook, _) = stack.webhook(&key, &receiver.url()).await?;
    Ok((key, receiver, hook))
}

/// Asks for a test call of `hook`; its message's id.
async fn test_message(stack: &Stack, key: &str, hook: &str) -> Result<String> {
    let (status, test) = stack.test_call(key, hook).await?;
    anyhow::ensure!(status == 202, "{status} {test}");
    Ok(test["data"]["messageId"]
        .as_str()
        .context("messageId")?
        .to_owned())
}

/// Waits until `hook`'s first page lists `count` attempts; the page.
async fn attempts(stack: &Stack, key: &str, hook: &str, count: usize) -> Result<Value> {
    let path = format!("/api/v1/webhooks/{hook}/deliveries");
    eventually(
        &format!("{count} attempts listed"),
        Duration::from_secs(20),
        || async {
            let (status, page) = stack.get(&path, Some(key)).await.ok()?;
            (status == 200 && page["data"]["attempts"].as_array()?.len() == count)
                .then_some(page["data"].clone())
        },
    )
    .await
}

/// `hook`'s webhook as its owner reads it.
async fn webhook(stack: &Stack, key: &str, hook: &str) -> Result<Value> {
    let (status, body) = stack
        .get(&format!("/api/v1/webhooks/{hook}"), Some(key))
        .await?;
    anyhow::ensure!(status == 200, "{status} {body}");
    Ok(body["data"].clone())
}

/// Waits until `hook` is disabled and its messages given up.
async fn disabled_with_nothing_pending(stack: &Stack, key: &str, hook: &str) -> Result<()> {
    eventually("the webhook disabled", Duration::from_secs(20), || async {
        let hook = webhook(stack, key, hook).await.ok()?;
        (hook["status"] == "disabled" && hook["pending"] == 0).then_some(())
    })
    .await
}

fn retry_path(hook: &str, message: &str) -> String {
    format!("/api/v1/webhooks/{hook}/messages/{message}/retry")
}

#[tokio::test]
async fn a_webhook_is_read_alone_and_another_keys_webhook_is_not_found() -> Result<()> {
    let stack = Stack::start().await?;
    let (key, _receiver, hook) = owner(&stack, "owner").await?;
    let stranger = stack.api_key("stranger").await?;
    let (_, listed) = stack.get("/api/v1/webhooks", Some(&key)).await?;
    assert_eq!(webhook(&stack, &key, &hook).await?, listed["data"][0]);
    let message = test_message(&stack, &key, &hook).await?;

    let nobody = "7d1f2c3b-0a4e-4b5f-8c6d-9e0f1a2b3c4d";
    for path in [
        format!("/api/v1/webhooks/{hook}"),
        format!("/api/v1/webhooks/{hook}/deliveries"),
        format!("/api/v1/webhooks/{nobody}/deliveries"),
        "/api/v1/webhooks/not-a-uuid".to_owned(),
    ] {
        let (status, body) = stack.get(&path, Some(&stranger)).await?;
        assert_eq!(
            (status, body["message"].as_str()),
            (404, Some("Webhook not found")),
            "{path}: {body}"
        );
    }
    let (status, body) = stack
        .post(&retry_path(&hook, &message), &stranger, Value::Null)
        .await?;
    assert_eq!(
        (status, body["message"].as_str()),
        (404, Some("Webhook not found"))
    );
    let (status, body) = stack
        .post(&retry_path(&hook, "msg_nothing"), &key, Value::Null)
        .await?;
    assert_eq!(
        (status, body["message"].as_str()),
        (404, Some("Message not found"))
    );
    Ok(())
}

#[tokio::test]
async fn deliveries_list_each_attempt_and_a_retry_sends_a_waiting_message_now() -> Result<()> {
    let stack = Stack::start().await?;
    let (key, receiver, hook) = owner(&stack, "debugging").await?;
    // Two failures: the message then waits 5 minutes for its third try.
    receiver.answer_next(&[500, 500]);
    let message = test_message(&stack, &key, &hook).await?;
    let failed = attempts(&stack, &key, &hook, 2).await?;
    assert_eq!(failed["webhookId"], hook.as_str());
    assert_eq!(failed["next"], Value::Null);
    for (attempt, number) in failed["attempts"].as_array().unwrap().iter().zip([2, 1]) {
        assert_eq!(attempt["messageId"], message.as_str(), "{attempt}");
        assert_eq!(attempt["type"], "webhook.test");
        assert_eq!(attempt["attempt"], number, "newest first: {failed}");
        assert_eq!(attempt["delivered"], false);
        assert_eq!(attempt["status"], 500);
        let error = attempt["error"].as_str().unwrap_or_default();
        assert!(error.contains("500"), "{attempt}");
        assert!(attempt["durationMs"].is_u64(), "{attempt}");
    }
    assert_eq!(webhook(&stack, &key, &hook).await?["pending"], 1);

    let (status, retried) = stack
        .post(&retry_path(&hook, &message), &key, Value::Null)
        .await?;
    assert_eq!(status, 202, "{retried}");
    assert_eq!(retried["data"]["messageId"], message.as_str());
    let received = receiver.wait_for(3, VISIBLE_WITHIN).await?;
    assert_eq!(received[2].id(), message, "the same message, not a copy");
    let listed = attempts(&stack, &key, &hook, 3).await?;
    let newest = &listed["attempts"][0];
    assert_eq!(
        (
            newest["attempt"].clone(),
            newest["delivered"].clone(),
            newest["status"].clone(),
            newest["error"].clone()
        ),
        (json!(3), json!(true), json!(204), Value::Null),
        "{listed}"
    );
    let times: Vec<&str> = listed["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["attemptedAt"].as_str())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    eventually("the webhook healthy", VISIBLE_WITHIN, || async {
        let hook = webhook(&stack, &key, &hook).await.ok()?;
        (hook["status"] == "active" && hook["pending"] == 0).then_some(())
    })
    .await?;

    // Delivered: not sent again.
    let (status, body) = stack
        .post(&retry_path(&hook, &message), &key, Value::Null)
        .await?;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["message"], "Message already delivered");
    Ok(())
}

#[tokio::test]
async fn a_given_up_message_is_sent_again_on_request_enabling_its_webhook() -> Result<()> {
    let stack = Stack::start().await?;
    let (key, receiver, hook) = owner(&stack, "given-up").await?;
    receiver.answer_next(&[500, 500, 500]);
    let message = test_message(&stack, &key, &hook).await?;
    attempts(&stack, &key, &hook, 1).await?;
    // As if it had failed for a day: its next failure disables it and
    // gives its messages up.
    stack
        .sql(&format!(
            "UPDATE alerts.webhooks SET failing_since = now() - interval '25 hours' \
             WHERE id = '{hook}'"
        ))
        .await?;
    disabled_with_nothing_pending(&stack, &key, &hook).await?;
    attempts(&stack, &key, &hook, 2).await?;

    // Retried while the receiver still fails: one attempt, given up again.
    let (status, body) = stack
        .post(&retry_path(&hook, &message), &key, Value::Null)
        .await?;
    assert_eq!(status, 202, "{body}");
    attempts(&stack, &key, &hook, 3).await?;
    disabled_with_nothing_pending(&stack, &key, &hook).await?;
    // Once it answers: delivered, and the webhook healthy again.
    let (status, _) = stack
        .post(&retry_path(&hook, &message), &key, Value::Null)
        .await?;
    assert_eq!(status, 202);
    let received = receiver.wait_for(4, VISIBLE_WITHIN).await?;
    assert!(received.iter().all(|r| r.id() == message));
    let listed = attempts(&stack, &key, &hook, 4).await?;
    assert_eq!(listed["attempts"][0]["delivered"], true, "{listed}");
    eventually("the webhook active", VISIBLE_WITHIN, || async {
        let hook = webhook(&stack, &key, &hook).await.ok()?;
        (hook["status"] == "active").then_some(())
    })
    .await?;
    Ok(())
}

/// `path` on the API with `key`: the body, checked against the document,
/// and the `Link` header, if any.
async fn page(stack: &Stack, key: &str, path: &str) -> Result<(Value, Option<String>)> {
    let response = stack
        .http()
        .get(format!("{}{path}", stack.api_url))
        .header("x-api-key", key)
        .send()
        .await?;
    let status = response.status().as_u16();
    let link = response
        .headers()
        .get("link")
        .and_then(|l| l.to_str().ok())
        .map(str::to_owned);
    let body: Value = response.json().await?;
    stack.conforms(path, status, &body);
    anyhow::ensure!(status == 200, "{path}: {status} {body}");
    Ok((body["data"].clone(), link))
}

#[tokio::test]
async fn deliveries_are_paged_newest_first_with_next_and_link() -> Result<()> {
    // More than a page, even when the page's last millisecond holds many.
    const MESSAGES: usize = 150;
    let stack = Stack::start().await?;
    let (key, receiver, hook) = owner(&stack, "pages").await?;
    for _ in 0..MESSAGES {
        test_message(&stack, &key, &hook).await?;
    }
    receiver.wait_for(MESSAGES, Duration::from_secs(30)).await?;
    stack.wait_calls_settled(VISIBLE_WITHIN).await?;

    let first_path = format!("/api/v1/webhooks/{hook}/deliveries");
    let (first, link) = page(&stack, &key, &first_path).await?;
    let shown = first["attempts"].as_array().unwrap().len();
    assert!(
        (100..MESSAGES).contains(&shown),
        "{shown} on the first page"
    );
    let next = first["next"].as_str().context("a next page")?.to_owned();
    assert!(
        next.starts_with(&format!("{first_path}?before=")) && next.ends_with('Z'),
        "{next}"
    );
    let before = next.rsplit('=').next().unwrap_or_default();
    assert_eq!(
        before.len(),
        "2026-11-28T10:00:00.123Z".len(),
        "milliseconds: {next}"
    );
    assert_eq!(link, Some(format!("<{next}>; rel=\"next\"")));
    let (second, link) = page(&stack, &key, &next).await?;
    assert_eq!(second["next"], Value::Null);
    assert_eq!(link, None, "the last page links nowhere");

    let all: Vec<&Value> = first["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["attempts"].as_array().unwrap())
        .collect();
    let messages: std::collections::BTreeSet<&str> =
        all.iter().filter_map(|a| a["messageId"].as_str()).collect();
    assert_eq!(
        (all.len(), messages.len()),
        (MESSAGES, MESSAGES),
        "each attempt on one page"
    );
    let times: Vec<&str> = all
        .iter()
        .filter_map(|a| a["attemptedAt"].as_str())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");

    let (status, body) = stack
        .get(&format!("{first_path}?before=yesterday"), Some(&key))
        .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"]["before"].is_array(), "{body}");
    Ok(())
}
