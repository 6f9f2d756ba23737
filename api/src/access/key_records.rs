//! Keys as operators create and list them: stored as hashes of the
//! secret, which is shown once, at creation.

use chrono::{DateTime, Utc};
use ratewire_readmodel::views::millis;
use ratewire_service::secret;
use serde::{Deserialize, Serialize};
use sqlx::{FromRow, PgPool};

use crate::access::plans::Plans;
use crate::error::{Error, FieldErrors, Result};

/// The kind tag of API keys: `rwk_{prefix}_{secret}`.
pub const KEY_KIND: &str = "rwk";
pub const DEFAULT_PLAN: &str = "free";

/// A key as operators see it: never the secret.
#[derive(Debug, Clone, Serialize, FromRow)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfo {
    pub prefix: String,
    pub name: String,
    pub plan: String,
    #[serde(serialize_with = "millis::one")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "millis::maybe")]
    pub revoked_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    pub name: String,
    #[serde(default)]
    pub plan: Option<String>,
}

impl ratewire_service::body::Fields for NewKey {
    const WHAT: &'static str = "a new key";
    const FIELDS: &'static [&'static str] = &["name", "plan"];
    const REQUIRED: &'static [&'static str] = &["name"];
}

/// A key just created: the only time its secret exists outside the client.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedKey {
    pub key: String,
    #[serde(flatten)]
    pub info: KeyInfo,
}

pub async fn create(pool: &PgPool, plans: &Plans, new: NewKey) -> Result<CreatedKey> {
    let mut errors = FieldErrors::new();
    let name = new.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        errors
            .entry("name".into())
            .or_default()
            .push("name must be 1 to 200 characters".into());
    }
    if name.contains('\0') {
        errors
            .entry("name".into())
            .or_default()
            .push("name must not contain NUL characters".into());
    }
    let plan = new.plan.as_deref().unwrap_or(DEFAULT_PLAN);
    if !plans.assignable().any(|p| p == plan) {
        let names: Vec<&str> = plans.assignable().collect();
        let problem = if new.plan.is_none() {
            format!(
                "plan is required: there is no {DEFAULT_PLAN} plan (plans: {})",
                names.join(", ")
            )
        } else {
            format!("plan must be one of {}", names.join(", "))
        };
        errors.entry("plan".into()).or_default().push(problem);
    }
    if !errors.is_empty() {
        return Err(Error::Validation(errors));
    }
    let secret = secret::generate(KEY_KIND);
    let info: KeyInfo = sqlx::query_as(
        "INSERT INTO api_keys (prefix, key_hash, name, plan) VALUES ($1, $2, $3, $4)
         RETURNING prefix, name, plan, created_at, revoked_at",
    )
    .bind(&secret.prefix)
    .bind(&secret.hash)
    .bind(name)
    .bind(plan)
    .fetch_one(pool)
    .await?;
    tracing::info!(key_prefix = info.prefix, plan, "api key created");
    Ok(CreatedKey {
        key: secret.secret,
        info,
    })
}

pub async fn list(pool: &PgPool) -> Result<Vec<KeyInfo>> {
    Ok(sqlx::query_as("SELECT prefix, name, plan, created_at, revoked_at FROM api_keys ORDER BY created_at, prefix")
        .fetch_all(pool)
        .await?)
}
