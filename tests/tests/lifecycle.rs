//! Starting and stopping: a process answers 503 from its first moment until
//! its dependencies are ready, and SIGTERM lets in-flight work finish.

use std::time::{Duration, Instant};

use ratewire_e2e::{ago, eventually, Board, Stack, VISIBLE_WITHIN};
use serde_json::Value;

#[tokio::test]
async fn sigterm_stops_new_pushes_lets_in_flight_ones_finish_and_exits_cleanly(
) -> anyhow::Result<()> {
    let mut stack = Stack::builder().own_broker().start().await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;

    // A frozen broker holds each push in flight, waiting for its acknowledgement.
    stack.pause_broker(true)?;
    let pushes: Vec<_> = [("USD", 3), ("EUR", 2), ("GBP", 1)]
        .into_iter()
        .map(|(currency, hours_ago)| {
            let request = stack
                .http()
                .post(format!("{}/v1/banks/{bank}/boards", stack.ingest_url))
                .bearer_auth(&token)
                .header("content-type", "application/json")
                .body(Board::at(ago(0, hours_ago)).rate(currency, 100, 101).body());
            tokio::spawn(async move {
                let response = request.send().await?;
                anyhow::Ok(response.status().as_u16())
            })
        })
        .collect();
    // In flight: each push recorded by ingest, its publish waiting for the
    // broker's acknowledgement.
    stack
        .wait_count(
            "three pushes in flight",
            &format!("SELECT count(*) FROM ingest.published_boards WHERE bank_id = {bank}"),
            3,
            VISIBLE_WITHIN,
        )
        .await?;
    stack.signal("ratewire-ingest", "TERM")?;

    // No new connections once draining.
    let fresh = reqwest::Client::new();
    eventually(
        "ingest to stop accepting",
        Duration::from_secs(5),
        || async {
            match fresh
                .get(format!("{}/healthz", stack.ingest_url))
                .send()
                .await
            {
                Err(e) if e.is_connect() => Some(()),
                _ => None,
            }
        },
    )
    .await?;

    stack.pause_broker(false)?;
    for push in pushes {
        assert_eq!(
            push.await??,
            202,
            "an in-flight push is answered, and accepted"
        );
    }
    let status = stack
        .wait_exit("ratewire-ingest", Duration::from_secs(15))
        .await?;
    assert!(status.success(), "ingest exits cleanly: {status}");
    let log = std::fs::read_to_string(stack.logs.join("ratewire-ingest.log"))?;
    assert!(log.contains("ingest stopped"), "{log}");

    stack
        .wait_count(
            "the drained pushes in the read model",
            &format!("SELECT count(*) FROM readmodel.boards WHERE bank_id = {bank}"),
            3,
            VISIBLE_WITHIN,
        )
        .await?;
    Ok(())
}

#[tokio::test]
async fn started_without_postgres_ingest_and_api_answer_503_at_once_and_recover(
) -> anyhow::Result<()> {
    let mut stack = Stack::builder().postgres_through_proxy().start().await?;
    let key = stack.api_key("outage").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    for name in ["ratewire-ingest", "ratewire-api"] {
        stack.kill(name)?;
    }
    stack.postgres_down()?;
    for name in ["ratewire-ingest", "ratewire-api"] {
        stack.start_process(name)?;
    }
    for url in [&stack.ingest_url, &stack.api_url] {
        let healthz = format!("{url}/healthz");
        eventually(
            "alive without postgres",
            Duration::from_secs(30),
            || async {
                let response = stack.http().get(&healthz).send().await.ok()?;
                response.status().is_success().then_some(())
            },
        )
        .await?;
        let (status, body) = json(stack.http().get(format!("{url}/readyz"))).await?;
        assert_eq!(
            (status, &body["started"]),
            (503, &Value::Bool(false)),
            "{body}"
        );
    }

    let board = Board::now().rate("USD", "155.1", "158");
    let started = Instant::now();
    let response = stack
        .http()
        .post(format!("{}/v1/banks/{bank}/boards", stack.ingest_url))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(board.body())
        .send()
        .await?;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "answered at once"
    );
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let (status, body) = stack
        .get(&format!("/api/v1/rates?bankId={bank}"), Some(&key))
        .await?;
    assert_eq!(
        (status, &body["message"]),
        (503, &Value::from("Service Unavailable"))
    );

    stack.postgres_up().await?;
    for url in [&stack.ingest_url, &stack.api_url, &stack.projector_url] {
        let ready = format!("{url}/readyz");
        eventually(&ready, Duration::from_secs(30), || async {
            let response = stack.http().get(&ready).send().await.ok()?;
            response.status().is_success().then_some(())
        })
        .await?;
    }
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack
        .wait_served("the board served after the outage", bank, &key, "155.1")
        .await?;
    Ok(())
}

async fn json(request: reqwest::RequestBuilder) -> anyhow::Result<(u16, Value)> {
    let response = request.send().await?;
    Ok((response.status().as_u16(), response.json().await?))
}
