use std::io::Write;

use clap::Subcommand;
use ratewire_ingest::cli::{self, BanksCommand, BoardsCommand, TokensCommand};
use ratewire_ingest::publisher::Publisher;
use ratewire_ingest::{Application, Config};
use ratewire_service::allocator::purge_freed_memory_after;
use ratewire_service::{init_telemetry, shutdown_on_signal, CommandLine};

// Each push parses its board into maps and values, encodes its event and
// frees them all; with glibc's allocator malloc and free took about a
// seventh of ingest's CPU at 32 publishers (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Correct published boards (the same code as the operator endpoint).
    #[command(subcommand)]
    Boards(BoardsCommand),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A push's memory is reused by the next ones under load; a short delay
    // still bounds what an instance keeps once publishers go quiet.
    purge_freed_memory_after(50);
    let cli = CommandLine::<Config, Command>::parse(
        "ratewire-ingest",
        "ratewire ingest: the publisher and operator service.",
    );
    let telemetry = init_telemetry(&cli.config.common.log_format, "ratewire-ingest");
    cli.config.kafka.check();
    let output = match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let app = Application::build(cli.config).await?;
            let stopped = app.run_until_stopped(shutdown_on_signal()).await;
            telemetry.shutdown().await;
            return Ok(stopped?);
        }
        Command::CreateTopic => {
            Publisher::new(&cli.config)?
                .ensure_topic(&cli.config)
                .await?;
            return Ok(());
        }
        Command::Banks(command) => cli::banks(&cli.config, command).await?,
        Command::Tokens(command) => cli::tokens(&cli.config, command).await?,
        Command::Boards(command) => cli::boards(&cli.config, command).await?,
    };
    // A command's result is its standard output, not a log line.
    writeln!(std::io::stdout(), "{output}")?;
    Ok(())
}
