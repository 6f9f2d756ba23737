use clap::{Parser, Subcommand};
use ratewire_projector::app::{rebuild_once, shutdown_signal};
use ratewire_projector::{telemetry, Application, Config};
use tokio_util::sync::CancellationToken;

/// ratewire projector: folds the event log into Postgres and Redis views.
#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(flatten)]
    config: Config,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Consume the topic and keep the read models current (the default).
    Run,
    /// Re-render every Redis view from Postgres, then exit.
    Rebuild,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init(&cli.config.log_format);
    match cli.command.unwrap_or(Command::Run) {
        Command::Run => {
            let app = Application::build(cli.config).await?;
            tracing::info!(port = app.port(), "projector listening for health checks");
            let shutdown = CancellationToken::new();
            let trigger = shutdown.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                trigger.cancel();
            });
            app.run_until_stopped(shutdown).await?;
        }
        Command::Rebuild => {
            let banks = rebuild_once(&cli.config).await?;
            tracing::info!(banks, "views rebuilt");
        }
    }
    Ok(())
}
