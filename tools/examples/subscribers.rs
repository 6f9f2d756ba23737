//! `deploy/bench live`'s load: many live-stream subscribers on one API,
//! and a publisher pushing boards at a fixed rate, with the delivery time
//! of every board to every subscriber following its bank, from the push's
//! 202 to the event's arrival.
//!
//! Subscriber `i` follows bank `i % banks + 1` (`?bankId=..&events=board`),
//! so each board reaches `subscribers / banks` of them. Every rate of push
//! `n` is `1000 + n`: a subscriber reads the number back from the event and
//! the delivery is matched with the push. An event that arrives before its
//! push's 202 was processed here counts as delivered at once.
//!
//! Usage: `subscribers --api http://127.0.0.1:18080 --ingest
//! http://127.0.0.1:18081 --key KEY --tokens tokens.txt --subscribers 10000
//! --rate 100 --seconds 20 --currencies 30` (tokens.txt: `bankId token`
//! per line). Prints one JSON object.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    api: String,
    #[arg(long)]
    ingest: String,
    #[arg(long)]
    key: String,
    /// A file of `bankId token` lines: the banks pushed to and followed.
    #[arg(long)]
    tokens: std::path::PathBuf,
    #[arg(long, default_value_t = 10_000)]
    subscribers: usize,
    /// Boards per second, across the banks.
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Currencies on each board.
    #[arg(long, default_value_t = 30)]
    currencies: usize,
    /// Connections opened at once while subscribing.
    #[arg(long, default_value_t = 200)]
    opening: usize,
    /// A file created when the pushes start (for a script timing other
    /// load beside them).
    #[arg(long)]
    ready_file: Option<std::path::PathBuf>,
}

const CODES: [&str; 30] = [
    "USD", "EUR", "GBP", "CHF", "JPY", "CNY", "SAR", "AED", "KWD", "CAD", "AUD", "SEK", "NOK",
    "DKK", "INR", "ZAR", "KES", "DJF", "QAR", "BHD", "OMR", "TRY", "RUB", "BRL", "MXN", "SGD",
    "HKD", "NZD", "PLN", "CZK",
];

/// What happened to a subscriber or a push.
enum Seen {
    /// Push `n` of `bank` was answered 202 at this instant.
    Pushed(u64, Instant),
    /// A subscriber got push `n` at this instant.
    Received(u64, Instant),
    /// A subscriber's stream ended or failed.
    Lost,
}

fn host_port(url: &str) -> anyhow::Result<String> {
    Ok(url
        .strip_prefix("http://")
        .context("an http:// URL")?
        .trim_end_matches('/')
        .to_owned())
}

/// One subscriber: a raw HTTP/1.1 request, then frames until the end.
async fn subscribe(address: String, key: String, bank: u64, seen: mpsc::UnboundedSender<Seen>) {
    let run = async {
        let mut stream = TcpStream::connect(&address).await?;
        stream.set_nodelay(true)?;
        stream
            .write_all(
                format!(
                    "GET /api/v1/stream?bankId={bank}&events=board HTTP/1.1\r\nHost: {address}\r\nx-api-key: {key}\r\n\r\n"
                )
                .as_bytes(),
            )
            .await?;
        let mut buffer = Vec::with_capacity(16 * 1024);
        let mut chunk = vec![0u8; 16 * 1024];
        let frame_end = memchr::memmem::Finder::new(b"\n\n");
        let value = memchr::memmem::Finder::new(b"\"cashBuying\":");
        // Where the search for a frame's end goes on from: what was
        // searched already holds none.
        let mut searched = 0;
        loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return anyhow::Ok(());
            }
            buffer.extend_from_slice(&chunk[..n]);
            // Each frame ends with a blank line; the number follows the
            // first "cashBuying":.
            let mut start = 0;
            while let Some(end) = frame_end.find(&buffer[searched..]).map(|e| searched + e) {
                let frame = &buffer[start..end];
                if let Some(at) = value.find(frame) {
                    let digits = &frame[at + 13..];
                    let digits = &digits[..digits
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .unwrap_or(digits.len())];
                    // A snapshot's board from before the run reads as
                    // no push of ours.
                    if let Some(n) = std::str::from_utf8(digits)
                        .ok()
                        .and_then(|d| d.parse::<u64>().ok())
                        .and_then(|value| value.checked_sub(1000))
                    {
                        let _ = seen.send(Seen::Received(n, Instant::now()));
                    }
                }
                start = end + 2;
                searched = start;
            }
            buffer.drain(..start);
            // The last byte may be the first half of a frame's end.
            searched = buffer.len().saturating_sub(1);
        }
    };
    let _ = run.await;
    let _ = seen.send(Seen::Lost);
}

fn board(n: u64, currencies: usize) -> String {
    let value = 1000 + n;
    let rates: Vec<String> = CODES
        .iter()
        .take(currencies)
        .map(|c| {
            format!(
                r#"{{"currency":"{c}","cashBuying":{value},"cashSelling":{},"transactionalBuying":{value},"transactionalSelling":{}}}"#,
                value + 5,
                value + 5
            )
        })
        .collect();
    format!(r#"{{"rates":[{}]}}"#, rates.join(","))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tokens: Vec<(u64, String)> = std::fs::read_to_string(&args.tokens)?
        .lines()
        .filter_map(|l| {
            let (id, token) = l.split_once(' ')?;
            Some((id.trim().parse().ok()?, token.trim().to_owned()))
        })
        .collect();
    anyhow::ensure!(!tokens.is_empty(), "no banks in {}", args.tokens.display());
    let api = host_port(&args.api)?;
    let (seen, mut events) = mpsc::unbounded_channel();

    // Subscribe, a few hundred at a time.
    let opened = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(args.opening));
    for i in 0..args.subscribers {
        let bank = tokens[i % tokens.len()].0;
        let permit = Arc::clone(&gate).acquire_owned().await?;
        let (api, key, seen) = (api.clone(), args.key.clone(), seen.clone());
        tokio::spawn(async move {
            // The connection is open once the request is written; the
            // permit paces the opening only.
            drop(permit);
            subscribe(api, key, bank, seen).await
        });
    }
    // Let the last ones connect and subscribe.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let subscribing_seconds = opened.elapsed().as_secs_f64();
    if let Some(path) = &args.ready_file {
        std::fs::write(path, b"pushing\n")?;
    }
    // Subscribers of each bank, by its place in the tokens file.
    let mut followers = vec![0u64; tokens.len()];
    for i in 0..args.subscribers {
        followers[i % tokens.len()] += 1;
    }

    // Push at the rate, round robin over the banks.
    let client = reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(5))
        .build()?;
    let pushes = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let pusher = {
        let (tokens, seen, pushes, failed) = (
            tokens.clone(),
            seen.clone(),
            Arc::clone(&pushes),
            Arc::clone(&failed),
        );
        let ingest = args.ingest.trim_end_matches('/').to_owned();
        let (rate, seconds, currencies) = (args.rate, args.seconds, args.currencies);
        tokio::spawn(async move {
            let total = (rate * seconds) as u64;
            let start = Instant::now();
            let mut in_flight = tokio::task::JoinSet::new();
            for n in 0..total {
                tokio::time::sleep_until(start + Duration::from_secs_f64(n as f64 / rate)).await;
                let (bank, token) = tokens[n as usize % tokens.len()].clone();
                let (client, seen, pushes, failed, ingest) = (
                    client.clone(),
                    seen.clone(),
                    Arc::clone(&pushes),
                    Arc::clone(&failed),
                    ingest.clone(),
                );
                in_flight.spawn(async move {
                    let answer = client
                        .post(format!("{ingest}/v1/banks/{bank}/boards"))
                        .bearer_auth(token)
                        .header("content-type", "application/json")
                        .body(board(n, currencies))
                        .send()
                        .await;
                    match answer {
                        Ok(r) if r.status().as_u16() == 202 => {
                            pushes.fetch_add(1, Ordering::Relaxed);
                            let _ = seen.send(Seen::Pushed(n, Instant::now()));
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            while in_flight.join_next().await.is_some() {}
        })
    };
    drop(seen);

    // Match deliveries with pushes until the pushes are done and the last
    // deliveries had a few seconds to arrive.
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut pushed: HashMap<u64, Instant> = HashMap::new();
    let mut early: HashMap<u64, Vec<Instant>> = HashMap::new();
    let (mut delivered, mut expected, mut lost) = (0u64, 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds + 5.0);
    loop {
        let next = tokio::select! {
            event = events.recv() => event,
            _ = tokio::time::sleep_until(deadline) => None,
        };
        let Some(event) = next else { break };
        match event {
            Seen::Pushed(n, at) => {
                pushed.insert(n, at);
                expected += followers[n as usize % followers.len()];
                for received in early.remove(&n).unwrap_or_default() {
                    histogram
                        .record(received.saturating_duration_since(at).as_micros().max(1) as u64)?;
                    delivered += 1;
                }
            }
            Seen::Received(n, at) => match pushed.get(&n) {
                Some(push) => {
                    histogram
                        .record(at.saturating_duration_since(*push).as_micros().max(1) as u64)?;
                    delivered += 1;
                }
                None => early.entry(n).or_default().push(at),
            },
            Seen::Lost => lost += 1,
        }
    }
    let _ = pusher.await;
    let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
    let accepted = pushes.load(Ordering::Relaxed);
    println!(
        "{}",
        serde_json::json!({
            "subscribers": args.subscribers,
            "subscribing_seconds": subscribing_seconds,
            "boards_accepted": accepted,
            "boards_failed": failed.load(Ordering::Relaxed),
            "deliveries_expected": expected,
            "deliveries": delivered,
            "streams_lost": lost,
            "p50_ms": ms(0.5),
            "p99_ms": ms(0.99),
            "p999_ms": ms(0.999),
            "max_ms": histogram.max() as f64 / 1000.0,
        })
    );
    Ok(())
}
