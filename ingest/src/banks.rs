//! Banks and their publisher tokens: ingest's own records, and the events
//! that tell the rest of ratewire about them.
//!
//! Every change and its events are committed in one Postgres transaction
//! through the [`outbox`], then published: ingest's record
//! and the log always agree, and the answer comes once the broker has the
//! events (or, while it is unavailable, once they are safely waiting).

use chrono::Utc;
use ratewire_proto::schedule::nullable;
use ratewire_proto::{
    BankDeactivated, BankId, BankReactivated, BankRegistered, BankUpdated, Envelope, Event,
    Schedule, SocialLink,
};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use sqlx::{FromRow, PgPool};

use crate::error::{Error, FieldErrors, Result};
use crate::outbox;
use crate::publisher::Publisher;
use ratewire_service::secret as secrets;

/// The kind tag of publisher tokens: `rwp_{prefix}_{secret}`.
pub const TOKEN_KIND: &str = "rwp";

#[derive(Debug, Clone, Serialize, Deserialize, FromRow)]
#[serde(rename_all = "camelCase")]
pub struct Bank {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub image_url: String,
    #[sqlx(json)]
    pub social_links: Vec<SocialLink>,
    pub active: bool,
    /// When the bank is expected to publish; null when it has no schedule.
    #[sqlx(json(nullable))]
    pub schedule: Option<Schedule>,
}

/// A bank row's columns, in [`Bank`]'s order.
const BANK_COLUMNS: &str = "id, code, name, image_url, social_links, active, schedule";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewBank {
    pub code: String,
    pub name: String,
    pub image_url: String,
    #[serde(default)]
    pub social_links: Vec<SocialLink>,
    /// Read as JSON and checked on validation, so that a 400 names the field.
    #[serde(default)]
    pub schedule: Option<serde_json::Value>,
}

impl ratewire_service::body::Fields for NewBank {
    const WHAT: &'static str = "a new bank";
    const FIELDS: &'static [&'static str] =
        &["code", "name", "imageUrl", "socialLinks", "schedule"];
    const REQUIRED: &'static [&'static str] = &["code", "name", "imageUrl"];
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BankPatch {
    pub code: Option<String>,
    pub name: Option<String>,
    pub image_url: Option<String>,
    pub social_links: Option<Vec<SocialLink>>,
    pub active: Option<bool>,
    /// Absent: unchanged; `null`: cleared; else the new schedule (checked
    /// on validation).
    #[serde(default, with = "nullable")]
    pub schedule: Option<Option<serde_json::Value>>,
}

fn check_text(errors: &mut FieldErrors, field: &str, value: &str, max: usize) {
    if value.trim().is_empty() {
        errors
            .entry(field.into())
            .or_default()
            .push("must not be empty".into());
    } else if value.contains('\0') {
        // Postgres cannot store it (and no name needs it).
        errors
            .entry(field.into())
            .or_default()
            .push("must not contain NUL characters".into());
    } else if value.chars().count() > max {
        errors
            .entry(field.into())
            .or_default()
            .push(format!("must be at most {max} characters"));
    }
}

fn check_url(errors: &mut FieldErrors, field: &str, value: &str) {
    if !(value.starts_with("https://") || value.starts_with("http://"))
        || value.chars().count() > 2048
        || value.contains('\0')
    {
        errors
            .entry(field.into())
            .or_default()
            .push("must be an http(s) URL".into());
    }
}

/// The schedule `value` gives, or why it is none (under `schedule`).
fn schedule(errors: &mut FieldErrors, value: Option<&serde_json::Value>) -> Option<Schedule> {
    match Schedule::from_json(value?) {
        Ok(schedule) => Some(schedule),
        Err(problem) => {
            errors
                .entry(problem.field)
                .or_default()
                .push(problem.message);
            None
        }
    }
}

fn check_links(errors: &mut FieldErrors, links: &[SocialLink]) {
    for (i, link) in links.iter().enumerate() {
        check_text(
            errors,
            &format!("socialLinks[{i}].platform"),
            &link.platform,
            64,
        );
        check_url(errors, &format!("socialLinks[{i}].url"), &link.url);
    }
}

impl NewBank {
    /// The bank's schedule, once every field is checked.
    fn validate(&self) -> Result<Option<Schedule>> {
        let mut errors = FieldErrors::new();
        check_text(&mut errors, "code", &self.code, 32);
        check_text(&mut errors, "name", &self.name, 200);
        check_url(&mut errors, "imageUrl", &self.image_url);
        check_links(&mut errors, &self.social_links);
        let schedule = schedule(&mut errors, self.schedule.as_ref());
        if errors.is_empty() {
            Ok(schedule)
        } else {
            Err(Error::Validation(errors))
        }
    }
}

impl ratewire_service::body::Fields for BankPatch {
    const WHAT: &'static str = "a bank change";
    const FIELDS: &'static [&'static str] = &[
        "code",
        "name",
        "imageUrl",
        "socialLinks",
        "active",
        "schedule",
    ];
    const REQUIRED: &'static [&'static str] = &[];
}

impl BankPatch {
    /// True when the patch would change nothing.
    pub fn is_empty(&self) -> bool {
        self.code.is_none()
            && self.name.is_none()
            && self.image_url.is_none()
            && self.social_links.is_none()
            && self.active.is_none()
            && self.schedule.is_none()
    }

    /// The schedule change (`Some(None)`: clear it), once every field is
    /// checked.
    fn validate(&self) -> Result<Option<Option<Schedule>>> {
        let mut errors = FieldErrors::new();
        if self.is_empty() {
            errors.entry("body".into()).or_default().push(
                "a change needs at least one of code, name, imageUrl, socialLinks, active, schedule"
                    .into(),
            );
        }
        if let Some(code) = &self.code {
            check_text(&mut errors, "code", code, 32);
        }
        if let Some(name) = &self.name {
            check_text(&mut errors, "name", name, 200);
        }
        if let Some(url) = &self.image_url {
            check_url(&mut errors, "imageUrl", url);
        }
        if let Some(links) = &self.social_links {
            check_links(&mut errors, links);
        }
        let schedule = self
            .schedule
            .as_ref()
            .map(|value| schedule(&mut errors, value.as_ref()));
        if errors.is_empty() {
            Ok(schedule)
        } else {
            Err(Error::Validation(errors))
        }
    }
}

fn code_taken(e: sqlx::Error, code: &str) -> Error {
    match &e {
        sqlx::Error::Database(db) if db.constraint() == Some("banks_code_key") => {
            Error::Conflict(format!("A bank with code {code} already exists"))
        }
        _ => Error::Postgres(e),
    }
}

fn bank_id(id: i64) -> Result<BankId> {
    BankId::new(id)
        .map_err(|_| Error::Startup(format!("bank id {id} from the sequence is not positive")))
}

pub async fn register(pool: &PgPool, publisher: &Publisher, new: NewBank) -> Result<Bank> {
    let schedule = new.validate()?;
    let mut tx = pool.begin().await?;
    let bank: Bank = sqlx::query_as(&format!(
        "INSERT INTO banks (code, name, image_url, social_links, schedule)
         VALUES ($1, $2, $3, $4, $5)
         RETURNING {BANK_COLUMNS}"
    ))
    .bind(&new.code)
    .bind(&new.name)
    .bind(&new.image_url)
    .bind(Json(&new.social_links))
    .bind(schedule.as_ref().map(Json))
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| code_taken(e, &new.code))?;
    let event = Event::BankRegistered(BankRegistered {
        code: new.code,
        name: new.name,
        image_url: new.image_url,
        social_links: new.social_links,
        schedule,
    });
    outbox::add(
        &mut tx,
        &Envelope::new(bank_id(bank.id)?, Utc::now(), event),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(bank_id = bank.id, code = bank.code, "bank registered");
    publish_waiting(pool, publisher).await;
    Ok(bank)
}

pub async fn update(
    pool: &PgPool,
    publisher: &Publisher,
    id: BankId,
    patch: BankPatch,
) -> Result<Bank> {
    let schedule = patch.validate()?;
    let mut tx = pool.begin().await?;
    let before: Bank = sqlx::query_as(&format!(
        "SELECT {BANK_COLUMNS} FROM banks WHERE id = $1 FOR UPDATE"
    ))
    .bind(id.get())
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| Error::NotFound("Bank not found".into()))?;
    agrees_with_log(&mut *tx, id).await?;
    let after: Bank = sqlx::query_as(&format!(
        "UPDATE banks SET code = COALESCE($2, code), name = COALESCE($3, name), image_url = COALESCE($4, image_url),
             social_links = COALESCE($5, social_links), active = COALESCE($6, active),
             schedule = CASE WHEN $7 THEN $8 ELSE schedule END, updated_at = now()
         WHERE id = $1 RETURNING {BANK_COLUMNS}"
    ))
    .bind(id.get())
    .bind(&patch.code)
    .bind(&patch.name)
    .bind(&patch.image_url)
    .bind(patch.social_links.as_ref().map(Json))
    .bind(patch.active)
    .bind(schedule.is_some())
    .bind(schedule.as_ref().and_then(|s| s.as_ref().map(Json)))
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| code_taken(e, patch.code.as_deref().unwrap_or_default()))?;

    // Only what changed goes on the log.
    let changed = BankUpdated {
        code: patch.code.filter(|c| *c != before.code),
        name: patch.name.filter(|n| *n != before.name),
        image_url: patch.image_url.filter(|u| *u != before.image_url),
        social_links: patch.social_links.filter(|l| *l != before.social_links),
        schedule: schedule.filter(|s| *s != before.schedule),
    };
    let now = Utc::now();
    if changed != BankUpdated::default() {
        outbox::add(
            &mut tx,
            &Envelope::new(id, now, Event::BankUpdated(changed)),
        )
        .await?;
    }
    let activity = match (before.active, after.active) {
        (true, false) => Some(Event::BankDeactivated(BankDeactivated::default())),
        (false, true) => Some(Event::BankReactivated(BankReactivated {})),
        _ => None,
    };
    if let Some(event) = activity {
        outbox::add(&mut tx, &Envelope::new(id, now, event)).await?;
    }
    tx.commit().await?;
    publish_waiting(pool, publisher).await;
    Ok(after)
}

/// Publishes what the outbox holds now; when the broker is unavailable the
/// events wait there for the drain task, so the change stands either way.
async fn publish_waiting(pool: &PgPool, publisher: &Publisher) {
    if let Err(e) = outbox::drain(pool, publisher).await {
        tracing::warn!(error = %e, "a bank change is committed but not on the log yet; it will be published when the broker returns");
    }
}

pub async fn list(pool: &PgPool) -> Result<Vec<Bank>> {
    Ok(
        sqlx::query_as(&format!("SELECT {BANK_COLUMNS} FROM banks ORDER BY id"))
            .fetch_all(pool)
            .await?,
    )
}

pub async fn get(pool: &PgPool, id: BankId) -> Result<Option<Bank>> {
    Ok(
        sqlx::query_as(&format!("SELECT {BANK_COLUMNS} FROM banks WHERE id = $1"))
            .bind(id.get())
            .fetch_optional(pool)
            .await?,
    )
}

/// A new token for the bank; the secret is returned once and never stored.
pub async fn create_token(pool: &PgPool, id: BankId) -> Result<secrets::NewSecret> {
    if get(pool, id).await?.is_none() {
        return Err(Error::NotFound("Bank not found".into()));
    }
    agrees_with_log(pool, id).await?;
    let token = secrets::generate(TOKEN_KIND);
    sqlx::query("INSERT INTO publisher_tokens (prefix, bank_id, token_hash) VALUES ($1, $2, $3)")
        .bind(&token.prefix)
        .bind(id.get())
        .bind(&token.hash)
        .execute(pool)
        .await?;
    tracing::info!(bank_id = %id, token_prefix = token.prefix, "publisher token created");
    Ok(token)
}

/// Revokes a token by its prefix; false when no live token has it.
pub async fn revoke_token(pool: &PgPool, prefix: &str) -> Result<bool> {
    if !ratewire_service::secret::is_prefix(prefix) {
        return Ok(false);
    }
    let revoked = sqlx::query(
        "UPDATE publisher_tokens SET revoked_at = now() WHERE prefix = $1 AND revoked_at IS NULL",
    )
    .bind(prefix)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(revoked == 1)
}

/// Refuses a bank whose record disagrees with the log (see
/// [`crate::log_registry`]).
pub async fn agrees_with_log<'e>(db: impl sqlx::PgExecutor<'e>, id: BankId) -> Result<()> {
    let conflict: Option<Option<String>> =
        sqlx::query_scalar("SELECT log_conflict FROM banks WHERE id = $1")
            .bind(id.get())
            .fetch_optional(db)
            .await?;
    match conflict.flatten() {
        Some(reason) => Err(Error::LogConflict {
            bank: id.get(),
            reason,
        }),
        None => Ok(()),
    }
}

/// A publisher token's bank, as authentication found it.
#[derive(Debug, Clone, Copy)]
pub struct TokenBank {
    pub bank: BankId,
    pub active: bool,
    /// The bank's own changes wait in the outbox: they go on the log
    /// before its next board.
    pub changes_waiting: bool,
}

/// What Postgres holds about a live token and its bank: read per push
/// (authentication, or the push's board-record round), judged by
/// [`TokenRow::check`].
#[derive(Debug, Clone, FromRow)]
pub struct TokenRow {
    pub bank_id: i64,
    pub token_hash: String,
    pub active: bool,
    pub log_conflict: Option<String>,
    /// The bank's own changes wait in the outbox.
    pub changes_waiting: bool,
}

impl TokenRow {
    /// The bank `token_hash` (the presented token's) publishes for, if the
    /// row is that token's; [`Error::LogConflict`] for a bank that
    /// disagrees with the log.
    pub fn check(self, token_hash: &str) -> Result<Option<TokenBank>> {
        if !secrets::same_hash(&self.token_hash, token_hash) {
            return Ok(None);
        }
        if let Some(reason) = self.log_conflict {
            return Err(Error::LogConflict {
                bank: self.bank_id,
                reason,
            });
        }
        Ok(BankId::new(self.bank_id).ok().map(|bank| TokenBank {
            bank,
            active: self.active,
            changes_waiting: self.changes_waiting,
        }))
    }
}

/// The bank a live token publishes for, whether that bank is active and
/// whether its changes wait in the outbox; [`Error::LogConflict`] for a
/// bank that disagrees with the log.
pub async fn authenticate(pool: &PgPool, token: &str) -> Result<Option<TokenBank>> {
    let Some(prefix) = secrets::prefix_of(TOKEN_KIND, token) else {
        return Ok(None);
    };
    // Whether the bank's own changes wait in the outbox comes in the same
    // round trip: a push needs to know, and asking apart cost a board a
    // query of its own.
    let row: Option<TokenRow> = sqlx::query_as(
        "SELECT t.bank_id, t.token_hash, b.active, b.log_conflict,
                EXISTS (SELECT 1 FROM outbox o WHERE o.bank_id = t.bank_id) AS changes_waiting
         FROM publisher_tokens t JOIN banks b ON b.id = t.bank_id
         WHERE t.prefix = $1 AND t.revoked_at IS NULL",
    )
    .bind(prefix)
    .fetch_optional(pool)
    .await?;
    match row {
        Some(row) => row.check(&secrets::hash(token)),
        None => Ok(None),
    }
}
