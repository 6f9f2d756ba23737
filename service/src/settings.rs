//! Settings: every process reads the command line and `RATEWIRE_*`
//! variables with clap, and stops with status 2 and a message naming the
//! variable when one is bad. The settings every process shares are defined
//! here once and flattened into each process's `Config`.

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
    /// `text` or `json` log lines.
    #[arg(long, env = "RATEWIRE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

/// The operators' credential, for processes with operator endpoints.
#[derive(clap::Args, Debug, Clone)]
pub struct Operators {
    /// The operators' bearer token; operator endpoints refuse every call when unset.
    #[arg(long, env = "RATEWIRE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
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
        Some(variable) => {
            let rendered = error.render().to_string();
            let detail = rendered.lines().next().unwrap_or_default();
            let detail = detail.strip_prefix("error: ").unwrap_or(detail);
            eprintln!("error: bad setting {variable}: {detail}");
            std::process::exit(2);
        }
        None => error.exit(),
    }
}

/// The environment variable behind `flag` (as clap prints it, e.g.
/// `--batch-max <BATCH_MAX>`), if it is set; searched in subcommands too.
fn env_of(command: &clap::Command, flag: &str) -> Option<String> {
    let long = flag.split_whitespace().next()?.trim_start_matches("--");
    let found = command.get_arguments().find_map(|arg| {
        let variable = arg.get_env()?.to_str()?;
        (arg.get_long() == Some(long) && std::env::var_os(variable).is_some())
            .then(|| variable.to_owned())
    });
    found.or_else(|| command.get_subcommands().find_map(|sub| env_of(sub, flag)))
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
