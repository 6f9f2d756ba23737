//! Logging set-up, once per process.

use tracing_subscriber::EnvFilter;

/// Human-readable logs by default; JSON lines when `format` is `json`.
/// `RUST_LOG` overrides the default `info` filter.
pub fn init(format: &str) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,rdkafka=warn,sqlx=warn"));
    // Logs go to stderr so that CLI commands keep stdout for their results.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests building several apps in one process) is harmless.
    let _ = if format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
