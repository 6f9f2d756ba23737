//! Rate alerts: a threshold on one rate of a currency, at one bank or the
//! best across active banks, that calls a webhook when a board crosses it.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::views::{millis, numbers};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::FromRow;
use uuid::Uuid;

use super::body::BodyFields;
use super::{lock_owner, Registry};
use crate::error::{Error, Result};
use crate::judge::{self, Condition, Field, BEST};
use crate::schema::EVALUATION_LOCK;

/// The fields `POST /api/v1/alerts` takes.
pub struct NewAlert;

impl ratewire_service::body::Fields for NewAlert {
    const WHAT: &'static str = "an alert";
    const FIELDS: &'static [&'static str] = &[
        "webhookId",
        "currencyCode",
        "field",
        "condition",
        "threshold",
        "bankId",
    ];
    const REQUIRED: &'static [&'static str] = &[
        "webhookId",
        "currencyCode",
        "field",
        "condition",
        "threshold",
    ];
}

/// The most fraction digits a threshold may have.
const THRESHOLD_SCALE: u32 = 8;
/// Thresholds are at most this.
const THRESHOLD_MAX: i64 = 1_000_000_000;

/// An alert as its owner sees it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertInfo {
    pub id: Uuid,
    pub webhook_id: Uuid,
    pub currency_code: String,
    pub field: String,
    pub condition: String,
    #[serde(serialize_with = "numbers::one")]
    pub threshold: Decimal,
    /// `None`: the best rate across active banks.
    pub bank_id: Option<i64>,
    #[serde(serialize_with = "millis::one")]
    pub created_at: DateTime<Utc>,
    /// Whether the condition held at the last board evaluated (`None`:
    /// not known yet). A crossing fires only from not-true to true.
    pub triggered: Option<bool>,
    /// The watched value at the last board evaluated (or when the alert
    /// was made).
    #[serde(serialize_with = "numbers::maybe")]
    pub last_value: Option<Decimal>,
    /// Crossings so far.
    pub fired: i64,
    #[serde(serialize_with = "millis::maybe")]
    pub last_fired_at: Option<DateTime<Utc>>,
}

/// An alert's row with its watch's value and evaluations.
#[derive(FromRow)]
struct Row {
    id: Uuid,
    webhook_id: Uuid,
    currency: String,
    field: String,
    condition: String,
    threshold: Decimal,
    bank_id: Option<i64>,
    created_at: DateTime<Utc>,
    since: i64,
    value: Option<Decimal>,
    evaluations: Option<i64>,
    fired: i64,
    last_fired_at: Option<DateTime<Utc>>,
}

impl Row {
    fn listed(self) -> AlertInfo {
        let triggered = Condition::parse(&self.condition).and_then(|condition| {
            judge::state(
                condition,
                self.threshold,
                self.since,
                self.value,
                self.evaluations.unwrap_or(0),
            )
        });
        AlertInfo {
            id: self.id,
            webhook_id: self.webhook_id,
            currency_code: self.currency,
            field: self.field,
            condition: self.condition,
            threshold: self.threshold,
            bank_id: self.bank_id,
            created_at: self.created_at,
            triggered,
            last_value: self.value,
            fired: self.fired,
            last_fired_at: self.last_fired_at,
        }
    }
}

/// A watch's value and evaluations, by its currency ($1), field ($2) and
/// bank ($3).
const WATCHED: &str = "SELECT value, evaluations FROM watches
    WHERE currency = $1 AND field = $2 AND bank_id = $3";

const LISTED: &str = "SELECT a.id, a.webhook_id, a.currency, a.field, a.condition, a.threshold,
           a.bank_id, a.created_at, a.since, w.value, w.evaluations, a.fired, a.last_fired_at
    FROM alerts a
    LEFT JOIN watches w ON w.currency = a.currency AND w.field = a.field AND w.bank_id = a.watch_bank";

/// A new alert, read and checked (its webhook's owner and its bank are
/// checked with the insert).
struct Checked {
    webhook: Uuid,
    currency: CurrencyCode,
    field: Field,
    condition: Condition,
    threshold: Decimal,
    bank: Option<BankId>,
}

/// A new alert's fields as read from its body: each `None` where it is
/// missing or bad (named in the body's problems).
struct Read {
    webhook: Option<Uuid>,
    currency: Option<CurrencyCode>,
    field: Option<Field>,
    condition: Option<Condition>,
    threshold: Option<Decimal>,
    bank: Option<Option<BankId>>,
}

impl Read {
    /// Every field of `body`, each bad one named there.
    fn of(body: &mut BodyFields) -> Self {
        let webhook = body.string("webhookId", |id| {
            Uuid::parse_str(id.trim()).map_err(|_| "no webhook with this id".to_owned())
        });
        let currency = body.string("currencyCode", |code| {
            CurrencyCode::parse(code.trim())
                .map_err(|_| format!("{code:?} is not an ISO 4217 currency code"))
        });
        let field = body.string("field", |key| {
            Field::from_key(key).ok_or_else(|| {
                "must be one of cashBuying, cashSelling, transactionalBuying, transactionalSelling"
                    .to_owned()
            })
        });
        let condition = body.string("condition", |name| {
            Condition::parse(name).ok_or_else(|| "must be above or below".to_owned())
        });
        let threshold = body.number("threshold", threshold);
        let bank = match body.get::<Option<i64>>("bankId") {
            _ if body.refused("bankId") => None,
            None | Some(None) => Some(None),
            Some(Some(id)) => match BankId::new(id) {
                Ok(bank) => Some(Some(bank)),
                Err(_) => {
                    body.add("bankId", "must be a positive bank id");
                    None
                }
            },
        };
        Self {
            webhook,
            currency,
            field,
            condition,
            threshold,
            bank,
        }
    }

    /// The alert, when every field was read.
    fn checked(self) -> Option<Checked> {
        Some(Checked {
            webhook: self.webhook?,
            currency: self.currency?,
            field: self.field?,
            condition: self.condition?,
            threshold: self.threshold?,
            bank: self.bank?,
        })
    }
}

/// A threshold as written (`text`, a JSON number), its digits kept.
fn threshold(text: &str) -> std::result::Result<Decimal, String> {
    let value = Decimal::from_str(text)
        .or_else(|_| Decimal::from_scientific(text))
        .map_err(|_| "must be a decimal number".to_string())?;
    if value <= Decimal::ZERO || value > Decimal::from(THRESHOLD_MAX) {
        return Err(format!("must be above 0 and at most {THRESHOLD_MAX}"));
    }
    if value.normalize().scale() > THRESHOLD_SCALE {
        return Err(format!(
            "must have at most {THRESHOLD_SCALE} digits after the point"
        ));
    }
    Ok(value)
}

impl Registry {
    /// Creates an alert of `owner`, who may keep `most` of them, from
    /// `body` (JSON text). Every bad field is named at once, those the
    /// database judges (the webhook, the bank) with the others.
    pub async fn create_alert(&self, owner: &str, most: u64, body: &str) -> Result<AlertInfo> {
        let mut body = BodyFields::read::<NewAlert>(body)?;
        let read = Read::of(&mut body);
        let mut tx = self.pool.begin().await?;
        lock_owner(&mut tx, owner).await?;
        let (hook, known_bank, held): (bool, bool, i64) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM webhooks WHERE id = $1 AND owner = $2),
                    $3::bigint IS NULL OR EXISTS (SELECT 1 FROM quote_banks WHERE bank_id = $3),
                    (SELECT count(*) FROM alerts WHERE owner = $2)",
        )
        .bind(read.webhook)
        .bind(owner)
        .bind(read.bank.flatten().map(BankId::get))
        .fetch_one(&mut *tx)
        .await?;
        if read.webhook.is_some() && !hook {
            body.add("webhookId", "no webhook with this id");
        }
        if !known_bank {
            body.add("bankId", "no bank with this id");
        }
        let new = body.finish(read.checked())?;
        if held as u64 >= most {
            return Err(Error::LimitReached(format!(
                "Alert limit reached: this key has {held} and its plan keeps {most}; delete one first"
            )));
        }
        // Made wholly between two evaluations of its watch (the fold holds
        // this lock exclusively while it judges): its first is the next.
        sqlx::query("SELECT pg_advisory_xact_lock_shared($1)")
            .bind(EVALUATION_LOCK)
            .execute(&mut *tx)
            .await?;
        let watch_bank = new.bank.map_or(BEST, BankId::get);
        let (value, evaluations) = self.watch(&mut tx, &new, watch_bank).await?;
        let id = Uuid::new_v4();
        let created_at: DateTime<Utc> = sqlx::query_scalar(
            "INSERT INTO alerts (id, owner, webhook_id, currency, field, condition, threshold,
                                 bank_id, watch_bank, since)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING created_at",
        )
        .bind(id)
        .bind(owner)
        .bind(new.webhook)
        .bind(new.currency.as_str())
        .bind(new.field.key())
        .bind(new.condition.name())
        .bind(new.threshold)
        .bind(new.bank.map(BankId::get))
        .bind(watch_bank)
        .bind(evaluations)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        let alert = Row {
            id,
            webhook_id: new.webhook,
            currency: new.currency.as_str().to_owned(),
            field: new.field.key().to_owned(),
            condition: new.condition.name().to_owned(),
            threshold: new.threshold,
            bank_id: new.bank.map(BankId::get),
            created_at,
            since: evaluations,
            value,
            evaluations: Some(evaluations),
            fired: 0,
            last_fired_at: None,
        };
        Ok(alert.listed())
    }

    /// The alert's watch: its value and evaluations so far. A watch is
    /// made with its first alert, with the value now; the alert is not
    /// known until the watch's next evaluation, so the first board that
    /// finds it true fires.
    async fn watch(
        &self,
        tx: &mut sqlx::PgConnection,
        new: &Checked,
        watch_bank: i64,
    ) -> Result<(Option<Decimal>, i64)> {
        let found: Option<(Option<Decimal>, i64)> = sqlx::query_as(WATCHED)
            .bind(new.currency.as_str())
            .bind(new.field.key())
            .bind(watch_bank)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(found) = found {
            return Ok(found);
        }
        let quotes = crate::quotes::read(
            &mut *tx,
            &crate::quotes::statement(&self.schema),
            &[new.currency.as_str().to_owned()],
            &[],
        )
        .await?;
        let seen = judge::watched(
            new.field,
            watch_bank,
            quotes.iter().map(|(q, a)| (q, *a)),
            self.outliers,
        );
        // Another owner's first alert on it may make it meanwhile: then
        // theirs stands (made in the same interval between evaluations).
        let made = sqlx::query(
            "INSERT INTO watches (currency, field, bank_id, value, holder, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(new.currency.as_str())
        .bind(new.field.key())
        .bind(watch_bank)
        .bind(seen.map(|s| s.value))
        .bind(seen.map(|s| s.holder))
        .bind(seen.map(|s| s.updated_at))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if made == 1 {
            return Ok((seen.map(|s| s.value), 0));
        }
        Ok(sqlx::query_as(WATCHED)
            .bind(new.currency.as_str())
            .bind(new.field.key())
            .bind(watch_bank)
            .fetch_one(&mut *tx)
            .await?)
    }

    pub async fn alerts(&self, owner: &str) -> Result<Vec<AlertInfo>> {
        let rows: Vec<Row> = sqlx::query_as(&format!(
            "{LISTED} WHERE a.owner = $1 ORDER BY a.created_at, a.id"
        ))
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(Row::listed).collect())
    }

    /// Removes the alert and its undelivered messages.
    pub async fn delete_alert(&self, owner: &str, id: Uuid) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let deleted = sqlx::query("DELETE FROM alerts WHERE id = $1 AND owner = $2")
            .bind(id)
            .bind(owner)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if deleted == 0 {
            return Err(Error::NotFound("Alert not found"));
        }
        sqlx::query(
            "DELETE FROM deliveries WHERE alert_id = $1 AND delivered_at IS NULL AND failed_at IS NULL",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The problems `body` has, by field, with what was read.
    fn problems(body: &str) -> (Vec<String>, Read) {
        let mut fields = BodyFields::read::<NewAlert>(body).unwrap();
        let read = Read::of(&mut fields);
        let named = match fields.finish(Some(())) {
            Ok(()) => Vec::new(),
            Err(Error::Validation(problems)) => problems.into_keys().collect(),
            Err(e) => panic!("{e}"),
        };
        (named, read)
    }

    #[test]
    fn every_bad_field_is_named_whatever_its_fault() {
        let (named, _) = problems(
            r#"{"webhookId": "nope", "currencyCode": "XYZ", "field": "cash",
                "condition": "over", "threshold": -1, "bankId": 0}"#,
        );
        assert_eq!(
            named,
            [
                "bankId",
                "condition",
                "currencyCode",
                "field",
                "threshold",
                "webhookId"
            ]
        );
        // Wrong types, a missing field and an unknown one, with bad values.
        let (named, read) = problems(
            r#"{"webhookId": 7, "field": "mid", "condition": "above",
                "threshold": "a lot", "bankId": 3, "extra": 1}"#,
        );
        assert_eq!(
            named,
            ["currencyCode", "extra", "field", "threshold", "webhookId"]
        );
        assert_eq!(
            read.bank,
            Some(BankId::new(3).ok()),
            "read, for the database to judge"
        );
    }

    #[test]
    fn thresholds_keep_their_digits() {
        let read = |text: &str| threshold(text).map(|t| t.to_string());
        assert_eq!(read("160").unwrap(), "160");
        assert_eq!(read("150.50").unwrap(), "150.50");
        assert_eq!(read("155.10").unwrap(), "155.10");
        assert_eq!(read("0.00012345").unwrap(), "0.00012345");
        assert_eq!(read("1.5e2").unwrap(), "150");
        assert_eq!(read("999999999.99999999").unwrap(), "999999999.99999999");
        assert!(read("0.000000001").is_err());
        assert!(read("0").is_err());
        assert!(read("1e12").is_err());
        assert!(read("1000000001").is_err());
    }
}
