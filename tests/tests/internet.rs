//! Facing the internet: the public listeners hold only what the public may
//! call, every listener sheds slow and greedy clients within its limits,
//! and the operators' token must be strong.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ratewire_e2e::{eventually, sample, Board, Stack, ADMIN_TOKEN, VISIBLE_WITHIN};

fn host_port(url: &str) -> &str {
    url.trim_start_matches("http://")
}

#[test]
fn a_weak_admin_token_stops_api_and_ingest_at_start() -> anyhow::Result<()> {
    for process in ["ratewire-api", "ratewire-ingest"] {
        for weak in ["change-me", "please-change-me-before-production-2026"] {
            let output = std::process::Command::new(ratewire_e2e::binary(process)?)
                .env("RATEWIRE_ADMIN_TOKEN", weak)
                .output()?;
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{process}: {stderr}");
            assert!(
                stderr.starts_with("error: bad setting RATEWIRE_ADMIN_TOKEN: "),
                "{process}: {stderr}"
            );
            assert!(
                !stderr.contains(weak),
                "the token is never echoed: {stderr}"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn operator_endpoints_and_metrics_answer_only_on_the_operator_listeners() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let http = stack.http();
    for (public, operator, admin) in [
        (&stack.api_url, &stack.api_operator_url, "/v1/admin/keys"),
        (
            &stack.ingest_url,
            &stack.ingest_operator_url,
            "/v1/admin/banks",
        ),
    ] {
        for path in [admin, "/metrics"] {
            let on_public = http
                .get(format!("{public}{path}"))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await?;
            assert_eq!(on_public.status(), 404, "{public}{path}");
            let on_operator = http
                .get(format!("{operator}{path}"))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await?;
            assert_eq!(on_operator.status(), 200, "{operator}{path}");
        }
        for probe in ["/healthz", "/readyz"] {
            for base in [public, operator] {
                let answer = http.get(format!("{base}{probe}")).send().await?;
                assert_eq!(answer.status(), 200, "{base}{probe}");
            }
        }
    }
    Ok(())
}

/// Connections open on the API's public listener.
const PUBLIC_CONNECTIONS: &str = r#"ratewire_http_open_connections{listener="public"}"#;

/// Opens a connection and sends `head_bytes` bytes of an unfinished
/// request head, then nothing.
fn slow_client(address: &str, head_bytes: usize) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(address)?;
    let mut head = String::from("GET /api/v1/rates HTTP/1.1\r\nHost: x\r\n");
    while head.len() < head_bytes {
        head.push_str("X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    head.truncate(head_bytes.max(20));
    stream.write_all(head.as_bytes())?;
    Ok(stream)
}

/// Whether the server closed the connection (reads EOF or a reset).
fn closed(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .expect("a socket timeout");
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

#[tokio::test]
async fn slow_header_clients_are_cut_off_within_the_header_timeout_and_memory_stays_bounded(
) -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_HTTP_HEADER_TIMEOUT_SECS", "2")
        .start()
        .await?;
    let before = stack.rss_kib("ratewire-api")?;
    let address = host_port(&stack.api_url).to_owned();
    let started = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..200 {
        // Just under the header cap: each one holds as much as it may.
        clients.push(slow_client(&address, 15_000)?);
    }
    // The API's memory at its highest while it holds them, read until they
    // are all cut off.
    let holding = std::cell::Cell::new(before);
    let deadline = started + Duration::from_secs(2) + Duration::from_secs(3);
    let cut = eventually(
        "slow clients cut off",
        deadline.saturating_duration_since(Instant::now()),
        || {
            let rss = stack.rss_kib("ratewire-api").unwrap_or(0);
            holding.set(holding.get().max(rss));
            let all = clients.iter_mut().all(closed);
            async move { all.then_some(()) }
        },
    )
    .await;
    assert!(
        cut.is_ok(),
        "slow clients still open {:?} after they started",
        started.elapsed()
    );
    let holding = holding.get();
    assert!(
        holding < before + 64 * 1024,
        "200 slow clients grew the API from {before} KiB to {holding} KiB"
    );
    // Others are served meanwhile and after.
    let (status, _) = stack.get_raw("/healthz", None).await?;
    assert_eq!(status, 200);
    Ok(())
}

#[tokio::test]
async fn a_request_head_reaching_the_cap_gets_431() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    for address in [host_port(&stack.api_url), host_port(&stack.ingest_url)] {
        // The default cap (16 KiB) of a head with no end in sight. Exactly
        // that much, so the server has read everything when it answers and
        // closes (bytes left unread would turn its close into a reset).
        let mut stream = slow_client(address, 16_384)?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(
            answer.starts_with("HTTP/1.1 431"),
            "{address}: {}",
            answer.lines().next().unwrap_or("(nothing)")
        );
    }
    Ok(())
}

#[tokio::test]
async fn past_the_connection_cap_new_clients_wait_and_operators_still_get_in() -> anyhow::Result<()>
{
    let stack = Stack::builder()
        .env("RATEWIRE_HTTP_MAX_CONNECTIONS", "20")
        .start()
        .await?;
    let address = host_port(&stack.api_url).to_owned();
    let hogs: Vec<TcpStream> = (0..20)
        .map(|_| slow_client(&address, 100))
        .collect::<Result<_, _>>()?;
    stack
        .wait_metric("ratewire-api", PUBLIC_CONNECTIONS, 20.0, VISIBLE_WITHIN)
        .await?;
    // A new connection (not one the test's HTTP client keeps pooled): the
    // kernel queues it, the API does not take it.
    let mut waiting = TcpStream::connect(&address)?;
    waiting.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")?;
    waiting.set_read_timeout(Some(Duration::from_millis(700)))?;
    let mut buf = [0u8; 64];
    assert!(
        matches!(waiting.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a 21st client is not served while 20 are open"
    );
    let operator = stack
        .http()
        .get(format!("{}/healthz", stack.api_operator_url))
        .send()
        .await?;
    assert_eq!(
        operator.status(),
        200,
        "the operator listener has its own cap"
    );
    drop(hogs);
    waiting.set_read_timeout(Some(Duration::from_secs(5)))?;
    let read = waiting.read(&mut buf)?;
    assert!(
        buf[..read].starts_with(b"HTTP/1.1 200"),
        "the waiting client is served once the hogs are gone"
    );
    Ok(())
}

#[tokio::test]
async fn ten_thousand_made_up_keys_cost_no_postgres_query() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let before = sample(
        &stack.api_metrics().await?,
        "ratewire_api_key_lookups_postgres_total",
    );
    let started = Instant::now();
    let statuses = stack.made_up_key_flood(10_000, 64).await;
    let took = started.elapsed();
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 429),
        "every made-up key is refused: {:?}",
        statuses
            .iter()
            .filter(|s| **s != 401 && **s != 429)
            .take(5)
            .collect::<Vec<_>>()
    );
    let queries = sample(
        &stack.api_metrics().await?,
        "ratewire_api_key_lookups_postgres_total",
    ) - before;
    // Refused from the directory of live keys, without a query.
    assert_eq!(
        queries, 0.0,
        "{queries} Postgres key lookups for 10,000 made-up keys in {took:?}"
    );
    eprintln!("10,000 made-up keys: {queries} Postgres lookups in {took:?}");
    Ok(())
}

#[tokio::test]
async fn ipv6_address_rotation_and_forged_forwarded_for_stay_in_one_bucket() -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_TRUSTED_PROXIES", "127.0.0.1")
        .env(
            "RATEWIRE_PLANS",
            "free=60/10000,pro=1000/1000000,enterprise=100000/1000000000,anonymous=5/1000",
        )
        .start()
        .await?;
    ratewire_e2e::room_in_this_minute(20).await;
    let url = format!("{}/api/v1/currencies", stack.api_url);
    let status = |forwarded: String| {
        let request = stack.http().get(&url).header("x-forwarded-for", forwarded);
        async move { anyhow::Ok(request.send().await?.status().as_u16()) }
    };
    // One /64, a new address each time: one client.
    let mut rotating = Vec::new();
    for i in 1..=8 {
        rotating.push(status(format!("2001:db8:7:1::{i:x}")).await?);
    }
    assert_eq!(rotating, [401, 401, 401, 401, 401, 429, 429, 429]);
    // A forged left-hand address and a malformed entry: the walk stops at
    // the malformed entry, so each request counts for the proxy (here the
    // test's own address), never for the address the client made up.
    let mut forged = Vec::new();
    for i in 1..=8 {
        forged.push(status(format!("198.51.100.{i}, 203.0.113.9:4711")).await?);
    }
    assert_eq!(forged, [401, 401, 401, 401, 401, 429, 429, 429]);
    Ok(())
}

#[tokio::test]
async fn failed_publisher_and_operator_authentications_are_limited_per_client() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("LIM", "Limit Bank").await?;
    let board = Board::now().rate("USD", "155.1", "158");
    for _ in 0..10 {
        let (status, _) = stack
            .publish_board(bank, &format!("rwp_{}", "x".repeat(41)), &board)
            .await?;
        assert_eq!(status, 401);
    }
    let (status, body) = stack.publish_board(bank, &token, &board).await?;
    assert_eq!(
        (status, body["code"].as_str()),
        (429, Some("RATE_LIMIT_EXCEEDED")),
        "refused before even a good token is checked: {body}"
    );

    let keys = format!("{}/v1/admin/keys", stack.api_operator_url);
    for _ in 0..10 {
        let answer = stack
            .http()
            .get(&keys)
            .bearer_auth("a-wrong-guess-of-the-token")
            .send()
            .await?;
        assert_eq!(answer.status(), 401);
    }
    let answer = stack
        .http()
        .get(&keys)
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await?;
    assert_eq!(answer.status(), 429);
    assert!(answer.headers().contains_key("retry-after"));
    let log = std::fs::read_to_string(stack.logs.join("ratewire-api.log"))?;
    assert!(
        log.contains("operator authentication failed") && log.contains("127.0.0.1"),
        "logged with the client"
    );
    assert!(
        !log.contains("a-wrong-guess-of-the-token"),
        "never the token"
    );
    Ok(())
}
