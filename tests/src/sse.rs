//! A live-stream subscriber for tests (reqwest-eventsource); every event it
//! receives is checked against the OpenAPI document.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest_eventsource::{Event, EventSource, RequestBuilderExt};
use serde_json::Value;

use crate::contract::Contract;
use crate::{Stack, VISIBLE_WITHIN};

/// What every event received is checked against: the document the API
/// serves (one build, so every stack's is the same).
static DOCUMENT: std::sync::OnceLock<Contract> = std::sync::OnceLock::new();

/// A subscriber's stream of `(event, id, data)`.
pub async fn subscribe(
    stack: &Stack,
    key: &str,
    query: &str,
    last_id: Option<&str>,
) -> EventSource {
    if let Some(contract) = &stack.contract {
        DOCUMENT.get_or_init(|| Contract::new(contract.document().clone()));
    }
    let mut request = stack
        .http()
        .get(format!("{}/api/v1/stream?{query}", stack.api_url))
        .header("x-api-key", key)
        // The harness's client times a whole request out; a stream is not one.
        .timeout(Duration::from_secs(3600));
    if let Some(id) = last_id {
        request = request.header("last-event-id", id);
    }
    let mut source = request.eventsource().expect("a request that can be cloned");
    source.set_retry_policy(Box::new(reqwest_eventsource::retry::Never));
    // The request goes out on the first poll: wait until it is open, so
    // what happens next is on the stream.
    match tokio::time::timeout(VISIBLE_WITHIN, source.next()).await {
        Ok(Some(Ok(Event::Open))) => {}
        other => panic!("the stream did not open: {other:?}"),
    }
    source
}

/// The next event, within `wait`.
pub async fn next_event(
    source: &mut EventSource,
    wait: Duration,
) -> anyhow::Result<(String, String, Value)> {
    let (event, id, data) = next_event_text(source, wait).await?;
    Ok((
        event,
        id,
        serde_json::from_str(&data).unwrap_or(Value::Null),
    ))
}

/// The next event within `wait`, its data as sent.
pub async fn next_event_text(
    source: &mut EventSource,
    wait: Duration,
) -> anyhow::Result<(String, String, String)> {
    let found = tokio::time::timeout(wait, async {
        while let Some(event) = source.next().await {
            match event {
                Ok(Event::Open) => continue,
                Ok(Event::Message(m)) => {
                    if let Some(contract) = DOCUMENT.get() {
                        if let Err(violation) = contract.check_event(&m.event, &m.id, &m.data) {
                            panic!("{violation:#}");
                        }
                    }
                    return Ok((m.event, m.id, m.data));
                }
                Err(e) => return Err(anyhow::anyhow!("the stream failed: {e}")),
            }
        }
        Err(anyhow::anyhow!("the stream ended"))
    })
    .await;
    found.map_err(|_| anyhow::anyhow!("no event within {wait:?}"))?
}

/// The next `board` event.
pub async fn next_board(source: &mut EventSource) -> anyhow::Result<(String, Value)> {
    loop {
        let (event, id, data) = next_event(source, VISIBLE_WITHIN).await?;
        if event == "board" {
            return Ok((id, data));
        }
    }
}
