//! Webhooks and rate alerts on a running stack, typed: create them through
//! the public API (each answer checked against its OpenAPI document), read
//! them back, and wait until the fold has judged a board and every call it
//! decided has been made.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use serde_json::Value;

use crate::support::eventually;
use crate::{Stack, VISIBLE_WITHIN};

impl Stack {
    /// POSTs `body` to the public API with `key`; the status and the body
    /// (`null` when there is none), checked against the OpenAPI document.
    pub async fn post(&self, path: &str, key: &str, body: Value) -> Result<(u16, Value)> {
        let (status, text) = self.post_text(path, key, &body.to_string()).await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// POSTs the JSON text `body` (its numbers written as a client wrote
    /// them) to the public API with `key`; the status and the answer as
    /// text, checked against the OpenAPI document.
    pub async fn post_text(&self, path: &str, key: &str, body: &str) -> Result<(u16, String)> {
        let response = self
            .http
            .post(format!("{}{path}", self.api_url))
            .header("x-api-key", key)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        let parsed = serde_json::from_str(&text).unwrap_or(Value::Null);
        self.conforms_as("post", path, status, &parsed);
        Ok((status, text))
    }

    /// DELETEs `path` on the public API with `key`; the status.
    pub async fn delete(&self, path: &str, key: &str) -> Result<u16> {
        let response = self
            .http
            .delete(format!("{}{path}", self.api_url))
            .header("x-api-key", key)
            .send()
            .await?;
        Ok(response.status().as_u16())
    }

    /// A webhook of `key`'s to `url`: its id and secret.
    pub async fn webhook(&self, key: &str, url: &str) -> Result<(String, String)> {
        let (status, body) = self
            .post("/api/v1/webhooks", key, serde_json::json!({"url": url}))
            .await?;
        ensure!(status == 201, "creating a webhook: {status} {body}");
        let data = &body["data"];
        Ok((
            data["id"].as_str().context("id")?.to_owned(),
            data["secret"].as_str().context("secret")?.to_owned(),
        ))
    }

    /// Asks for a call of `key`'s webhook `webhook` (`POST
    /// /webhooks/{id}/test`); the status and answer.
    pub async fn test_call(&self, key: &str, webhook: &str) -> Result<(u16, Value)> {
        self.post(
            &format!("/api/v1/webhooks/{webhook}/test"),
            key,
            Value::Null,
        )
        .await
    }

    /// An alert of `key`'s, `body` as `POST /alerts` takes it; its id.
    pub async fn alert(&self, key: &str, body: Value) -> Result<String> {
        let (status, answer) = self.post("/api/v1/alerts", key, body).await?;
        ensure!(status == 201, "creating an alert: {status} {answer}");
        Ok(answer["data"]["id"].as_str().context("id")?.to_owned())
    }

    /// `key`'s alert `id` as listed.
    pub async fn listed_alert(&self, key: &str, id: &str) -> Result<Value> {
        let (status, body) = self.get("/api/v1/alerts", Some(key)).await?;
        ensure!(status == 200, "{status} {body}");
        body["data"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["id"] == id).cloned())
            .context("the alert is listed")
    }

    /// Waits until `key`'s alert `id` has been judged on a board whose
    /// watched value is `value`; the alert as listed then.
    pub async fn alert_evaluated(&self, key: &str, id: &str, value: f64) -> Result<Value> {
        eventually(
            &format!("alert evaluated at {value}"),
            VISIBLE_WITHIN,
            || async {
                let alert = self.listed_alert(key, id).await.ok()?;
                (alert["lastValue"] == value && !alert["triggered"].is_null()).then_some(alert)
            },
        )
        .await
    }

    /// Waits until every crossing the fold has recorded is made into its
    /// messages: after the boards of interest are folded, the messages
    /// there are then all there will be.
    pub async fn wait_crossings_made(&self, within: Duration) -> Result<()> {
        self.wait_count(
            "every crossing made into messages",
            "SELECT count(*) FROM alerts.crossings",
            0,
            within,
        )
        .await
    }

    /// The ids of every message made for a webhook (each a call's
    /// `webhook-id`).
    pub async fn message_ids(&self) -> Result<std::collections::BTreeSet<String>> {
        let pool = sqlx::PgPool::connect(&format!("{}/{}", self.postgres, self.database)).await?;
        let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM alerts.deliveries")
            .fetch_all(&pool)
            .await?;
        pool.close().await;
        Ok(ids.into_iter().collect())
    }

    /// Where each of the messages `ids` stands (attempts, lease, delivery,
    /// last error), to say why a receiver lacks them.
    pub async fn message_states(&self, ids: &[&String]) -> Result<Vec<Value>> {
        let pool = sqlx::PgPool::connect(&format!("{}/{}", self.postgres, self.database)).await?;
        let states: Vec<Value> = sqlx::query_scalar(
            "SELECT to_jsonb(d) - 'body' FROM alerts.deliveries d WHERE id = ANY($1)",
        )
        .bind(ids.iter().map(|id| id.as_str()).collect::<Vec<_>>())
        .fetch_all(&pool)
        .await?;
        pool.close().await;
        Ok(states)
    }

    /// Waits until every crossing the fold has recorded is made into
    /// messages and every message is delivered or given up: after the
    /// boards of interest are folded, the calls a receiver has then are
    /// every call it will get.
    pub async fn wait_calls_settled(&self, within: Duration) -> Result<()> {
        self.wait_count(
            "every crossing called",
            "SELECT (SELECT count(*) FROM alerts.crossings) \
                  + (SELECT count(*) FROM alerts.quality_events) \
                  + (SELECT count(*) FROM alerts.deliveries \
                     WHERE delivered_at IS NULL AND failed_at IS NULL)",
            0,
            within,
        )
        .await
    }
}
