//! The operator subcommands of `ratewire-projector` for dead letters:
//! list, show, re-drive and resolve the messages the fold could not apply,
//! in the active generation.

use std::io::Write;

use anyhow::bail;
use clap::Subcommand;

use crate::config::Config;
use crate::dead_letters;
use crate::views::rebuild::{active_generation, refresh_views};
use crate::views::RedisViews;

#[derive(Subcommand)]
pub enum DeadLettersCommand {
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
pub struct FilterArgs {
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

/// Runs a dead-letter command, printing to `out`.
pub async fn dead_letters(
    config: &Config,
    command: DeadLettersCommand,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (active, pool) = active_generation(config).await?;
    match command {
        DeadLettersCommand::List { filter } => {
            for letter in dead_letters::list(&pool, &filter.filter()).await? {
                writeln!(out, "{}", serde_json::to_string(&letter)?)?;
            }
        }
        DeadLettersCommand::Show { id } => match dead_letters::show(&pool, id).await? {
            Some(letter) => writeln!(out, "{}", serde_json::to_string_pretty(&letter)?)?,
            None => bail!("no dead letter has the id {id}"),
        },
        DeadLettersCommand::Redrive { ids, filter } => {
            if ids.is_empty() && !filter.all {
                bail!("name dead letters by id, or give --all (with filters)");
            }
            let (results, changed) =
                dead_letters::redrive(&pool, &config.topic, &ids, &filter.filter()).await?;
            for result in &results {
                writeln!(out, "{}", serde_json::to_string(result)?)?;
            }
            // The fold did not apply these: their views are written here.
            if !changed.banks.is_empty() || !changed.currencies.is_empty() {
                let redis = ratewire_readmodel::redis::connect(&config.read_model.redis_url)?;
                let mut views = RedisViews::for_generation(redis, &config.read_model, &active);
                let banks: Vec<_> = changed.banks.into_iter().collect();
                let currencies: Vec<_> = changed.currencies.into_iter().collect();
                refresh_views(&pool, &mut views, &banks, &currencies, &changed.reference).await?;
            }
        }
        DeadLettersCommand::Resolve { ids } => {
            let resolved = dead_letters::resolve(&pool, &ids).await?;
            writeln!(out, "resolved {resolved}")?;
        }
    }
    Ok(())
}
