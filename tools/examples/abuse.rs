//! The hostile side of `deploy/bench abuse`: slow-header clients and a
//! flood of made-up API keys, at once, against one API.
//!
//! - `--slow-clients N` connections each send the start of a request head
//!   (1 KB), then one more byte a second, never finishing it; when the
//!   server closes one, it reconnects, so N are always trying. Each
//!   connection's life, from its completed handshake to the server's
//!   close, is recorded.
//! - `--flood-rate R` requests a second, each with a new well-formed key
//!   nobody was given, over `--flood-connections` keep-alive connections.
//!
//! Usage: `abuse --seconds 30 --slow-clients 1000 --flood-rate 2000 URL`.
//! Prints one JSON object: slow connections opened and closed by the
//! server, their lifetimes (p50, p99, max in ms), connections still open at
//! the end, and the flood's answers by status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::header::HOST;
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use rand::distributions::Alphanumeric;
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::time::Instant;

#[derive(Parser)]
struct Args {
    /// How long to attack, in seconds.
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Slow-header connections kept trying at once.
    #[arg(long, default_value_t = 1000)]
    slow_clients: usize,
    /// Requests a second with made-up keys.
    #[arg(long, default_value_t = 2000.0)]
    flood_rate: f64,
    /// Keep-alive connections the flood uses.
    #[arg(long, default_value_t = 32)]
    flood_connections: usize,
    /// An `http://host:port/path` URL (the flood's target; the slow clients
    /// connect to the same host and port).
    url: Uri,
}

#[derive(Default)]
struct Slow {
    opened: u64,
    closed_by_server: u64,
    lifetimes_ms: Option<Histogram<u64>>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let authority = args
        .url
        .authority()
        .ok_or_else(|| anyhow::anyhow!("the URL needs host:port"))?
        .to_string();
    let end = Instant::now() + Duration::from_secs_f64(args.seconds);

    let slow = Arc::new(Mutex::new(Slow {
        lifetimes_ms: Some(Histogram::new(3)?),
        ..Slow::default()
    }));
    let mut tasks = Vec::new();
    for _ in 0..args.slow_clients {
        tasks.push(tokio::spawn(slow_client(
            authority.clone(),
            end,
            Arc::clone(&slow),
        )));
    }

    let statuses = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
    let per_connection = args.flood_rate / args.flood_connections as f64;
    for _ in 0..args.flood_connections {
        tasks.push(tokio::spawn(flood(
            authority.clone(),
            args.url.clone(),
            per_connection,
            end,
            Arc::clone(&statuses),
        )));
    }
    let mut still_open = 0u64;
    for task in tasks {
        if let Ok(true) = task.await {
            still_open += 1;
        }
    }
    let slow = slow.lock().await;
    let lifetimes = slow.lifetimes_ms.as_ref().expect("made above");
    let statuses = statuses.lock().await;
    println!(
        "{}",
        serde_json::json!({
            "slow_opened": slow.opened,
            "slow_closed_by_server": slow.closed_by_server,
            "slow_lifetime_p50_ms": lifetimes.value_at_quantile(0.5),
            "slow_lifetime_p99_ms": lifetimes.value_at_quantile(0.99),
            "slow_lifetime_max_ms": lifetimes.max(),
            "slow_open_at_end": still_open,
            "flood_statuses": *statuses,
        })
    );
    Ok(())
}

/// Keeps one slow-header connection trying until `end`; true when one was
/// still open then.
async fn slow_client(authority: String, end: Instant, slow: Arc<Mutex<Slow>>) -> bool {
    while Instant::now() < end {
        let Ok(mut stream) = TcpStream::connect(&authority).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        // From the completed handshake: how long the API lets it live.
        let started = Instant::now();
        slow.lock().await.opened += 1;
        let mut head = format!("GET /api/v1/rates HTTP/1.1\r\nHost: {authority}\r\n");
        while head.len() < 1024 {
            head.push_str("X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        if stream.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        // One byte a second until the server gives up on us (or the run ends).
        let mut buf = [0u8; 512];
        let closed = loop {
            tokio::select! {
                read = stream.read(&mut buf) => match read {
                    Ok(0) | Err(_) => break true,
                    Ok(_) => continue,
                },
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    if Instant::now() >= end {
                        break false;
                    }
                    if stream.write_all(b"X").await.is_err() {
                        break true;
                    }
                }
            }
        };
        if !closed {
            return true;
        }
        let mut slow = slow.lock().await;
        slow.closed_by_server += 1;
        let lived = started.elapsed().as_millis() as u64;
        let _ = slow
            .lifetimes_ms
            .as_mut()
            .expect("made in main")
            .record(lived.max(1));
    }
    false
}

/// Sends requests with made-up keys at `rate` a second over one keep-alive
/// connection until `end` (reconnecting when the server closes it).
async fn flood(
    authority: String,
    url: Uri,
    rate: f64,
    end: Instant,
    statuses: Arc<Mutex<BTreeMap<String, u64>>>,
) -> bool {
    let interval = Duration::from_secs_f64(1.0 / rate);
    let mut next = Instant::now();
    'connect: while Instant::now() < end {
        let Ok(stream) = TcpStream::connect(&authority).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok((mut sender, connection)) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
        else {
            continue;
        };
        tokio::spawn(connection);
        while Instant::now() < end {
            tokio::time::sleep_until(next).await;
            next += interval;
            let request = Request::get(url.clone())
                .header(HOST, &authority)
                .header("x-api-key", made_up_key())
                .body(Empty::<Bytes>::new())
                .expect("a valid request");
            let status = match sender.send_request(request).await {
                Ok(response) => {
                    let status = response.status().as_u16().to_string();
                    let _ = response.into_body().collect().await;
                    status
                }
                Err(_) => {
                    *statuses.lock().await.entry("failed".into()).or_default() += 1;
                    continue 'connect;
                }
            };
            *statuses.lock().await.entry(status).or_default() += 1;
        }
    }
    false
}

/// A well-formed API key nobody was given.
fn made_up_key() -> String {
    let mut rng = rand::thread_rng();
    let mut part = |n| -> String {
        (&mut rng)
            .sample_iter(Alphanumeric)
            .take(n)
            .map(char::from)
            .collect()
    };
    format!("rwk_{}_{}", part(8), part(32))
}
