//! The API's settings, from `RATEWIRE_*` environment variables (clap checks
//! them at start; `ratewire-api --help` lists them with defaults). Those
//! every process has are in `ratewire_service::settings`, those shared with
//! the projector (where the read model is) in
//! `ratewire_readmodel::ReadModelSettings`.

use std::net::SocketAddr;

use ratewire_alerts::AlertSettings;
use ratewire_readmodel::ReadModelSettings;
use ratewire_service::settings::{parse_schema, Common, RetentionSchedule, Serving};

/// The largest request body either listener reads, in bytes: the few
/// bodies the API takes (a webhook, an alert, a key) are small, and a
/// larger one is 413.
pub const BODY_LIMIT: usize = 16 * 1024;

#[derive(clap::Args, Debug, Clone)]
pub struct Config {
    /// Address of the public listener (the read API and probes).
    #[arg(long, env = "RATEWIRE_API_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address of the operator listener (key management, `/metrics`,
    /// probes); keep it off any public network.
    #[arg(
        long,
        env = "RATEWIRE_API_OPERATOR_LISTEN",
        default_value = "127.0.0.1:9080"
    )]
    pub operator_listen: SocketAddr,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub serving: Serving,
    #[command(flatten)]
    pub read_model: ReadModelSettings,
    #[command(flatten)]
    pub alerts: AlertSettings,
    /// Webhooks one API key may register.
    #[arg(long, env = "RATEWIRE_WEBHOOKS_PER_KEY", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub webhooks_per_key: u32,
    /// A Postgres replica (a hot standby of the primary) for /history and
    /// the series; unset, they read the primary. Answers there may lag the
    /// primary by the replica's replication delay; keys, usage and views
    /// rendered while Redis is away stay on the primary. While the replica
    /// does not answer its probe (each second) they read the primary, and
    /// `/readyz` says `degraded`.
    #[arg(long, env = "RATEWIRE_READ_DATABASE_URL")]
    pub read_database_url: Option<String>,
    /// Postgres schema for the API's own tables (keys).
    #[arg(long, env = "RATEWIRE_API_SCHEMA", default_value = "api", value_parser = parse_schema)]
    pub schema: String,
    /// Points one `raw` series answer holds at most; the rest of the range
    /// is the next page (`next`, and a `Link` header).
    #[arg(long, env = "RATEWIRE_SERIES_PAGE_POINTS", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub series_page_points: u32,
    /// A bank's board older than this is marked `stale` (on
    /// /rates/spreads, /convert and the dashboard): `72h` by default, so
    /// that a weekend does not count; a duration such as `48h` or `3days`.
    #[arg(long, env = "RATEWIRE_STALE_AFTER", default_value = "72h", value_parser = ratewire_service::settings::parse_duration)]
    pub stale_after: std::time::Duration,
    /// Plans as `name=perMinute/perMonth[/streams[/alerts]]`, comma
    /// separated: requests a minute and a month, live streams a key holds
    /// at once (default 1) and rate alerts it keeps (default 5).
    /// `anonymous` is required (callers without a valid key).
    #[arg(long, env = "RATEWIRE_PLANS", default_value = crate::access::plans::DEFAULT_PLANS)]
    pub plans: crate::access::plans::Plans,
    /// Count requests against plans (`false` only to measure the limiter's
    /// cost: every request is then admitted).
    #[arg(long, env = "RATEWIRE_RATE_LIMITS", default_value_t = true, action = clap::ArgAction::Set)]
    pub rate_limits: bool,
    /// Serve callers without a key under the anonymous plan instead of 401.
    #[arg(long, env = "RATEWIRE_ANONYMOUS_ACCESS", default_value_t = false, action = clap::ArgAction::Set)]
    pub anonymous_access: bool,
    /// Months a key's monthly usage is kept in Postgres, this one included
    /// (anonymous clients' usage is kept for the current month only).
    #[arg(long, env = "RATEWIRE_USAGE_RETENTION_MONTHS", default_value_t = 13, value_parser = clap::value_parser!(u32).range(1..=120))]
    pub usage_retention_months: u32,
    #[command(flatten)]
    pub retention: RetentionSchedule,
    /// Milliseconds a request may wait for Redis (its rate-limit round
    /// trip, the key cache, a view); past it, and until Redis answers a
    /// probe again, requests are counted in this process (its share of the
    /// plan) and views come from Postgres.
    #[arg(long, env = "RATEWIRE_REDIS_BUDGET_MS", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=5_000))]
    pub redis_budget_ms: u64,
    /// Live API keys held in memory at most (prefix and hash, about 100
    /// bytes each): with them a made-up key is refused without a query.
    /// Past it, unknown keys are looked up in Postgres within each client
    /// address's anonymous allowance, and refused with 503 beyond it.
    #[arg(long, env = "RATEWIRE_API_KEY_DIRECTORY_MAX", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub key_directory_max: u64,
    /// Seconds between saves of monthly counts to Postgres (and restores
    /// after Redis lost them): the most a Redis loss can undercount.
    #[arg(long, env = "RATEWIRE_USAGE_SYNC_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub usage_sync_secs: u64,
    /// Origins whose web pages may call the read API from a browser:
    /// `*` (any), or a comma-separated list such as
    /// `https://a.example,https://b.example`.
    #[arg(long, env = "RATEWIRE_CORS_ORIGINS", default_value = "*", value_parser = crate::cors::parse_origins)]
    pub cors_origins: crate::cors::Origins,
    /// The Ed25519 private key answers are signed with, PKCS#8 PEM
    /// (`openssl genpkey -algorithm ed25519`); every instance needs the same
    /// one. Unset: signing is off and `Accept-Signature` is ignored.
    #[arg(long, env = "RATEWIRE_SIGNING_KEY_FILE", value_parser = crate::signing::keys::parse_key)]
    pub signing_key_file: Option<crate::signing::keys::CurrentKey>,
    /// Keys that signed before the current one, listed at
    /// /api/v1/signing-keys until their last signature expires: one a line,
    /// `<expires, RFC 3339> <PEM file of the public key>` (docs/security.md,
    /// "The signing key and its rotation").
    #[arg(long, env = "RATEWIRE_SIGNING_RETIRED_KEYS_FILE", value_parser = crate::signing::keys::parse_retired)]
    pub signing_retired_keys_file: Option<crate::signing::keys::RetiredKeys>,
    /// How long a signature holds: its `expires` is `created` plus this
    /// (a duration such as `365days` or `12h`).
    #[arg(long, env = "RATEWIRE_SIGNATURE_VALIDITY", default_value = "365days", value_parser = ratewire_service::settings::parse_duration)]
    pub signature_validity: std::time::Duration,
    /// Events a live-stream subscriber may fall behind by before it is
    /// dropped (with a last `dropped` event).
    #[arg(long, env = "RATEWIRE_STREAM_BUFFER", default_value_t = 1_024, value_parser = clap::value_parser!(u64).range(2..=65_536))]
    pub stream_buffer: u64,
    /// Milliseconds a view read from Redis is served from this process at
    /// most (it is dropped at once when the projector changes it; this
    /// bounds a change that came without notice). 0 reads Redis for every
    /// request.
    #[arg(long, env = "RATEWIRE_VIEW_CACHE_MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub view_cache_ms: u64,
    /// Megabytes of views kept in this process at most (a view over a
    /// quarter of it is never kept).
    #[arg(long, env = "RATEWIRE_VIEW_CACHE_MB", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4_096))]
    pub view_cache_mb: u64,
}
