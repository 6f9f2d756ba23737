//! The API's settings, from `RATEWIRE_*` environment variables (clap checks
//! them at start; `ratewire-api --help` lists them with defaults).

use std::net::SocketAddr;

use ratewire_projector::config::parse_schema;
use ratewire_projector::views::ViewStyle;

#[derive(clap::Args, Debug, Clone)]
pub struct Config {
    /// Address the API listens on.
    #[arg(long, env = "RATEWIRE_API_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Postgres connection URL (the database must exist).
    #[arg(
        long,
        env = "RATEWIRE_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/ratewire"
    )]
    pub database_url: String,
    /// Postgres schema for the API's own tables (keys).
    #[arg(long, env = "RATEWIRE_API_SCHEMA", default_value = "api", value_parser = parse_schema)]
    pub schema: String,
    /// Postgres schema of the projector's read model (history, fallback),
    /// until a replay switches to another generation.
    #[arg(long, env = "RATEWIRE_READ_SCHEMA", default_value = "readmodel", value_parser = parse_schema)]
    pub read_schema: String,
    /// Postgres schema of the control table naming the active read-model
    /// generation (written by `ratewire-projector replay`).
    #[arg(long, env = "RATEWIRE_CONTROL_SCHEMA", default_value = "ratewire", value_parser = parse_schema)]
    pub control_schema: String,
    /// Redis URL of the read views, key cache and counters.
    #[arg(
        long,
        env = "RATEWIRE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379/0"
    )]
    pub redis_url: String,
    /// Prefix of every Redis key ratewire uses.
    #[arg(long, env = "RATEWIRE_REDIS_PREFIX", default_value = "rw:")]
    pub redis_prefix: String,
    /// The operators' bearer token; operator endpoints refuse every call when unset.
    #[arg(long, env = "RATEWIRE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Base URL of currency images (must match the projector's).
    #[arg(
        long,
        env = "RATEWIRE_CURRENCY_IMAGE_BASE",
        default_value = "https://assets.ratewire.example/currencies"
    )]
    pub currency_image_base: String,
    /// The service time zone (IANA name): history days are calendar days here.
    #[arg(long, env = "RATEWIRE_TIMEZONE", default_value = "UTC")]
    pub timezone: chrono_tz::Tz,
    /// Plans as `name=perMinute/perMonth`, comma separated; `anonymous` is
    /// required (callers without a valid key).
    #[arg(long, env = "RATEWIRE_PLANS", default_value = crate::plans::DEFAULT_PLANS)]
    pub plans: crate::plans::Plans,
    /// Count requests against plans (`false` only to measure the limiter's
    /// cost: every request is then admitted).
    #[arg(long, env = "RATEWIRE_RATE_LIMITS", default_value_t = true, action = clap::ArgAction::Set)]
    pub rate_limits: bool,
    /// Serve callers without a key under the anonymous plan instead of 401.
    #[arg(long, env = "RATEWIRE_ANONYMOUS_ACCESS", default_value_t = false, action = clap::ArgAction::Set)]
    pub anonymous_access: bool,
    /// Proxies (IPs or CIDRs, comma separated) whose X-Forwarded-For is
    /// believed; with none, the client is always the socket peer.
    #[arg(long, env = "RATEWIRE_TRUSTED_PROXIES", value_delimiter = ',', num_args = 0..)]
    pub trusted_proxies: Vec<TrustedProxy>,
    /// Seconds between saves of monthly counts to Postgres (and restores
    /// after Redis lost them): the most a Redis loss can undercount.
    #[arg(long, env = "RATEWIRE_USAGE_SYNC_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub usage_sync_secs: u64,
    /// `text` or `json` log lines.
    #[arg(long, env = "RATEWIRE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

impl Config {
    pub fn view_style(&self) -> ViewStyle {
        ViewStyle {
            currency_image_base: self.currency_image_base.trim_end_matches('/').to_owned(),
        }
    }
}

/// A trusted proxy: one address or a network.
#[derive(Debug, Clone, Copy)]
pub struct TrustedProxy(pub ipnet::IpNet);

impl std::str::FromStr for TrustedProxy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        s.parse::<ipnet::IpNet>()
            .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
            .map(TrustedProxy)
            .map_err(|_| format!("{s:?} is not an IP address or CIDR network"))
    }
}
