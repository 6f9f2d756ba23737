//! Webhooks and rate alerts as their owners manage them: each belongs to
//! an API key (by its prefix) and is never shown, changed or even named
//! to another key (a stranger's id reads as not found).
//!
//! The tables are the alerts schema's (`ratewire_readmodel::alerts`): the
//! projectors evaluate the alerts as boards are folded and deliver the
//! webhooks; here they are only created, listed and removed.

pub mod alerts;
pub mod webhooks;

use ratewire_readmodel::alerts::{AddressPolicy, AlertSettings, SealingKey};
use sqlx::PgPool;

use crate::error::Result;

/// What the alert and webhook routes need.
pub struct Alerting {
    /// On the alerts schema.
    pub pool: PgPool,
    pub schema: String,
    /// Seals new secrets; `None`: webhooks cannot be created here.
    pub key: Option<SealingKey>,
    pub policy: AddressPolicy,
    /// Webhooks one key may register.
    pub webhooks_per_key: u32,
}

impl Alerting {
    pub fn new(
        database_url: &str,
        settings: &AlertSettings,
        webhooks_per_key: u32,
    ) -> Result<Self> {
        Ok(Self {
            pool: ratewire_readmodel::db::pool(database_url, &settings.alerts_schema, 8)?,
            schema: settings.alerts_schema.clone(),
            key: settings.webhook_secrets_key.clone(),
            policy: settings.address_policy(),
            webhooks_per_key,
        })
    }

    pub async fn migrate(&self) -> Result<()> {
        Ok(ratewire_readmodel::alerts::migrate(&self.pool, &self.schema).await?)
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
