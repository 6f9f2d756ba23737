//! Logs: one format for the three processes, on stderr so that CLI commands
//! keep stdout for their results.

use tracing_subscriber::EnvFilter;

/// Human-readable logs by default; JSON lines when `format` is `json`.
/// `RUST_LOG` overrides the default filter.
pub fn init_telemetry(format: &str) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,rdkafka=warn,sqlx=warn"));
    // Colours only for a person at a terminal, not in log files.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    // A second init (several apps in one test process) is harmless.
    let _ = if format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
