//! `ratewire-nemesis`: the cluster topology under mixed faults, checked
//! (see `ratewire_tools::nemesis`); `deploy/stack nemesis` builds and runs
//! it with the cluster's whereabouts in its environment.

use clap::Parser;
use ratewire_tools::nemesis::{self, Settings};

#[derive(Parser)]
#[command(
    name = "ratewire-nemesis",
    about = "Faults on a seeded schedule against the cluster topology while publishers, readers and webhook receivers work; then a check of what they saw. Exits 1 on any violation."
)]
struct Cli {
    #[command(flatten)]
    settings: Settings,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if !nemesis::run(cli.settings).await? {
        std::process::exit(1);
    }
    Ok(())
}
