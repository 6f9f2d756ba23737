use clap::Subcommand;

use ratewire_projector::cli::{self, DeadLettersCommand};
use ratewire_projector::replay::{replay, ReplaySettings};
use ratewire_projector::verify::{self, Report, VerifySettings};
use ratewire_projector::views::rebuild::rebuild_once;
use ratewire_projector::{Application, Config};
use ratewire_service::allocator::purge_freed_memory_after;
use ratewire_service::{init_telemetry, shutdown_on_signal, CommandLine};

// Each round of the views over all banks builds and frees its bodies;
// glibc's allocator handed that memory back to the OS and faulted it in
// again every round (docs/benchmarks.md has the measurements).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Subcommand)]
enum Command {
    /// Consume the topic and keep the read models current (the default).
    Run,
    /// Re-render every Redis view of the active generation from Postgres, then exit.
    Rebuild,
    /// Messages that could not be applied.
    #[command(subcommand)]
    DeadLetters(DeadLettersCommand),
    /// Fold the whole log from offset zero into a fresh schema while the API
    /// keeps serving the active one, then switch readers and projectors to it.
    Replay {
        /// The new generation's schema (must not hold tables yet).
        #[arg(long, value_parser = ratewire_service::settings::parse_schema)]
        schema: String,
        /// Build the generation but do not make it active (to compare it,
        /// or to switch later by replaying again).
        #[arg(long)]
        no_switch: bool,
    },
    /// Check that the active generation equals a replay of the whole log.
    ///
    /// Replays the log into a check schema without switching, compares the
    /// active generation with it (tables and Redis views), then drops it.
    /// Prints a JSON report; exits with 1 when they differ.
    Verify {
        /// The check generation's schema (default: verify_ and 8 random
        /// hex digits; must not hold tables yet).
        #[arg(long, value_parser = ratewire_service::settings::parse_schema)]
        schema: Option<String>,
        /// Keep the check generation (schema and views) afterwards.
        #[arg(long)]
        keep: bool,
    },
    /// Compare two existing generations' tables and Redis views.
    ///
    /// E.g. the one a replay replaced with the one it built. Prints a JSON
    /// report; exits with 1 when they differ.
    Compare {
        /// The generation compared (its rows are counted).
        #[arg(value_parser = ratewire_service::settings::parse_schema)]
        a: String,
        /// The generation it is compared with.
        #[arg(value_parser = ratewire_service::settings::parse_schema)]
        b: String,
    },
}

/// Prints `report` as one JSON line and, when the generations differ,
/// exits with status 1 (a script's `if ratewire-projector verify`).
fn conclude(report: &Report) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(report)?)?;
    out.flush()?;
    if !report.equal() {
        std::process::exit(1);
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Long enough that a round's buffers are used again by the next
    // round under load, short enough to bound what is held
    // (docs/benchmarks.md compares the settings).
    purge_freed_memory_after(50);
    let cli = CommandLine::<Config, Command>::parse(
        "ratewire-projector",
        "ratewire projector: folds the event log into Postgres and Redis views.",
    );
    let telemetry = init_telemetry(&cli.config.common.log_format, "ratewire-projector");
    cli.config.kafka.check();
    match cli.command.unwrap_or(Command::Run) {
        Command::Run => {
            let app = Application::build(cli.config).await?;
            tracing::info!(port = app.port(), "projector listening for health checks");
            let stopped = app.run_until_stopped(shutdown_on_signal()).await;
            telemetry.shutdown().await;
            stopped?;
        }
        Command::Rebuild => {
            let banks = rebuild_once(&cli.config).await?;
            tracing::info!(banks, "views rebuilt");
        }
        Command::DeadLetters(command) => {
            cli::dead_letters(&cli.config, command, &mut std::io::stdout().lock()).await?
        }
        Command::Replay { schema, no_switch } => {
            let settings = ReplaySettings {
                schema,
                switch: !no_switch,
            };
            replay(&cli.config, &settings, &shutdown_on_signal()).await?;
        }
        Command::Verify { schema, keep } => {
            let settings = VerifySettings { schema, keep };
            conclude(&verify::verify(&cli.config, &settings, &shutdown_on_signal()).await?)?;
        }
        Command::Compare { a, b } => conclude(&verify::compare(&cli.config, &a, &b).await?)?,
    }
    Ok(())
}
