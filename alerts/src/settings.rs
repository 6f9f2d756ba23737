//! The alerts' settings: where their tables are and how webhooks are
//! sealed and reached ([`AlertSettings`], read by the API and the
//! projectors alike, so they cannot be configured apart), and how much one
//! projector delivers ([`DeliverySettings`]).

use ratewire_service::settings::parse_schema;

use crate::address::AddressPolicy;
use crate::sealing::SealingKey;

#[derive(clap::Args, Debug, Clone)]
pub struct AlertSettings {
    /// Postgres schema of webhooks, alerts and their outbox (users'
    /// settings: a replay keeps them).
    #[arg(long, env = "RATEWIRE_ALERTS_SCHEMA", default_value = "alerts", value_parser = parse_schema)]
    pub alerts_schema: String,
    /// Key sealing webhook signing secrets at rest: 32 bytes, base64
    /// (`openssl rand -base64 32`). The API and the projectors need the
    /// same one; unset, webhooks cannot be created (503) nor delivered.
    #[arg(long, env = "RATEWIRE_WEBHOOK_SECRETS_KEY", hide_env_values = true)]
    pub webhook_secrets_key: Option<SealingKey>,
    /// Deliver webhooks to loopback and private addresses (a receiver on
    /// 127.0.0.1 for the local stack). Link-local and cloud metadata
    /// addresses stay refused.
    #[arg(long, env = "RATEWIRE_WEBHOOK_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub webhook_allow_private: bool,
}

impl AlertSettings {
    pub fn address_policy(&self) -> AddressPolicy {
        AddressPolicy {
            allow_private: self.webhook_allow_private,
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct DeliverySettings {
    /// Webhook requests this instance has in flight at most; 0 leaves
    /// delivery to other instances.
    #[arg(long, env = "RATEWIRE_WEBHOOK_CONCURRENCY", default_value_t = 64, value_parser = clap::value_parser!(u32).range(0..=4_096))]
    pub concurrency: u32,
    /// Requests in flight to one endpoint at most (one while it is
    /// failing).
    #[arg(long, env = "RATEWIRE_WEBHOOK_ENDPOINT_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub endpoint_concurrency: u32,
}
