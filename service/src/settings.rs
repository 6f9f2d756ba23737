//! Settings: every process reads the command line and `RATEWIRE_*`
//! variables with clap, and stops with status 2 and a message naming the
//! variable when one is bad. The settings every process shares are defined
//! here once and flattened into each process's `Config`.

use crate::clients::ClientAddresses;
use crate::serve::ListenerLimits;

/// The settings of every ratewire process.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Postgres connection URL (the database must exist).
    #[arg(
        long,
        env = "RATEWIRE_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/ratewire"
    )]
    pub database_url: String,
    /// `text` or `json` log lines (on stderr).
    #[arg(long, env = "RATEWIRE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

/// How often a process runs its retention jobs (each purges what its
/// policy no longer keeps; docs/operations.md lists the policies).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct RetentionSchedule {
    /// Seconds between runs of the retention jobs, which purge what the
    /// process's retention policy no longer keeps (docs/operations.md).
    #[arg(long, env = "RATEWIRE_RETENTION_INTERVAL_SECS", default_value_t = 3_600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub retention_interval_secs: u64,
}

impl RetentionSchedule {
    pub fn interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.retention_interval_secs)
    }
}

/// What every process with public and operator listeners shares: the
/// listeners' limits, who a request's client is, and the operators'
/// credential. Each process names its own listen addresses.
#[derive(clap::Args, Debug, Clone)]
pub struct Serving {
    #[command(flatten)]
    pub limits: ListenerLimits,
    #[command(flatten)]
    pub clients: ClientAddresses,
    #[command(flatten)]
    pub operators: Operators,
}

/// The operators' credential, for processes with operator endpoints.
#[derive(clap::Args, Debug, Clone)]
pub struct Operators {
    /// The operators' bearer token: at least 32 characters, random (e.g.
    /// `openssl rand -hex 32`), not a placeholder; a weak one stops the
    /// process at start. Operator endpoints refuse every call when unset.
    #[arg(long, env = "RATEWIRE_ADMIN_TOKEN", hide_env_values = true, value_parser = parse_admin_token)]
    pub admin_token: Option<String>,
}

/// The fewest characters an admin token may have.
pub const ADMIN_TOKEN_MIN_CHARS: usize = 32;

/// Words that mark a token someone meant to replace.
const PLACEHOLDERS: [&str; 9] = [
    "change",
    "replace",
    "example",
    "placeholder",
    "password",
    "default",
    "todo",
    "dummy",
    "secret",
];

/// An admin token strong enough to guard operator endpoints on a network:
/// long, varied and not a placeholder left in a manifest. Empty means unset
/// (operator endpoints disabled).
pub fn parse_admin_token(token: &str) -> Result<String, String> {
    let advice = "generate one with `openssl rand -hex 32`";
    if token.is_empty() {
        return Ok(String::new());
    }
    if token.chars().count() < ADMIN_TOKEN_MIN_CHARS {
        return Err(format!(
            "the admin token must have at least {ADMIN_TOKEN_MIN_CHARS} characters; {advice}"
        ));
    }
    let lower = token.to_ascii_lowercase();
    if let Some(word) = PLACEHOLDERS.iter().find(|w| lower.contains(*w)) {
        return Err(format!(
            "the admin token looks like a placeholder (it contains {word:?}); {advice}"
        ));
    }
    let distinct: std::collections::BTreeSet<char> = token.chars().collect();
    if distinct.len() < 10 {
        return Err(format!(
            "the admin token repeats too few characters to be random; {advice}"
        ));
    }
    Ok(token.to_owned())
}

impl Operators {
    /// The token operator calls must present; `None` (every call refused)
    /// when unset or empty.
    pub fn token(&self) -> Option<std::sync::Arc<str>> {
        self.admin_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(Into::into)
    }
}

/// A process's command line: its settings and, optionally, one of its
/// commands (none: run the service).
#[derive(clap::Parser, Debug)]
pub struct CommandLine<C: clap::Args, S: clap::Subcommand> {
    #[command(flatten)]
    pub config: C,
    #[command(subcommand)]
    pub command: Option<S>,
}

impl<C: clap::Args, S: clap::Subcommand> CommandLine<C, S> {
    /// The command line of the binary `name`, whose `--help` starts with
    /// `about`; a bad value exits as [`parse_settings`] describes.
    pub fn parse(name: &'static str, about: &'static str) -> Self {
        let command = <Self as clap::CommandFactory>::command()
            .name(name)
            .about(about)
            .version(env!("CARGO_PKG_VERSION"));
        parse_with(command)
    }
}

/// Parses the command line and `RATEWIRE_*` settings; on a bad value,
/// exits with status 2 and a message naming the environment variable (when
/// the value came from one) as well as the flag, instead of a panic or a
/// flag the operator never typed.
pub fn parse_settings<T: clap::Parser>() -> T {
    parse_with(T::command())
}

fn parse_with<T: clap::FromArgMatches>(mut command: clap::Command) -> T {
    let parsed = command
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|matches| T::from_arg_matches(&matches));
    let error = match parsed {
        Ok(parsed) => return parsed,
        Err(error) => error.format(&mut command),
    };
    let flag = match error.get(clap::error::ContextKind::InvalidArg) {
        Some(clap::error::ContextValue::String(flag)) => Some(flag.clone()),
        _ => None,
    };
    let from_env = flag.and_then(|flag| env_of(&command, &flag));
    match from_env {
        Some((variable, secret)) => {
            let mut rendered = error.render().to_string();
            // A secret's value must not reach logs, even a wrong one.
            if let (true, Some(clap::error::ContextValue::String(value))) =
                (secret, error.get(clap::error::ContextKind::InvalidValue))
            {
                if !value.is_empty() {
                    rendered = rendered.replace(value.as_str(), "(hidden)");
                }
            }
            let detail = rendered.lines().next().unwrap_or_default();
            let detail = detail.strip_prefix("error: ").unwrap_or(detail);
            eprintln!("error: bad setting {variable}: {detail}");
            std::process::exit(2);
        }
        None => error.exit(),
    }
}

/// The environment variable behind `flag` (as clap prints it, e.g.
/// `--batch-max <BATCH_MAX>`), if it is set, and whether its value is a
/// secret (hidden in `--help`); searched in subcommands too.
fn env_of(command: &clap::Command, flag: &str) -> Option<(String, bool)> {
    let long = flag.split_whitespace().next()?.trim_start_matches("--");
    let found = command.get_arguments().find_map(|arg| {
        let variable = arg.get_env()?.to_str()?;
        (arg.get_long() == Some(long) && std::env::var_os(variable).is_some())
            .then(|| (variable.to_owned(), arg.is_hide_env_values_set()))
    });
    found.or_else(|| command.get_subcommands().find_map(|sub| env_of(sub, flag)))
}

/// A duration as people write one: `72h`, `3days`, `90s`, `500ms`,
/// `1h 30m`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration like 72h, 30s or 500ms: {e}"))
}

/// Schema names are interpolated into DDL, so only plain identifiers pass.
pub fn parse_schema(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!("{s:?} is not a plain lower-case SQL identifier"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(parse_schema("readmodel").is_ok());
        assert!(parse_schema("rm_2").is_ok());
        assert!(parse_schema("x; drop table banks").is_err());
        assert!(parse_schema("Read").is_err());
    }

    #[test]
    fn weak_admin_tokens_are_refused_and_random_ones_kept() {
        for weak in [
            "change-me",
            "short-but-random-Zx81",
            "please-change-me-before-production-2026",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "0101010101010101010101010101010101",
        ] {
            assert!(parse_admin_token(weak).is_err(), "{weak}");
        }
        let random = "3f9c2a7e1b8d4c6f0a5e9b2d7c1f8a3e6b0d4c9f2a7e5b1d";
        assert_eq!(parse_admin_token(random).as_deref(), Ok(random));
        assert_eq!(parse_admin_token("").as_deref(), Ok(""));
    }

    #[test]
    fn an_empty_admin_token_refuses_every_operator_call() {
        let empty = Operators {
            admin_token: Some(String::new()),
        };
        assert!(empty.token().is_none());
        let set = Operators {
            admin_token: Some("s3cret".into()),
        };
        assert_eq!(set.token().as_deref(), Some("s3cret"));
    }
}
