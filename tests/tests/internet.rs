//! Facing the internet: the public listeners hold only what the public may
//! call, every listener sheds slow and greedy clients within its limits,
//! and the operators' token must be strong.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ratewire_e2e::{Stack, ADMIN_TOKEN};

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
    let stack = Stack::start_with(&[("RATEWIRE_HTTP_HEADER_TIMEOUT_SECS", "2")]).await?;
    let before = stack.rss_kib("ratewire-api")?;
    let address = host_port(&stack.api_url).to_owned();
    let started = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..200 {
        // Just under the header cap: each one holds as much as it may.
        clients.push(slow_client(&address, 15_000)?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let holding = stack.rss_kib("ratewire-api")?;
    let deadline = started + Duration::from_secs(2) + Duration::from_secs(3);
    while clients.iter_mut().any(|c| !closed(c)) {
        assert!(
            Instant::now() < deadline,
            "slow clients still open {:?} after they started",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    let stack = Stack::start_with(&[("RATEWIRE_HTTP_MAX_CONNECTIONS", "20")]).await?;
    let address = host_port(&stack.api_url).to_owned();
    let hogs: Vec<TcpStream> = (0..20)
        .map(|_| slow_client(&address, 100))
        .collect::<Result<_, _>>()?;
    tokio::time::sleep(Duration::from_millis(300)).await;
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
