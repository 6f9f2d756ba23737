//! The open-loop load generator of `deploy/bench`'s latency phases: GET
//! requests at a fixed rate, each timed from the moment it was due, so a
//! slow answer cannot hold back the requests behind it (no coordinated
//! omission).
//!
//! oha does the same with `-q --latency-correction`, but it keeps every
//! result in one queue until the run ends, and each time that queue
//! doubles, copying it stalls the generator: the requests caught behind
//! those stalls made most of the slowest 1% of its runs (docs/benchmarks.md,
//! "Figures behind design choices in the code"). Here each connection
//! records into a histogram of fixed size: nothing grows while the run
//! lasts.
//!
//! Usage: `paced --rate 37000 --seconds 10 --connections 64 -H 'x-api-key: K' URL`.
//! Prints one JSON object: requests, requests per second, p50, p99, p99.9
//! and max in ms, answers by status and failed requests. With `--timeline`
//! it also says, for each 100 ms of the run, how many requests were due
//! and the slowest of them: where a tail comes from shows as a few slow
//! windows (a stall) or as many (a steady queue).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderName, HeaderValue, HOST};
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

#[derive(Parser)]
struct Args {
    /// Requests per second.
    #[arg(long)]
    rate: f64,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Keep-alive connections. When all are busy, a due request waits for
    /// one, and its wait is part of its latency.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// A request header, `name: value`; may be given more than once.
    #[arg(long = "header", short = 'H')]
    headers: Vec<String>,
    /// Also print, for each 100 ms window of due times, the requests due
    /// in it and the slowest of them (JSON, one line per window, to stderr).
    #[arg(long)]
    timeline: bool,
    /// An `http://host:port/path?query` URL.
    url: Uri,
}

/// The timeline's window.
const WINDOW: Duration = Duration::from_millis(100);

/// What every connection shares.
struct Plan {
    authority: String,
    path: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    start: Instant,
    end: Instant,
    rate: f64,
    /// The next request to send, numbered from the start.
    next: AtomicU64,
    /// Windows in the timeline; 0 without `--timeline`.
    windows: usize,
}

impl Plan {
    fn due(&self, index: u64) -> Instant {
        self.start + Duration::from_secs_f64(index as f64 / self.rate)
    }
}

/// One connection's results.
struct Tally {
    /// Microseconds from due to the last byte of the answer.
    latency: Histogram<u64>,
    statuses: BTreeMap<u16, u64>,
    failed: u64,
    /// Per window: requests due in it, and the slowest (microseconds).
    /// Sized before the run, like the histogram.
    timeline: Vec<(u64, u64)>,
}

impl Tally {
    fn new(windows: usize) -> Self {
        Self {
            latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
            statuses: BTreeMap::new(),
            failed: 0,
            timeline: vec![(0, 0); windows],
        }
    }

    fn record(&mut self, window: usize, micros: u64) {
        self.latency.saturating_record(micros.max(1));
        if let Some((count, slowest)) = self.timeline.get_mut(window) {
            *count += 1;
            *slowest = (*slowest).max(micros);
        }
    }

    fn merge(&mut self, other: Tally) {
        self.latency.add(&other.latency).expect("same bounds");
        for (mine, theirs) in self.timeline.iter_mut().zip(other.timeline) {
            mine.0 += theirs.0;
            mine.1 = mine.1.max(theirs.1);
        }
        for (status, n) in other.statuses {
            *self.statuses.entry(status).or_default() += n;
        }
        self.failed += other.failed;
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.rate > 0.0, "--rate must be positive");
    anyhow::ensure!(args.connections > 0, "--connections must be positive");
    tokio::runtime::Runtime::new()?.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let authority = args
        .url
        .authority()
        .context("the URL needs a host and port")?
        .to_string();
    let path = args
        .url
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    let headers = args
        .headers
        .iter()
        .map(|h| {
            let (name, value) = h.split_once(':').context("a header is `name: value`")?;
            Ok((name.trim().parse()?, value.trim().parse()?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Every connection is open before the first request is due.
    let start = Instant::now() + Duration::from_millis(500);
    let windows = if args.timeline {
        (args.seconds / WINDOW.as_secs_f64()).ceil() as usize
    } else {
        0
    };
    let plan = Arc::new(Plan {
        authority,
        path,
        headers,
        start,
        end: start + Duration::from_secs_f64(args.seconds),
        rate: args.rate,
        next: AtomicU64::new(0),
        windows,
    });
    let tasks: Vec<_> = (0..args.connections)
        .map(|_| tokio::spawn(connection(plan.clone())))
        .collect();
    let mut total = Tally::new(windows);
    for task in tasks {
        total.merge(task.await?);
    }
    let elapsed = start.elapsed().as_secs_f64();
    for (window, (count, slowest)) in total.timeline.iter().enumerate() {
        let at = window as f64 * WINDOW.as_secs_f64();
        let slowest = *slowest as f64 / 1000.0;
        eprintln!(r#"{{"at_s":{at:.1},"requests":{count},"slowest_ms":{slowest}}}"#);
    }

    let ms = |q: f64| total.latency.value_at_quantile(q) as f64 / 1000.0;
    let answered = total.latency.len();
    let summary = serde_json::json!({
        "requests": answered + total.failed,
        "requests_per_second": (answered as f64 / elapsed).round(),
        "p50_ms": ms(0.5),
        "p99_ms": ms(0.99),
        "p999_ms": ms(0.999),
        "max_ms": total.latency.max() as f64 / 1000.0,
        "statuses": total.statuses,
        "failed": total.failed,
    });
    println!("{summary}");
    Ok(())
}

async fn connection(plan: Arc<Plan>) -> Tally {
    let mut tally = Tally::new(plan.windows);
    let mut sender = connect(&plan).await.ok();
    loop {
        let index = plan.next.fetch_add(1, Ordering::Relaxed);
        let due = plan.due(index);
        if due >= plan.end {
            return tally;
        }
        // A request taken after it was due waited for a free connection:
        // that wait is the server's doing and counts. One taken early is
        // timed from when the timer woke it, which (tokio's timer has
        // millisecond steps) may be a little after its due time.
        let from = if Instant::now() >= due {
            due
        } else {
            tokio::time::sleep_until(due).await;
            Instant::now()
        };
        match send(&plan, &mut sender).await {
            Ok(status) => {
                let micros = u64::try_from(from.elapsed().as_micros()).unwrap_or(u64::MAX);
                let window = due.duration_since(plan.start).as_millis() / WINDOW.as_millis();
                tally.record(window as usize, micros);
                *tally.statuses.entry(status).or_default() += 1;
            }
            Err(_) => {
                tally.failed += 1;
                sender = None;
            }
        }
    }
}

async fn connect(plan: &Plan) -> anyhow::Result<SendRequest<Empty<Bytes>>> {
    let stream = TcpStream::connect(&plan.authority).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// One GET on the connection (a new one when it is gone); the answer's
/// status once its body has been read to the end.
async fn send(plan: &Plan, sender: &mut Option<SendRequest<Empty<Bytes>>>) -> anyhow::Result<u16> {
    let sender = match sender {
        Some(sender) if !sender.is_closed() => sender,
        _ => sender.insert(connect(plan).await?),
    };
    sender.ready().await?;
    let mut request = Request::get(plan.path.as_str())
        .header(HOST, plan.authority.as_str())
        .body(Empty::new())?;
    for (name, value) in &plan.headers {
        request.headers_mut().insert(name, value.clone());
    }
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        frame?;
    }
    Ok(status)
}
