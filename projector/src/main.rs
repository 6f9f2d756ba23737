use clap::Subcommand;
use std::io::Write;

use ratewire_projector::dead_letters;
use ratewire_projector::rebuild::{active_generation, rebuild_once};
use ratewire_projector::replay::{replay, ReplaySettings};
use ratewire_projector::{Application, Config};
use ratewire_service::{init_telemetry, shutdown_on_signal, CommandLine};

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
}

#[derive(Subcommand)]
enum DeadLettersCommand {
    /// Print dead letters of the active generation as JSON lines, oldest
    /// first (unresolved only, unless --all).
    List {
        #[arg(long)]
        all: bool,
    },
    /// Mark dead letters dealt with, by id; resolved ones are purged after
    /// RATEWIRE_DEAD_LETTERS_RETENTION_DAYS.
    Resolve {
        #[arg(required = true)]
        ids: Vec<i64>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = CommandLine::<Config, Command>::parse(
        "ratewire-projector",
        "ratewire projector: folds the event log into Postgres and Redis views.",
    );
    init_telemetry(&cli.config.common.log_format);
    match cli.command.unwrap_or(Command::Run) {
        Command::Run => {
            let app = Application::build(cli.config).await?;
            tracing::info!(port = app.port(), "projector listening for health checks");
            app.run_until_stopped(shutdown_on_signal()).await?;
        }
        Command::Rebuild => {
            let banks = rebuild_once(&cli.config).await?;
            tracing::info!(banks, "views rebuilt");
        }
        Command::DeadLetters(command) => {
            let (_, pool) = active_generation(&cli.config).await?;
            let mut out = std::io::stdout().lock();
            match command {
                DeadLettersCommand::List { all } => {
                    for letter in dead_letters::list(&pool, all).await? {
                        writeln!(out, "{}", serde_json::to_string(&letter)?)?;
                    }
                }
                DeadLettersCommand::Resolve { ids } => {
                    let resolved = dead_letters::resolve(&pool, &ids).await?;
                    writeln!(out, "resolved {resolved}")?;
                }
            }
        }
        Command::Replay { schema, no_switch } => {
            let settings = ReplaySettings {
                schema,
                switch: !no_switch,
            };
            replay(&cli.config, &settings, &shutdown_on_signal()).await?;
        }
    }
    Ok(())
}
