//! The live stream end to end, through the real processes and a real SSE
//! client (reqwest-eventsource): a board pushed through ingest reaches a
//! subscriber only once /rates shows it; filters; resuming with
//! Last-Event-ID after the API restarts; the stream limit of a plan; a
//! subscriber that does not keep up is dropped with a final event.

use std::time::Duration;

use ratewire_e2e::sse::{next_board, next_event, subscribe};
use ratewire_e2e::{ago, eventually, sample, Board, Stack, VISIBLE_WITHIN};
use serde_json::Value;

/// A bank with a publisher token, once /rates lists it from Redis: its
/// registration is a `board` event of its own (its /rates element
/// appeared), which must not be taken for the board a test pushes next.
/// /rates alone is not enough: it renders from Postgres while the view is
/// not written yet, and the registration's event would then come after a
/// subscription that followed.
async fn listed_bank(stack: &Stack, key: &str, code: &str) -> anyhow::Result<(i64, String)> {
    let (bank, token) = stack.bank_with_token(code, code).await?;
    stack
        .wait_served("the bank listed", bank, key, &format!("\"id\":{bank}"))
        .await?;
    eventually("the bank's view written", VISIBLE_WITHIN, || async {
        stack.bank_view_written(bank).await.ok()?.then_some(())
    })
    .await?;
    Ok((bank, token))
}

fn board(currency: &str, buying: &str, selling: &str, hours_ago: i64) -> Board {
    Board::at(ago(0, hours_ago))
        .rate(currency, buying, selling)
        .transactional(currency, buying, selling)
}

#[tokio::test]
async fn a_pushed_board_reaches_a_subscriber_once_rest_shows_it() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("live").await?;
    let (cbe, token) = listed_bank(&stack, &key, "CBE").await?;
    let (awash, awash_token) = listed_bank(&stack, &key, "AWASH").await?;
    let mut everything = subscribe(&stack, &key, "transactional=true", None).await;
    let mut only_awash =
        subscribe(&stack, &key, &format!("bankId={awash}&events=board"), None).await;
    let mut only_eur = subscribe(&stack, &key, "currencyCode=EUR", None).await;
    // Best rates too, but only those where one of its banks is best.
    let mut awash_best =
        subscribe(&stack, &key, &format!("bankId={awash}&events=best"), None).await;

    assert_eq!(
        stack
            .publish_board(cbe, &token, board("USD", "155.1", "158", 1))
            .await?
            .0,
        202
    );
    let (id, bank) = next_board(&mut everything).await?;
    assert_eq!(bank["id"], cbe);
    assert_eq!(bank["exchangeRates"][0]["cashBuying"], 155.1);
    assert_eq!(bank["exchangeRates"][0]["transactionalBuying"], 155.1);
    assert!(!id.is_empty(), "every board event has an id");
    // Reacting with a GET sees at least that board.
    let (_, rates) = stack
        .get(&format!("/api/v1/rates?bankId={cbe}"), Some(&key))
        .await?;
    assert_eq!(
        rates["data"][0]["data"][0]["exchangeRates"][0]["cashBuying"],
        155.1
    );
    // Then the best rates of USD.
    loop {
        let (event, _, data) = next_event(&mut everything, VISIBLE_WITHIN).await?;
        if event == "best" {
            assert_eq!(
                data["currencyCode"], "USD",
                "a best event names its currency"
            );
            assert_eq!(data["cashBuying"]["price"], 155.1);
            break;
        }
    }

    assert_eq!(
        stack
            .publish_board(awash, &awash_token, board("EUR", "170", "175", 1))
            .await?
            .0,
        202
    );
    let (_, bank) = next_board(&mut only_awash).await?;
    assert_eq!(
        bank["id"], awash,
        "the first board this filter lets through"
    );
    assert!(
        bank["exchangeRates"][0]
            .get("transactionalBuying")
            .is_none(),
        "not asked for"
    );
    let (_, bank) = next_board(&mut only_eur).await?;
    assert_eq!(bank["id"], awash, "CBE quotes no EUR");
    let (event, _, data) = next_event(&mut awash_best, VISIBLE_WITHIN).await?;
    assert_eq!(
        (event.as_str(), &data["currencyCode"]),
        ("best", &"EUR".into()),
        "USD's best is CBE's, so the first best event for Awash is EUR's"
    );
    assert_eq!(data["cashBuying"]["bank"]["id"], awash);
    Ok(())
}

#[tokio::test]
async fn a_subscriber_resumes_after_the_api_restarts() -> anyhow::Result<()> {
    let mut stack = Stack::start().await?;
    let key = stack.api_key("resume").await?;
    let (bank, token) = listed_bank(&stack, &key, "CBE").await?;
    let mut source = subscribe(&stack, &key, "", None).await;
    assert_eq!(
        stack
            .publish_board(bank, &token, board("USD", "150", "152", 3))
            .await?
            .0,
        202
    );
    let (last_id, _) = next_board(&mut source).await?;
    source.close();

    stack.kill("ratewire-api")?;
    // While it is down, two more boards; the later one is what counts.
    for (buying, hours) in [("151", 2), ("153", 1)] {
        let body = board("USD", buying, "160", hours);
        assert_eq!(stack.publish_board(bank, &token, &body).await?.0, 202);
    }
    stack
        .wait_count(
            "both boards folded",
            "SELECT count(*) FROM readmodel.boards",
            3,
            VISIBLE_WITHIN,
        )
        .await?;
    stack.start_process("ratewire-api")?;
    eventually("the api again", VISIBLE_WITHIN, || async {
        let response = stack
            .http()
            .get(format!("{}/readyz", stack.api_url))
            .send()
            .await
            .ok()?;
        response.status().is_success().then_some(())
    })
    .await?;

    let mut resumed = subscribe(&stack, &key, "", Some(&last_id)).await;
    let (id, data) = next_board(&mut resumed).await?;
    assert_eq!(
        data["exchangeRates"][0]["cashBuying"], 153,
        "what it missed, the bank once, at its latest"
    );
    assert!(id > last_id, "{id} after {last_id}");

    // An id no longer kept (or never given): a reset, then a snapshot.
    let mut too_old = subscribe(&stack, &key, "", Some("1-0")).await;
    let (event, _, _) = next_event(&mut too_old, VISIBLE_WITHIN).await?;
    assert_eq!(event, "reset");
    let (_, data) = next_board(&mut too_old).await?;
    assert_eq!(data["exchangeRates"][0]["cashBuying"], 153);
    Ok(())
}

#[tokio::test]
async fn a_plan_holds_so_many_streams_and_keyless_browsers_use_the_query() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key_on("one-stream", "free").await?;
    let open = |query: String| {
        let url = format!("{}/api/v1/stream?{query}", stack.api_url);
        let client = stack.http().clone();
        async move {
            client
                .get(url)
                .timeout(Duration::from_secs(3600))
                .send()
                .await
        }
    };
    let first = open(format!("apiKey={key}")).await?;
    assert_eq!(first.status(), 200);
    assert_eq!(
        first.headers()["content-type"],
        "text/event-stream",
        "the key in the query works"
    );
    let second = open(format!("apiKey={key}")).await?;
    assert_eq!(second.status(), 429);
    assert!(second.headers().contains_key("retry-after"));
    let body: Value = second.json().await?;
    assert_eq!(body["code"], "RATE_LIMIT_EXCEEDED");
    assert_eq!(open(String::new()).await?.status(), 401);

    // The first one ends: its slot is free again.
    drop(first);
    eventually("the slot given back", VISIBLE_WITHIN, || async {
        let again = open(format!("apiKey={key}")).await.ok()?;
        (again.status() == 200).then_some(())
    })
    .await?;
    let log = std::fs::read_to_string(stack.logs.join("ratewire-api.log"))?;
    assert!(!log.contains(&key), "the key in the query is never logged");
    Ok(())
}

/// A board of thirty currencies, `seconds` old: a large event.
fn wide_board(buying: u32, seconds: i64) -> Board {
    let codes = [
        "USD", "EUR", "GBP", "CHF", "JPY", "CNY", "SAR", "AED", "KWD", "CAD", "AUD", "SEK", "NOK",
        "DKK", "INR", "ZAR", "KES", "DJF", "QAR", "BHD", "OMR", "TRY", "RUB", "BRL", "MXN", "SGD",
        "HKD", "NZD", "PLN", "CZK",
    ];
    let as_of = (chrono::Utc::now() - chrono::Duration::seconds(seconds)).to_rfc3339();
    codes.iter().fold(Board::at(as_of), |board, c| {
        board
            .rate(c, buying, buying + 5)
            .transactional(c, buying, buying + 5)
    })
}

#[tokio::test]
async fn a_subscriber_that_does_not_keep_up_is_dropped_with_a_last_event() -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let stack = Stack::builder()
        .env("RATEWIRE_STREAM_BUFFER", "4")
        .start()
        .await?;
    let key = stack.api_key("slow").await?;
    let (bank, token) = listed_bank(&stack, &key, "CBE").await?;
    // A client with a tiny receive window that reads nothing for a while:
    // the API's writes to it stall, and the events pile up behind them.
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(2048)?;
    let address = stack.api_url.trim_start_matches("http://").parse()?;
    let mut connection = socket.connect(address).await?;
    connection
        .write_all(
            format!(
                "GET /api/v1/stream?transactional=true HTTP/1.1\r\nHost: api\r\nx-api-key: {key}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await?;
    // Subscribed once the answer's head arrives (the API subscribes
    // before it answers).
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(VISIBLE_WITHIN, connection.read(&mut byte)).await??;
        anyhow::ensure!(read == 1, "the stream ended before its head");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    let relayed = || async {
        let metrics = stack.api_metrics().await.unwrap_or_default();
        sample(&metrics, "ratewire_api_stream_changes_total")
    };
    let before = relayed().await;
    for i in 0..60 {
        assert_eq!(
            stack
                .publish_board(bank, &token, wide_board(100 + i, 600 - i as i64))
                .await?
                .0,
            202
        );
    }
    stack
        .wait_count(
            "every board folded",
            "SELECT count(*) FROM readmodel.boards",
            60,
            VISIBLE_WITHIN,
        )
        .await?;
    // Every board relayed to the subscribers: the slow one's buffer of
    // four overflowed long before.
    eventually("every board relayed", VISIBLE_WITHIN, || async {
        (relayed().await >= before + 60.0).then_some(())
    })
    .await?;
    // Reading again: what was in flight, then the last event, then the end.
    let mut received = Vec::new();
    tokio::time::timeout(VISIBLE_WITHIN, connection.read_to_end(&mut received)).await??;
    let text = String::from_utf8_lossy(&received);
    let last = text
        .split("\n\n")
        .filter(|e| e.contains("event: "))
        .last()
        .unwrap_or_default();
    assert!(last.contains("event: dropped"), "{last}");
    assert!(last.contains("keep up"), "{last}");
    Ok(())
}
