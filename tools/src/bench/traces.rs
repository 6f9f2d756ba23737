//! `deploy/bench traces`: what OpenTelemetry traces cost. Ingest (boards/s
//! and the p99 of its acknowledgements, 32 publishers) and the API
//! (`/rates?bankId=1`: saturation, and the p99 at 70% of it) on a stack
//! with traces off (no OTLP endpoint: no exporter, no layer), then on with
//! `parentbased_traceidratio` at 0.1 and at 1.0, exporting to a receiver
//! in this process that takes every export and drops it; beside the bare
//! baselines measured on the first stack (the broker's client alone, the
//! axum handler answering the same bytes). Printed, not written to the
//! page.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::Router;

use super::bare_producer::bare_producer;
use super::full::{measure, single_bank_baseline, Measured};
use super::procs::{self, Procs};
use super::{say, Settings};

/// Boards ingest publishes in each mode (30 currencies each).
const BOARDS: u64 = 20_000;

/// Whether and how much the stack traces.
#[derive(Debug, Clone, Copy)]
enum Tracing {
    Off,
    /// `parentbased_traceidratio` with this ratio.
    Sampled(f64),
}

impl Tracing {
    fn label(self) -> String {
        match self {
            Tracing::Off => "traces off".into(),
            Tracing::Sampled(ratio) => format!("traces on, ratio {ratio}"),
        }
    }

    /// The stack's settings for it, exporting to `endpoint`. Every mode
    /// logs at the processes' default filter rather than the bench's
    /// `warn`: RUST_LOG filters spans too, and at `warn` none is exported.
    fn env(self, endpoint: &str) -> Vec<(&'static str, String)> {
        let mut env = vec![("RUST_LOG", "info,rdkafka=warn,sqlx=warn".to_owned())];
        if let Tracing::Sampled(ratio) = self {
            env.extend([
                ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_owned()),
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio".into()),
                ("OTEL_TRACES_SAMPLER_ARG", ratio.to_string()),
            ]);
        }
        env
    }
}

/// What one mode measured.
struct Row {
    label: String,
    boards_per_second: f64,
    ack_p99_ms: f64,
    api: Measured,
    /// Exports the receiver took, and their bytes.
    exports: u64,
    bytes: u64,
}

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let sink = Sink::start().await?;
    let mut rows = Vec::new();
    let mut baselines = None;
    for tracing in [Tracing::Off, Tracing::Sampled(0.1), Tracing::Sampled(1.0)] {
        say(tracing.label());
        let mut procs = Procs::new(settings, &tracing.env(&sink.endpoint())).await?;
        procs.start_stack().await?;
        let key = procs.api_key("bench", "bench")?;
        let auth = format!("x-api-key: {key}");
        let api = format!("http://127.0.0.1:{}", procs::API);
        let taken = sink.taken();
        say(format!(
            "ingest: {BOARDS} boards of 30 currencies, 32 publishers"
        ));
        let ingest = tokio::task::block_in_place(|| procs.boards(BOARDS, 1.0))?;
        procs::wait_served(&api, &key).await?;
        let headers = [auth.clone(), "accept-encoding: identity".into()];
        let url = format!("{api}/api/v1/rates?bankId=1");
        let measured =
            tokio::task::block_in_place(|| measure(&procs, "traces-rates", &url, &headers))?;
        let after = sink.taken();
        if baselines.is_none() {
            say("bare baselines: the broker's client alone, the axum handler");
            let bare = bare_producer(ingest.number("accepted") as usize, 32).await?;
            let axum = single_bank_baseline(&mut procs, &api, &auth).await?;
            baselines = Some((bare, axum));
        }
        rows.push(Row {
            label: tracing.label(),
            boards_per_second: ingest.number("boards_per_second"),
            ack_p99_ms: ingest.number("ack_p99_ms"),
            api: measured,
            exports: after.0 - taken.0,
            bytes: after.1 - taken.1,
        });
    }
    println!("| run | ingest boards/s | ingest ack p99 (ms) | API requests/s | API p99 at 70% (ms) | exports (MB) |");
    println!("|---|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {:.0} | {:.2} | {:.0} | {:.2} | {} ({:.1}) |",
            row.label,
            row.boards_per_second,
            row.ack_p99_ms,
            row.api.rps,
            row.api.latency.p99,
            row.exports,
            row.bytes as f64 / 1e6
        );
    }
    if let Some((bare, axum)) = baselines {
        println!(
            "| bare baselines | {:.0} (broker's client) | {:.2} | {:.0} (axum) | {:.2} | |",
            bare.per_second, bare.ack.p99, axum.rps, axum.latency.p99
        );
    }
    Ok(())
}

/// An OTLP/HTTP receiver that answers every export 200 and keeps nothing
/// but their count and bytes: what the exporter costs, not a collector.
struct Sink {
    addr: SocketAddr,
    taken: Arc<(AtomicU64, AtomicU64)>,
}

impl Sink {
    async fn start() -> anyhow::Result<Sink> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let taken: Arc<(AtomicU64, AtomicU64)> = Arc::default();
        let app = Router::new()
            .route("/v1/traces", post(take))
            .with_state(Arc::clone(&taken));
        // Runs until the bench ends.
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Sink { addr, taken })
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Exports and bytes taken so far.
    fn taken(&self) -> (u64, u64) {
        (
            self.taken.0.load(Ordering::Relaxed),
            self.taken.1.load(Ordering::Relaxed),
        )
    }
}

async fn take(State(taken): State<Arc<(AtomicU64, AtomicU64)>>, body: Bytes) {
    taken.0.fetch_add(1, Ordering::Relaxed);
    taken.1.fetch_add(body.len() as u64, Ordering::Relaxed);
}
