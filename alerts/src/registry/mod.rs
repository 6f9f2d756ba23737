//! Webhooks and rate alerts as their owners manage them (the API's
//! endpoints store through here): each belongs to an API key (by its
//! prefix) and is never shown, changed or even named to another key (a
//! stranger's id reads as not found). Bodies are checked here, naming
//! every bad field (`body`); a webhook's deliveries are shown and sent
//! again here ([`deliveries`]).

pub mod alerts;
mod body;
pub mod deliveries;
pub mod webhooks;

use sqlx::PgPool;

use crate::address::AddressPolicy;
use crate::error::Result;
use crate::sealing::SealingKey;
use crate::settings::AlertSettings;

/// The alerts schema as its owners' requests reach it.
pub struct Registry {
    /// On the alerts schema.
    pub pool: PgPool,
    pub schema: String,
    /// Seals new secrets; `None`: webhooks cannot be created here.
    pub key: Option<SealingKey>,
    pub policy: AddressPolicy,
    /// Webhooks one key may register.
    pub webhooks_per_key: u32,
    /// How a new best-rate alert's watch leaves outliers out.
    pub outliers: ratewire_readmodel::quality::OutlierRule,
}

impl Registry {
    pub fn new(
        database_url: &str,
        settings: &AlertSettings,
        webhooks_per_key: u32,
        outliers: ratewire_readmodel::quality::OutlierRule,
    ) -> Result<Self> {
        Ok(Self {
            pool: crate::schema::pool(database_url, &settings.alerts_schema, 8)?,
            schema: settings.alerts_schema.clone(),
            key: settings.webhook_secrets_key.clone(),
            policy: settings.address_policy(),
            webhooks_per_key,
            outliers,
        })
    }

    pub async fn migrate(&self) -> Result<()> {
        crate::schema::migrate(&self.pool, &self.schema).await
    }
}

/// Serializes one owner's creations, so that two at once cannot pass a
/// count together (held until the transaction ends).
async fn lock_owner(tx: &mut sqlx::PgConnection, owner: &str) -> sqlx::Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('ratewire-alerts:' || $1, 0))")
        .bind(owner)
        .execute(tx)
        .await?;
    Ok(())
}
