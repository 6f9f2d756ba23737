//! How every ratewire process logs, stops and waits for its dependencies.
//!
//! These conventions are shared like the events are: operators rely on all
//! three processes behaving alike (stderr logs in the same format, SIGTERM
//! handled the same way, the same back-off while a dependency is down).
//! Enabled by the `runtime` feature.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::warn;
use tracing_subscriber::EnvFilter;

/// Human-readable logs by default; JSON lines when `format` is `json`.
/// `RUST_LOG` overrides the default filter. Logs go to stderr so that CLI
/// commands keep stdout for their results.
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

/// How often histogram samples are folded into their buckets between
/// scrapes.
const METRICS_UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The process's Prometheus recorder, installed on first use (call it at
/// start: anything counted before is lost); render it on `GET /metrics`.
/// Every `metrics::counter!` and friends in the process lands here.
pub fn metrics() -> &'static metrics_exporter_prometheus::PrometheusHandle {
    static HANDLE: std::sync::OnceLock<metrics_exporter_prometheus::PrometheusHandle> =
        std::sync::OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
            .set_buckets(&[
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ])
            .expect("static bucket list is not empty")
            .build_recorder();
        let handle = recorder.handle();
        // Another recorder may exist when several apps share a test process;
        // this handle still renders its own.
        let _ = metrics::set_global_recorder(recorder);
        // Histogram samples wait in the recorder until something drains
        // them into the buckets; a bare recorder has no task of its own for
        // that, so without scrapes every request's samples were kept.
        let upkeep = handle.clone();
        let spawned = std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(METRICS_UPKEEP_EVERY);
                upkeep.run_upkeep();
            });
        if let Err(e) = spawned {
            warn!(error = %e, "metrics upkeep thread not started; histograms drain only when scraped");
        }
        handle
    })
}

/// Parses the command line and `RATEWIRE_*` settings; on a bad value,
/// exits with status 2 and a message naming the environment variable (when
/// the value came from one) as well as the flag, instead of a panic or a
/// flag the operator never typed.
pub fn parse_settings<T: clap::Parser>() -> T {
    let error = match T::try_parse() {
        Ok(parsed) => return parsed,
        Err(error) => error,
    };
    let flag = match error.get(clap::error::ContextKind::InvalidArg) {
        Some(clap::error::ContextValue::String(flag)) => Some(flag.clone()),
        _ => None,
    };
    let from_env = flag.and_then(|flag| env_of(&T::command(), &flag));
    match from_env {
        Some(variable) => {
            let rendered = error.render().to_string();
            let detail = rendered.lines().next().unwrap_or_default();
            let detail = detail.strip_prefix("error: ").unwrap_or(detail);
            eprintln!("error: bad setting {variable}: {detail}");
            std::process::exit(2);
        }
        None => error.exit(),
    }
}

/// The environment variable behind `flag` (as clap prints it, e.g.
/// `--batch-max <BATCH_MAX>`), if it is set; searched in subcommands too.
fn env_of(command: &clap::Command, flag: &str) -> Option<String> {
    let long = flag.split_whitespace().next()?.trim_start_matches("--");
    let found = command.get_arguments().find_map(|arg| {
        let variable = arg.get_env()?.to_str()?;
        (arg.get_long() == Some(long) && std::env::var_os(variable).is_some())
            .then(|| variable.to_owned())
    });
    found.or_else(|| command.get_subcommands().find_map(|sub| env_of(sub, flag)))
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

/// A token cancelled by Ctrl-C or SIGTERM: hand clones to every task that
/// must stop.
pub fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutdown requested");
        trigger.cancel();
    });
    token
}

/// Runs `attempt` until it succeeds, backing off from 100 ms to 5 s between
/// failures and logging each; `None` when `shutdown` comes first.
pub async fn retry<T, E, F, Fut>(
    what: &str,
    shutdown: &CancellationToken,
    mut attempt: F,
) -> Option<T>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut delay = Duration::from_millis(100);
    loop {
        match attempt().await {
            Ok(value) => return Some(value),
            Err(e) => warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "{what} failed"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn retry_keeps_trying_until_success() {
        let calls = AtomicU32::new(0);
        let shutdown = CancellationToken::new();
        let value = retry("test", &shutdown, || async {
            match calls.fetch_add(1, Ordering::Relaxed) {
                0..=2 => Err("not yet"),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(value, Some(3));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_gives_up_on_shutdown() {
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let value: Option<()> = retry("test", &shutdown, || async { Err("down") }).await;
        assert_eq!(value, None);
    }
}
