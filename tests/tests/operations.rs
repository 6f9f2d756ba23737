//! What operators see of a running stack: each process's metrics, readiness
//! that means the projector has caught up, and a request id on every answer.

use std::time::Duration;

use ratewire_e2e::{eventually, Board, Stack};
use serde_json::Value;
use sqlx::Connection;

/// The sum of a metric's samples whose labels include every `labels` pair.
fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn metrics_of(stack: &Stack, base: &str) -> anyhow::Result<String> {
    let response = stack.http().get(format!("{base}/metrics")).send().await?;
    anyhow::ensure!(
        response.status() == 200,
        "{base}/metrics: {}",
        response.status()
    );
    Ok(response.text().await?)
}

#[tokio::test]
async fn every_process_counts_its_requests_publishes_and_decisions() -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env(
            "RATEWIRE_PLANS",
            "tiny=2/1000,enterprise=100000/1000000000,anonymous=10/1000",
        )
        .start()
        .await?;
    let key = stack.api_key("ops").await?;
    let tiny = stack.api_key_on("tiny", "tiny").await?;
    let (bank, token) = stack.bank_with_token("OPS", "Ops Bank").await?;
    let board = Board::now().rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack.wait_served("the board", bank, &key, "155.1").await?;
    assert_eq!(stack.get("/api/v1/nowhere", Some(&key)).await?.0, 404);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(stack.get("/api/v1/currencies", Some(&tiny)).await?.0);
    }
    assert_eq!(statuses, [200, 200, 429]);

    let api = metrics_of(&stack, &stack.api_operator_url).await?;
    let rates_ok = [
        ("route", "/api/v1/rates"),
        ("method", "GET"),
        ("status", "200"),
    ];
    assert!(
        sample(&api, "ratewire_http_requests_total", &rates_ok) >= 1.0,
        "{api}"
    );
    assert!(
        sample(
            &api,
            "ratewire_http_requests_total",
            &[("route", "unmatched"), ("status", "404")]
        ) >= 1.0,
        "unknown paths count under one label:\n{api}"
    );
    assert!(
        sample(
            &api,
            "ratewire_http_request_duration_seconds_count",
            &[("route", "/api/v1/rates")]
        ) >= 1.0
    );
    assert!(api.contains("ratewire_http_request_duration_seconds_bucket{"));
    assert_eq!(
        sample(
            &api,
            "ratewire_api_limiter_decisions_total",
            &[("decision", "rate_limited"), ("counted", "redis")]
        ),
        1.0
    );
    assert!(
        sample(
            &api,
            "ratewire_api_limiter_decisions_total",
            &[("decision", "allowed")]
        ) >= 3.0
    );
    assert!(
        sample(
            &api,
            "ratewire_api_views_served_total",
            &[("source", "redis")]
        ) >= 1.0
    );

    let ingest = metrics_of(&stack, &stack.ingest_operator_url).await?;
    // The registration and the board: both acknowledged by the broker.
    assert!(
        sample(
            &ingest,
            "ratewire_ingest_publish_total",
            &[("result", "acknowledged")]
        ) >= 2.0,
        "{ingest}"
    );
    assert!(ingest.contains("ratewire_ingest_publish_seconds_bucket{"));
    assert!(
        sample(
            &ingest,
            "ratewire_http_requests_total",
            &[("method", "POST"), ("status", "202")]
        ) >= 1.0
    );

    let projector = metrics_of(&stack, &stack.projector_url).await?;
    assert!(sample(&projector, "ratewire_projector_events_applied_total", &[]) >= 2.0);
    Ok(())
}

#[tokio::test]
async fn the_projector_is_ready_only_while_caught_up() -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_PROJECTOR_READY_LAG", "3")
        .start()
        .await?;
    let (bank, token) = stack.bank_with_token("LAG", "Lag Bank").await?;
    let readyz = format!("{}/readyz", stack.projector_url);
    let ready = |wanted: u16| {
        let (stack, readyz) = (&stack, &readyz);
        async move {
            let response = stack.http().get(readyz).send().await.ok()?;
            let status = response.status().as_u16();
            let body: Value = response.json().await.ok()?;
            (status == wanted).then_some(body)
        }
    };
    // The bank's registration is on the log too: ready once it is applied.
    let body = eventually(
        "ready with nothing to apply",
        Duration::from_secs(10),
        || async { ready(200).await.filter(|body| body["lag"] == 0) },
    )
    .await?;
    assert_eq!(body["caughtUp"], true);

    // Hold the fold back: its offset rows stay locked by this transaction.
    let url = format!("postgres://postgres@127.0.0.1:5432/{}", stack.database);
    let mut blocker = sqlx::PgConnection::connect(&url).await?;
    sqlx::query("BEGIN").execute(&mut blocker).await?;
    sqlx::query("LOCK TABLE readmodel.consumer_offsets IN ACCESS EXCLUSIVE MODE")
        .execute(&mut blocker)
        .await?;
    for i in 0..6 {
        let board = Board::at(format!("2026-11-23T08:00:0{i}Z")).rate("USD", format!("15{i}"), 160);
        assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    }
    let behind = eventually("not ready while behind", Duration::from_secs(10), || {
        ready(503)
    })
    .await?;
    assert_eq!(behind["caughtUp"], false, "{behind}");
    assert!(behind["lag"].as_i64().unwrap_or(0) > 3, "{behind}");
    assert_eq!(
        behind["postgres"], true,
        "Postgres answers; the fold is behind"
    );

    sqlx::query("ROLLBACK").execute(&mut blocker).await?;
    let body = eventually("ready again", Duration::from_secs(15), || ready(200)).await?;
    assert_eq!(body["lag"], 0);
    Ok(())
}

#[tokio::test]
async fn every_answer_carries_a_request_id() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    for base in [&stack.api_url, &stack.ingest_url] {
        let given = stack
            .http()
            .get(format!("{base}/healthz"))
            .header("x-request-id", "trace-me-42")
            .send()
            .await?;
        assert_eq!(given.headers()["x-request-id"], "trace-me-42", "{base}");
        let made = stack.http().get(format!("{base}/healthz")).send().await?;
        let id = made.headers()["x-request-id"].to_str()?;
        assert_eq!(id.len(), 36, "{base}: a UUID: {id}");
    }
    Ok(())
}

#[test]
fn a_bad_setting_stops_each_process_with_its_variable_named() -> anyhow::Result<()> {
    for (process, variable, value) in [
        ("ratewire-api", "RATEWIRE_PLANS", "free=ten/100"),
        ("ratewire-api", "RATEWIRE_SPREAD_CAP_PERCENT", "2%"),
        ("ratewire-projector", "RATEWIRE_SPREAD_CAP_PERCENT", "0"),
        ("ratewire-api", "RATEWIRE_OUTLIER_PERCENT", "-5"),
        ("ratewire-projector", "RATEWIRE_OUTLIER_PERCENT", "twenty"),
        ("ratewire-api", "RATEWIRE_OUTLIERS_IN_BEST", "maybe"),
        ("ratewire-ingest", "RATEWIRE_PUBLISH_TIMEOUT_MS", "soon"),
        (
            "ratewire-projector",
            "RATEWIRE_PROJECTOR_PARTITIONS",
            "slice:2/2",
        ),
    ] {
        let output = std::process::Command::new(ratewire_e2e::binary(process)?)
            .env(variable, value)
            .output()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{process}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: bad setting {variable}: ")),
            "{process}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    Ok(())
}

#[tokio::test]
async fn every_process_stops_cleanly_on_sigterm_and_on_ctrl_c() -> anyhow::Result<()> {
    let mut stack = Stack::start().await?;
    let key = stack.api_key("stop").await?;
    let (bank, token) = stack.bank_with_token("STOP", "Stop Bank").await?;
    let board = Board::now().rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack.wait_served("the board", bank, &key, "155.1").await?;

    for (process, signal) in [
        ("ratewire-projector", "TERM"),
        ("ratewire-api", "INT"),
        ("ratewire-ingest", "INT"),
    ] {
        stack.signal(process, signal)?;
        let status = stack.wait_exit(process, Duration::from_secs(15)).await?;
        assert!(status.success(), "{process} on SIG{signal}: {status}");
    }
    // The projector's offsets were committed with its rows: a new one has
    // nothing to apply again.
    stack.start_process("ratewire-projector")?;
    let readyz = format!("{}/readyz", stack.projector_url);
    let ready = eventually(
        "the new projector ready",
        Duration::from_secs(20),
        || async {
            let response = stack.http().get(&readyz).send().await.ok()?;
            let body: Value = response.json().await.ok()?;
            (body["lag"] == 0).then_some(body)
        },
    )
    .await?;
    assert_eq!(ready["caughtUp"], true);
    let boards = stack
        .sql_number("SELECT count(*) FROM readmodel.boards")
        .await?;
    assert_eq!(boards, Some(1));
    Ok(())
}
