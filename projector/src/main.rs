use clap::Subcommand;
use std::io::Write;

use ratewire_projector::dead_letters;
use ratewire_projector::rebuild::{active_generation, rebuild_once};
use ratewire_projector::replay::{replay, ReplaySettings};
use ratewire_projector::{Application, Config};
use ratewire_service::allocator::purge_freed_memory_after;
use ratewire_service::{init_telemetry, shutdown_on_signal, CommandLine};

// Each round of the views over all banks builds and frees its bodies;
// glibc's allocator handed such memory back to the OS and faulted it in
// again every round. Measured while the rounds still composed the
// all-banks lists (a few megabytes a round): page faults and clearing
// pages were about a tenth of the projector's CPU under load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Print one dead letter with its message (key, timestamp, payload).
    Show { id: i64 },
    /// Apply dead letters after all (after an upgrade or a fix), each
    /// exactly once, in log order; prints what became of each as JSON lines.
    /// By id, or every unresolved one matching the filters with --all.
    Redrive {
        ids: Vec<i64>,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Set dead letters aside, by id; resolved ones are purged after
    /// RATEWIRE_DEAD_LETTERS_RETENTION_DAYS.
    Resolve {
        #[arg(required = true)]
        ids: Vec<i64>,
    },
}

#[derive(clap::Args)]
struct FilterArgs {
    /// List: resolved and re-driven ones too. Redrive: every unresolved
    /// one matching the other filters (instead of ids).
    #[arg(long)]
    all: bool,
    /// Only those that broke this rule (e.g. as-of, key, rate, unknown-bank).
    #[arg(long)]
    rule: Option<String>,
    /// Only those whose error mentions this text.
    #[arg(long)]
    error: Option<String>,
    #[arg(long)]
    partition: Option<i32>,
    /// Recorded at or after (RFC 3339).
    #[arg(long)]
    since: Option<chrono::DateTime<chrono::Utc>>,
    /// Recorded before (RFC 3339).
    #[arg(long)]
    until: Option<chrono::DateTime<chrono::Utc>>,
}

impl FilterArgs {
    fn filter(&self) -> dead_letters::Filter {
        dead_letters::Filter {
            all: self.all,
            rule: self.rule.clone(),
            error: self.error.clone(),
            partition: self.partition,
            since: self.since,
            until: self.until,
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Long enough that a round's buffers are used again by the next
    // (rounds come every 10-25 ms under load), short enough to bound what
    // is held. Measured under 100 boards/s while the rounds still composed
    // the all-banks lists: peak resident 52 MB at 50 ms, 108 MB at
    // mimalloc's default, 40 MB at 0 ms, where composing the lists took
    // twice as long again (the pages faulted in every round).
    purge_freed_memory_after(50);
    let cli = CommandLine::<Config, Command>::parse(
        "ratewire-projector",
        "ratewire projector: folds the event log into Postgres and Redis views.",
    );
    init_telemetry(&cli.config.common.log_format);
    cli.config.kafka.check();
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
            let (active, pool) = active_generation(&cli.config).await?;
            let mut out = std::io::stdout().lock();
            match command {
                DeadLettersCommand::List { filter } => {
                    for letter in dead_letters::list(&pool, &filter.filter()).await? {
                        writeln!(out, "{}", serde_json::to_string(&letter)?)?;
                    }
                }
                DeadLettersCommand::Show { id } => match dead_letters::show(&pool, id).await? {
                    Some(letter) => writeln!(out, "{}", serde_json::to_string_pretty(&letter)?)?,
                    None => anyhow::bail!("no dead letter has the id {id}"),
                },
                DeadLettersCommand::Redrive { ids, filter } => {
                    if ids.is_empty() && !filter.all {
                        anyhow::bail!("name dead letters by id, or give --all (with filters)");
                    }
                    let (results, changed) =
                        dead_letters::redrive(&pool, &cli.config.topic, &ids, &filter.filter())
                            .await?;
                    for result in &results {
                        writeln!(out, "{}", serde_json::to_string(result)?)?;
                    }
                    if !changed.banks.is_empty() || !changed.currencies.is_empty() {
                        let redis =
                            ratewire_readmodel::redis::connect(&cli.config.read_model.redis_url)?;
                        let mut views = ratewire_projector::redis_views::RedisViews::for_generation(
                            redis,
                            &cli.config.read_model,
                            &active,
                        );
                        let banks: Vec<_> = changed.banks.into_iter().collect();
                        let currencies: Vec<_> = changed.currencies.into_iter().collect();
                        ratewire_projector::rebuild::refresh_views(
                            &pool,
                            &mut views,
                            &banks,
                            &currencies,
                        )
                        .await?;
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
