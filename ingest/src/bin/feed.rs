use std::time::Duration;

use clap::{Parser, Subcommand};
use ratewire_ingest::feed::{self, DemoSettings};
use ratewire_proto::runtime::{init_telemetry, shutdown_on_signal};

/// ratewire feed: publishes boards to ingest like a bank's feed would.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Base URL of the ingest service.
    #[arg(
        long,
        env = "RATEWIRE_INGEST_URL",
        default_value = "http://127.0.0.1:8081"
    )]
    ingest_url: String,
    /// The operators' bearer token (to register banks and take tokens).
    #[arg(long, env = "RATEWIRE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate Ethiopian banks publishing boards every few seconds.
    Demo {
        /// How many banks to simulate (at most 15).
        #[arg(long, env = "RATEWIRE_FEED_BANKS", default_value_t = 12, value_parser = clap::value_parser!(u64).range(1..=15))]
        banks: u64,
        /// How many currencies each bank quotes (at most 18).
        #[arg(long, env = "RATEWIRE_FEED_CURRENCIES", default_value_t = 12, value_parser = clap::value_parser!(u64).range(1..=18))]
        currencies: u64,
        /// Milliseconds between rounds.
        #[arg(long, env = "RATEWIRE_FEED_INTERVAL_MS", default_value_t = 3000, value_parser = clap::value_parser!(u64).range(50..))]
        interval_ms: u64,
        /// Publish a single round and exit.
        #[arg(long)]
        once: bool,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_telemetry("text");
    let shutdown = shutdown_on_signal();
    match cli.command {
        Command::Demo {
            banks,
            currencies,
            interval_ms,
            once,
        } => {
            let settings = DemoSettings {
                ingest_url: cli.ingest_url,
                admin_token: cli.admin_token,
                banks: banks as usize,
                currencies: currencies as usize,
                interval: Duration::from_millis(interval_ms),
                once,
            };
            feed::run_demo(settings, shutdown).await
        }
    }
}
