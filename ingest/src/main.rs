use std::io::Write;

use clap::{Parser, Subcommand};
use ratewire_ingest::cli::{self, BanksCommand, TokensCommand};
use ratewire_ingest::{publisher, Application, Config};
use ratewire_proto::runtime::{init_telemetry, shutdown_on_signal};

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
    /// Manage banks directly (the same code as the operator endpoints; each
    /// change is published on the log).
    #[command(subcommand)]
    Banks(BanksCommand),
    /// Manage publisher tokens directly.
    #[command(subcommand)]
    Tokens(TokensCommand),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli: Cli = ratewire_proto::runtime::parse_settings();
    init_telemetry(&cli.config.log_format);
    let output = match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let app = Application::build(cli.config).await?;
            app.run_until_stopped(shutdown_on_signal()).await?;
            return Ok(());
        }
        Command::CreateTopic => {
            publisher::ensure_topic(&cli.config).await?;
            return Ok(());
        }
        Command::Banks(command) => cli::banks(&cli.config, command).await?,
        Command::Tokens(command) => cli::tokens(&cli.config, command).await?,
    };
    // A command's result is its standard output, not a log line.
    writeln!(std::io::stdout(), "{output}")?;
    Ok(())
}
