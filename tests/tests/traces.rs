//! OpenTelemetry traces: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, a board
//! pushed with a publisher's W3C `traceparent` is one trace, exported over
//! OTLP/HTTP to a real receiver decoding the official protobuf messages:
//! ingest's request, the projector's fold of its record (through the
//! Kafka record's headers), the webhook call its crossing causes (whose
//! `traceparent` the receiver gets), and the API's answer to the same
//! publisher reading its board back with the same trace context.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use ratewire_e2e::otlp::{Collected, Collector};
use ratewire_e2e::receiver::Receiver;
use ratewire_e2e::{eventually, minutes_ago, Board, Stack, VISIBLE_WITHIN};
use serde_json::json;

const INGEST: &str = "ratewire-ingest";
const PROJECTOR: &str = "ratewire-projector";
const API: &str = "ratewire-api";

fn usd(minutes: i64, buying: &str, selling: &str) -> Board {
    Board::at(minutes_ago(minutes)).rate("USD", buying, selling)
}

/// A random id of `bytes` bytes in hex, as a tracing SDK makes them.
fn random_id(bytes: usize) -> String {
    hex::encode((0..bytes).map(|_| rand::random::<u8>()).collect::<Vec<_>>())
}

#[tokio::test]
async fn a_board_pushed_with_a_traceparent_is_one_trace_through_ingest_the_projector_its_webhook_and_the_api(
) -> Result<()> {
    let collector = Collector::start().await?;
    let stack = Stack::builder()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        // Exported every 100 ms rather than every 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .start()
        .await?;
    let key = stack.api_key("traces").await?;
    let (cbe, token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let receiver = Receiver::start().await?;
    let (hook, _) = stack.webhook(&key, &receiver.url()).await?;
    stack
        .push_and_wait(cbe, &token, &usd(50, "155.00", "158.00"))
        .await?;
    stack
        .alert(
            &key,
            json!({"webhookId": hook, "currencyCode": "USD", "field": "cashBuying",
               "condition": "above", "threshold": 160, "bankId": cbe}),
        )
        .await?;

    // The publisher's span, as its own tracing SDK would send it.
    let (trace_id, publisher_span) = (random_id(16), random_id(8));
    let traceparent = format!("00-{trace_id}-{publisher_span}-01");
    let board = usd(40, "161.00", "164.00");
    let pushed = stack
        .http()
        .post(format!("{}/v1/banks/{cbe}/boards", stack.ingest_url))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("traceparent", &traceparent)
        .body(board.to_string())
        .send()
        .await?;
    ensure!(pushed.status() == 202, "push: {}", pushed.status());
    stack.wait_board_served(cbe, &board).await?;
    // The same publisher reads its board back, in the same trace.
    let read = stack
        .http()
        .get(format!("{}/api/v1/rates?bankId={cbe}", stack.api_url))
        .header("x-api-key", &key)
        .header("traceparent", &traceparent)
        .send()
        .await?;
    ensure!(read.status() == 200, "read: {}", read.status());

    // The crossing's call continues the trace.
    let calls = receiver.wait_for(1, VISIBLE_WITHIN).await?;
    let sent = calls[0].header("traceparent").to_owned();
    let sent_parts: Vec<&str> = sent.split('-').collect();
    ensure!(
        sent_parts.len() == 4 && sent_parts[1] == trace_id,
        "the webhook call's traceparent {sent:?} is not in trace {trace_id}"
    );

    let spans = eventually(
        "the trace from the three processes",
        VISIBLE_WITHIN,
        || async {
            let spans = collector.trace(&trace_id);
            let services: BTreeSet<&str> = spans.iter().map(|s| s.service.as_str()).collect();
            let called = spans.iter().any(|s| s.name == "webhook call");
            ([INGEST, PROJECTOR, API]
                .iter()
                .all(|s| services.contains(s))
                && called)
                .then_some(spans)
        },
    )
    .await?;
    print_trace(&spans, &publisher_span);

    // Every span hangs from the publisher's or from another of the trace.
    let by_id: BTreeMap<&str, &Collected> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    for span in &spans {
        ensure!(
            span.parent_span_id == publisher_span
                || by_id.contains_key(span.parent_span_id.as_str()),
            "{} {}'s parent {} is not in the trace",
            span.service,
            span.name,
            span.parent_span_id
        );
    }
    let parent_of = |span: &Collected| by_id.get(span.parent_span_id.as_str()).copied();
    let ingest_request = spans
        .iter()
        .find(|s| s.service == INGEST && s.name == "request")
        .context("ingest's request span")?;
    ensure!(ingest_request.parent_span_id == publisher_span);
    let fold = spans
        .iter()
        .find(|s| s.service == PROJECTOR && s.name == "fold")
        .context("the projector's fold span")?;
    ensure!(
        parent_of(fold).is_some_and(|p| p.service == INGEST),
        "the fold continues ingest's span"
    );
    let call = spans
        .iter()
        .find(|s| s.service == PROJECTOR && s.name == "webhook call")
        .context("the webhook call's span")?;
    ensure!(
        call.parent_span_id == fold.span_id,
        "the call continues the fold"
    );
    ensure!(
        sent_parts[2] == call.span_id,
        "the receiver's parent is the call's span"
    );
    let api_request = spans
        .iter()
        .find(|s| s.service == API && s.name == "request")
        .context("the API's request span")?;
    ensure!(api_request.parent_span_id == publisher_span);
    // Probes and scrapes are the platform's, every few seconds: none is
    // exported (the harness polled every process's /readyz to start it).
    let probes: Vec<_> = collector
        .spans()
        .into_iter()
        .filter(|s| ["/healthz", "/readyz", "/metrics"].contains(&s.path.as_str()))
        .collect();
    ensure!(probes.is_empty(), "probes exported: {probes:?}");
    // Children end within their parents' time (allowing for clocks read
    // by different processes of one machine).
    let slack = Duration::from_millis(5).as_nanos() as u64;
    for span in &spans {
        if let Some(parent) = parent_of(span).filter(|p| p.service == span.service) {
            ensure!(
                span.start_unix_nano + slack >= parent.start_unix_nano,
                "{} starts before its parent {}",
                span.name,
                parent.name
            );
        }
    }
    Ok(())
}

/// The trace span by span as a tree (each span under its parent, siblings
/// in start order): service, name, duration, start after the trace's
/// first span, parent.
fn print_trace(spans: &[Collected], publisher_span: &str) {
    let start = spans.iter().map(|s| s.start_unix_nano).min().unwrap_or(0);
    println!("trace {} ({} spans)", spans[0].trace_id, spans.len());
    println!(
        "{:<42} {:<20} {:>11} {:>10} {:<16} parent",
        "name", "service", "duration", "start", "span"
    );
    // Depth first from the spans whose parent is not in the trace.
    let mut stack: Vec<(&Collected, usize)> = spans
        .iter()
        .rev()
        .filter(|s| !spans.iter().any(|p| p.span_id == s.parent_span_id))
        .map(|s| (s, 0))
        .collect();
    while let Some((span, depth)) = stack.pop() {
        let parent = if span.parent_span_id == publisher_span {
            format!("{} (the publisher's)", span.parent_span_id)
        } else {
            span.parent_span_id.clone()
        };
        println!(
            "{:<42} {:<20} {:>8.3} ms {:>7.3} ms {:<16} {}",
            format!("{}{}", "  ".repeat(depth), span.name),
            span.service,
            span.duration().as_secs_f64() * 1e3,
            span.start_unix_nano.saturating_sub(start) as f64 / 1e6,
            span.span_id,
            parent
        );
        // `spans` is in start order; pushed reversed, popped in order.
        stack.extend(
            spans
                .iter()
                .rev()
                .filter(|s| s.parent_span_id == span.span_id)
                .map(|s| (s, depth + 1)),
        );
    }
}
