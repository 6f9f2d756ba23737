//! Logs and traces: one format for the three processes, logs on stderr so
//! that CLI commands keep stdout for their results, and spans exported
//! when an OTLP endpoint is set ([`crate::traces`]).

use tracing::Subscriber;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter};

use crate::traces::Exporter;

/// What [`init_telemetry`] started and must be stopped at the end: the
/// trace exporter, when there is one.
#[derive(Debug)]
#[must_use = "the last spans are sent by Telemetry::shutdown"]
pub struct Telemetry {
    exporter: Option<Exporter>,
}

impl Telemetry {
    /// Sends the spans still queued (nothing to do with traces off).
    pub async fn shutdown(self) {
        if let Some(exporter) = self.exporter {
            exporter.shutdown().await;
        }
    }
}

/// Human-readable logs by default; JSON lines when `format` is `json`.
/// `RUST_LOG` overrides the default filter, for log lines and exported
/// spans alike. `service` is the name traces carry unless
/// `OTEL_SERVICE_NAME` is set. Runs inside the Tokio runtime the exporter
/// sends on.
pub fn init_telemetry(format: &str, service: &str) -> Telemetry {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,rdkafka=warn,sqlx=warn"));
    let exporter = match Exporter::from_env(service) {
        Ok(exporter) => exporter,
        Err(e) => {
            // Like any bad setting: stopped at start, with status 2.
            eprintln!("error: bad setting OTEL_EXPORTER_OTLP_ENDPOINT (or another OTEL_*): {e}");
            std::process::exit(2);
        }
    };
    // A second init (several apps in one test process) is harmless.
    let _ = subscriber(filter, format == "json", exporter.as_ref()).try_init();
    Telemetry { exporter }
}

/// The log lines (text, in colour only for a person at a terminal, or
/// JSON, on stderr) and, with an exporter, its spans. One filter for all:
/// with a filter of their own for the spans, ingest's `publish` span went
/// unexported in the end-to-end test (not understood yet). With traces
/// off the OpenTelemetry layer is `None`: it sees no span at all.
pub(crate) fn subscriber(
    filter: EnvFilter,
    json: bool,
    exporter: Option<&Exporter>,
) -> impl Subscriber + Send + Sync + for<'span> LookupSpan<'span> {
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let text = (!json).then(|| fmt::layer().with_ansi(ansi).with_writer(std::io::stderr));
    let json = json.then(|| fmt::layer().json().with_writer(std::io::stderr));
    tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .with(exporter.map(Exporter::layer))
}
