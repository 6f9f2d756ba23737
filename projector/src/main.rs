use clap::Subcommand;
use ratewire_projector::rebuild::rebuild_once;
use ratewire_projector::replay::{replay, ReplaySettings};
use ratewire_projector::{Application, Config};
use ratewire_service::{init_telemetry, shutdown_on_signal, CommandLine};

#[derive(Subcommand)]
enum Command {
    /// Consume the topic and keep the read models current (the default).
    Run,
    /// Re-render every Redis view of the active generation from Postgres, then exit.
    Rebuild,
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
