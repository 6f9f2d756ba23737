use clap::{Parser, Subcommand};
use ratewire_ingest::app::shutdown_signal;
use ratewire_ingest::{publisher, telemetry, Application, Config};
use tokio_util::sync::CancellationToken;

/// ratewire ingest: the publisher and operator service.
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
    /// Serve publishers and operators (the default).
    Serve,
    /// Create the event topic if it does not exist, then exit.
    CreateTopic,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init(&cli.config.log_format);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let app = Application::build(cli.config).await?;
            let shutdown = CancellationToken::new();
            let trigger = shutdown.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                trigger.cancel();
            });
            app.run_until_stopped(shutdown).await?;
        }
        Command::CreateTopic => publisher::ensure_topic(&cli.config).await?,
    }
    Ok(())
}
