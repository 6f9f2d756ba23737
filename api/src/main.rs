use clap::Subcommand;
use ratewire_api::access::key_records::{self, NewKey};
use ratewire_api::access::keys;
use ratewire_api::redis_guard::RedisGuard;
use ratewire_api::{db, Application, Config};
use ratewire_service::allocator::purge_freed_memory_after;
use ratewire_service::{init_telemetry, shutdown_on_signal, CommandLine};

// Every request allocates and frees many small buffers across threads;
// glibc's allocator took about a fifth of the API's CPU in a profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        #[arg(long, default_value = key_records::DEFAULT_PLAN)]
        plan: String,
    },
    /// List keys (never their secrets).
    List,
    /// Revoke a key by its prefix; it stops working within a second everywhere.
    Revoke { prefix: String },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Freed memory goes back to the OS at once instead of after a delay:
    // a burst of short-lived request state beside long-lived connections
    // (thousands of live streams connecting) otherwise peaks higher
    // (docs/benchmarks.md).
    purge_freed_memory_after(0);
    let cli = CommandLine::<Config, Command>::parse(
        "ratewire-api",
        "ratewire api: the public read API (api-v1).",
    );
    let telemetry = init_telemetry(&cli.config.common.log_format, "ratewire-api");
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let app = Application::build(cli.config).await?;
            let stopped = app.run_until_stopped(shutdown_on_signal()).await;
            telemetry.shutdown().await;
            stopped?;
        }
        Command::Keys(command) => {
            let config = &cli.config;
            let pool = db::pool(&config.common.database_url, &config.schema)?;
            db::migrate(&pool, &config.schema).await?;
            let output = match command {
                KeysCommand::Create { name, plan } => serde_json::to_string_pretty(
                    &key_records::create(
                        &pool,
                        &config.plans,
                        NewKey {
                            name,
                            plan: Some(plan),
                        },
                    )
                    .await?,
                )?,
                KeysCommand::List => {
                    serde_json::to_string_pretty(&key_records::list(&pool).await?)?
                }
                KeysCommand::Revoke { prefix } => {
                    let redis = RedisGuard::new(
                        ratewire_readmodel::redis::connect(&config.read_model.redis_url)?,
                        std::time::Duration::from_secs(2),
                    );
                    let store =
                        keys::KeyStore::new(pool.clone(), redis, &config.read_model.redis_prefix);
                    if store.revoke(&prefix).await? == keys::Revocation::NotFound {
                        anyhow::bail!("no key has the prefix {prefix}");
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
