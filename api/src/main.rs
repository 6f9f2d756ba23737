use clap::{Parser, Subcommand};
use ratewire_api::keys::{self, NewKey};
use ratewire_api::{db, Application, Config};
use ratewire_proto::runtime::{init_telemetry, shutdown_on_signal};

// Every request allocates and frees many small buffers across threads;
// glibc's allocator took about a fifth of the API's CPU in a profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// ratewire api: the public read API (api-v1).
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
    /// Serve the API (the default).
    Serve,
    /// Manage API keys directly in Postgres (the same code as the operator endpoints).
    #[command(subcommand)]
    Keys(KeysCommand),
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create a key and print it (it is shown only this once).
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = keys::DEFAULT_PLAN)]
        plan: String,
    },
    /// List keys (never their secrets).
    List,
    /// Revoke a key by its prefix; it stops working within a second everywhere.
    Revoke { prefix: String },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli: Cli = ratewire_proto::runtime::parse_settings();
    init_telemetry(&cli.config.log_format);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let app = Application::build(cli.config).await?;
            app.run_until_stopped(shutdown_on_signal()).await?;
        }
        Command::Keys(command) => {
            let config = &cli.config;
            let pool = db::pool(&config.database_url, &config.schema)?;
            db::migrate(&pool, &config.schema).await?;
            let output = match command {
                KeysCommand::Create { name, plan } => serde_json::to_string_pretty(
                    &keys::create(
                        &pool,
                        &config.plans,
                        NewKey {
                            name,
                            plan: Some(plan),
                        },
                    )
                    .await?,
                )?,
                KeysCommand::List => serde_json::to_string_pretty(&keys::list(&pool).await?)?,
                KeysCommand::Revoke { prefix } => {
                    let redis = ratewire_projector::redis_views::connect(&config.redis_url)?;
                    let store = keys::KeyStore::new(pool.clone(), redis, &config.redis_prefix);
                    if !store.revoke(&prefix).await? {
                        anyhow::bail!("no live key has the prefix {prefix}");
                    }
                    format!("revoked {prefix}")
                }
            };
            // The CLI's result is its standard output, not a log line.
            use std::io::Write;
            writeln!(std::io::stdout(), "{output}")?;
        }
    }
    Ok(())
}
