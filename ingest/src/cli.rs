//! The operator subcommands of `ratewire-ingest`: banks and publisher tokens
//! managed from a shell, through the same functions as the operator
//! endpoints, so a change made here is published on the log exactly as one
//! made over HTTP.

use anyhow::{bail, Context};
use clap::Subcommand;
use ratewire_proto::{BankId, SocialLink};
use serde_json::json;

use crate::banks::{self, BankPatch, NewBank};
use crate::config::Config;
use crate::db;
use crate::error::Error;
use crate::log_registry;
use crate::publisher::Publisher;

#[derive(Subcommand, Debug)]
pub enum BanksCommand {
    /// Register a bank (publishes BankRegistered) and print it with its id.
    Register {
        /// Short unique code, e.g. CBE.
        #[arg(long)]
        code: String,
        #[arg(long)]
        name: String,
        /// URL of the bank's logo.
        #[arg(long)]
        image_url: String,
        /// A social link as `platform=url`; repeat for several.
        #[arg(long = "social", value_parser = parse_social_link)]
        social_links: Vec<SocialLink>,
        /// When the bank is expected to publish, as JSON:
        /// `{"every":"PT1H"}` or `{"days":["Mon","Fri"],"by":"09:30"}`.
        #[arg(long, value_parser = parse_json)]
        schedule: Option<serde_json::Value>,
    },
    /// Change a bank's metadata (publishes BankUpdated with what changed).
    Update {
        id: BankId,
        #[arg(long)]
        code: Option<String>,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        image_url: Option<String>,
        /// Replaces all social links; repeat for several.
        #[arg(long = "social", value_parser = parse_social_link, conflicts_with = "no_social")]
        social_links: Vec<SocialLink>,
        /// Removes all social links.
        #[arg(long)]
        no_social: bool,
        /// A new publishing schedule, as JSON (as for `register`).
        #[arg(long, value_parser = parse_json, conflicts_with = "no_schedule")]
        schedule: Option<serde_json::Value>,
        /// Removes the publishing schedule.
        #[arg(long)]
        no_schedule: bool,
    },
    /// Take a bank out of every list (its history stays readable).
    Deactivate { id: BankId },
    /// Bring a deactivated bank back.
    Reactivate { id: BankId },
    /// Print every bank, active or not.
    List,
    /// Print one bank.
    Show { id: BankId },
}

#[derive(Subcommand, Debug)]
pub enum TokensCommand {
    /// Create a publisher token for a bank and print it (shown only this once).
    Create { bank_id: BankId },
    /// Revoke a token by its prefix (the part after `rwp_`); it stops working at once.
    Revoke { prefix: String },
}

#[derive(Subcommand, Debug)]
pub enum BoardsCommand {
    /// Retract a board the bank published (by the event id its push was
    /// answered with): the read model then answers as if it had never been
    /// published. Retracting it again prints the same retraction.
    Retract {
        bank_id: BankId,
        event_id: uuid::Uuid,
        /// Why, for whoever reads the log.
        #[arg(long)]
        reason: Option<String>,
    },
}

fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("`{text}` is not JSON: {e}"))
}

fn parse_social_link(text: &str) -> Result<SocialLink, String> {
    let (platform, url) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not platform=url"))?;
    Ok(SocialLink {
        platform: platform.trim().to_owned(),
        url: url.trim().to_owned(),
    })
}

/// Postgres ready and migrated, as the service would have it.
async fn pool(config: &Config) -> anyhow::Result<sqlx::PgPool> {
    let pool = db::pool(&config.common.database_url, &config.schema)?;
    db::migrate(&pool, &config.schema)
        .await
        .map_err(explain)
        .with_context(|| format!("preparing Postgres at {}", config.common.database_url))?;
    Ok(pool)
}

/// A producer on a topic that exists, for commands that publish or hand
/// out tokens, with ingest's tables reconciled with the log first (as the
/// service does at start: see [`crate::log_registry`]).
async fn publisher(config: &Config, pool: &sqlx::PgPool) -> anyhow::Result<Publisher> {
    let publisher = Publisher::new(config)?;
    let reach = || format!("reaching the broker at {}", config.kafka.brokers);
    if config.create_topic {
        publisher
            .ensure_topic(config)
            .await
            .map_err(explain)
            .with_context(reach)?;
    }
    log_registry::reconcile(pool, publisher.settings(), &config.topic, LOG_WAIT)
        .await
        .map_err(explain)
        .with_context(reach)?;
    Ok(publisher)
}

/// How long the log may keep a command waiting.
const LOG_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Field errors spelled out one per line, as a person at a shell reads them.
fn explain(error: Error) -> anyhow::Error {
    match error {
        Error::Validation(fields) => {
            let lines: Vec<String> = fields
                .iter()
                .flat_map(|(field, problems)| {
                    problems.iter().map(move |p| format!("  {field}: {p}"))
                })
                .collect();
            anyhow::anyhow!("invalid input:\n{}", lines.join("\n"))
        }
        other => anyhow::anyhow!(other.to_string()),
    }
}

fn pretty(value: &impl serde::Serialize) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(value)?)
}

/// Runs a banks subcommand; the result is what the command prints.
pub async fn banks(config: &Config, command: BanksCommand) -> anyhow::Result<String> {
    let pool = pool(config).await?;
    let patch = match command {
        BanksCommand::List => return pretty(&banks::list(&pool).await?),
        BanksCommand::Show { id } => {
            let bank = banks::get(&pool, id).await?;
            return match bank {
                Some(bank) => pretty(&bank),
                None => bail!("no bank has the id {id}"),
            };
        }
        BanksCommand::Register {
            code,
            name,
            image_url,
            social_links,
            schedule,
        } => {
            let publisher = publisher(config, &pool).await?;
            let new = NewBank {
                code,
                name,
                image_url,
                social_links,
                schedule,
            };
            let bank = banks::register(&pool, &publisher, new)
                .await
                .map_err(explain)?;
            return pretty(&bank);
        }
        BanksCommand::Update {
            id,
            code,
            name,
            image_url,
            social_links,
            no_social,
            schedule,
            no_schedule,
        } => {
            let social_links = if no_social {
                Some(Vec::new())
            } else {
                Some(social_links).filter(|links| !links.is_empty())
            };
            let patch = BankPatch {
                code,
                name,
                image_url,
                social_links,
                active: None,
                schedule: if no_schedule {
                    Some(None)
                } else {
                    schedule.map(Some)
                },
            };
            if patch.is_empty() {
                bail!(
                    "nothing to change: give --code, --name, --image-url, --social, --no-social, --schedule or --no-schedule"
                );
            }
            (id, patch)
        }
        BanksCommand::Deactivate { id } => (
            id,
            BankPatch {
                active: Some(false),
                ..BankPatch::default()
            },
        ),
        BanksCommand::Reactivate { id } => (
            id,
            BankPatch {
                active: Some(true),
                ..BankPatch::default()
            },
        ),
    };
    let (id, patch) = patch;
    let publisher = publisher(config, &pool).await?;
    let bank = banks::update(&pool, &publisher, id, patch)
        .await
        .map_err(explain)?;
    pretty(&bank)
}

/// Runs a boards subcommand; the result is what the command prints.
pub async fn boards(config: &Config, command: BoardsCommand) -> anyhow::Result<String> {
    let pool = pool(config).await?;
    match command {
        BoardsCommand::Retract {
            bank_id,
            event_id,
            reason,
        } => {
            let publisher = publisher(config, &pool).await?;
            let retraction = crate::retraction::retract(
                &pool,
                &publisher,
                config.retraction_window(),
                bank_id,
                event_id,
                reason,
            )
            .await
            .map_err(explain)?;
            pretty(&json!({"eventId": retraction, "retracts": event_id, "bankId": bank_id.get()}))
        }
    }
}

/// Runs a tokens subcommand; the result is what the command prints.
pub async fn tokens(config: &Config, command: TokensCommand) -> anyhow::Result<String> {
    let pool = pool(config).await?;
    match command {
        TokensCommand::Create { bank_id } => {
            publisher(config, &pool).await?;
            let token = banks::create_token(&pool, bank_id).await.map_err(explain)?;
            pretty(&json!({"token": token.secret, "prefix": token.prefix, "bankId": bank_id.get()}))
        }
        TokensCommand::Revoke { prefix } => {
            if !banks::revoke_token(&pool, &prefix).await? {
                bail!("no live token has the prefix {prefix}");
            }
            Ok(format!("revoked {prefix}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_social_link_is_platform_equals_url() {
        let link = parse_social_link("telegram=https://t.me/cbe").unwrap();
        assert_eq!(link.platform, "telegram");
        assert_eq!(link.url, "https://t.me/cbe");
        assert!(parse_social_link("https://t.me/cbe").is_err());
    }
}
