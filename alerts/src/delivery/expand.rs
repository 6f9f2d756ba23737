//! Crossings into messages: the fold records one row per watch a board
//! moved, naming the alerts it fired; here each becomes one message per
//! alert still there whose webhook is not disabled (its id from alert and
//! event), counted on its alert, and the crossing row goes, all in one
//! transaction. The watchdog's events ([`quality_round`]) become one
//! message per webhook naming their type, the same way.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use rust_decimal::Decimal;
use sqlx::PgPool;
use tracing::warn;
use uuid::Uuid;

use crate::judge::{Condition, Field};
use crate::message::{
    crossing_id, quality_message_id, BankRef, Body, ThresholdCrossed, THRESHOLD_CROSSED,
};

/// Crossings taken per round at most (each may name thousands of alerts).
const PER_ROUND: i64 = 16;

#[derive(sqlx::FromRow)]
struct Crossing {
    event_id: Uuid,
    currency: String,
    field: String,
    alert_ids: Vec<Uuid>,
    previous: Option<Decimal>,
    current: Decimal,
    holder: i64,
    updated_at: DateTime<Utc>,
    occurred_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct Alert {
    id: Uuid,
    owner: String,
    webhook_id: Uuid,
    condition: String,
    threshold: Decimal,
}

/// The messages of one round, as columns.
#[derive(Default)]
struct Messages {
    id: Vec<String>,
    webhook: Vec<Uuid>,
    alert: Vec<Uuid>,
    owner: Vec<String>,
    body: Vec<String>,
}

/// Turns up to [`PER_ROUND`] crossings into messages; how many were made
/// (`None`: there were no crossings).
pub async fn round(pool: &PgPool) -> sqlx::Result<Option<u64>> {
    let mut tx = pool.begin().await?;
    let taken: Vec<Crossing> = sqlx::query_as(
        "DELETE FROM crossings c
         WHERE (c.event_id, c.currency, c.field, c.watch_bank) IN (
             SELECT event_id, currency, field, watch_bank FROM crossings
             ORDER BY occurred_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING c.event_id, c.currency, c.field, c.alert_ids, c.previous, c.current, c.holder,
                   c.updated_at, c.occurred_at",
    )
    .bind(PER_ROUND)
    .fetch_all(&mut *tx)
    .await?;
    if taken.is_empty() {
        return Ok(None);
    }
    let ids: Vec<Uuid> = taken.iter().flat_map(|c| c.alert_ids.clone()).collect();
    let holders: Vec<i64> = taken.iter().map(|c| c.holder).collect();
    let alerts: BTreeMap<Uuid, Alert> = sqlx::query_as::<_, Alert>(
        "SELECT a.id, a.owner, a.webhook_id, a.condition, a.threshold FROM alerts a
         JOIN webhooks w ON w.id = a.webhook_id AND w.disabled_at IS NULL
         WHERE a.id = ANY ($1)",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|a| (a.id, a))
    .collect();
    let banks: BTreeMap<i64, BankRef> = sqlx::query_as::<_, (i64, String, String)>(
        "SELECT bank_id, name, code FROM quote_banks WHERE bank_id = ANY ($1)",
    )
    .bind(&holders)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|(id, name, code)| (id, BankRef { id, name, code }))
    .collect();

    let mut messages = Messages::default();
    // Per alert: crossings made, and the last one's time.
    let mut fired: BTreeMap<Uuid, (i64, DateTime<Utc>)> = BTreeMap::new();
    for crossing in &taken {
        let (Some(bank), Ok(_), Some(field)) = (
            banks.get(&crossing.holder),
            CurrencyCode::parse(&crossing.currency),
            Field::from_key(&crossing.field),
        ) else {
            warn!(event = %crossing.event_id, holder = crossing.holder,
                "a crossing names a bank or rate alerts do not know; no message is made");
            continue;
        };
        for alert in crossing.alert_ids.iter().filter_map(|id| alerts.get(id)) {
            let Some(condition) = Condition::parse(&alert.condition) else {
                continue;
            };
            let body = Body {
                kind: THRESHOLD_CROSSED,
                timestamp: crossing.occurred_at,
                data: ThresholdCrossed {
                    alert_id: alert.id,
                    bank: bank.clone(),
                    currency_code: crossing.currency.clone(),
                    field,
                    condition,
                    threshold: alert.threshold,
                    previous: crossing.previous,
                    current: crossing.current,
                    updated_at: crossing.updated_at,
                    event_id: crossing.event_id,
                },
            };
            messages.id.push(crossing_id(alert.id, crossing.event_id));
            messages.webhook.push(alert.webhook_id);
            messages.alert.push(alert.id);
            messages.owner.push(alert.owner.clone());
            messages.body.push(body.to_json());
            let count = fired.entry(alert.id).or_insert((0, crossing.occurred_at));
            count.0 += 1;
            count.1 = count.1.max(crossing.occurred_at);
        }
    }
    let made = sqlx::query(
        "INSERT INTO deliveries (id, webhook_id, alert_id, owner, type, body)
         SELECT id, webhook, alert, owner, $6, body
         FROM UNNEST($1::text[], $2::uuid[], $3::uuid[], $4::text[], $5::text[])
              AS m (id, webhook, alert, owner, body)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(&messages.id)
    .bind(&messages.webhook)
    .bind(&messages.alert)
    .bind(&messages.owner)
    .bind(&messages.body)
    .bind(THRESHOLD_CROSSED)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let alert_ids: Vec<Uuid> = fired.keys().copied().collect();
    let counts: Vec<i64> = fired.values().map(|(n, _)| *n).collect();
    let lasts: Vec<DateTime<Utc>> = fired.values().map(|(_, last)| *last).collect();
    sqlx::query(
        "UPDATE alerts a SET fired = a.fired + f.n, last_fired_at = f.last
         FROM UNNEST($1::uuid[], $2::bigint[], $3::timestamptz[]) AS f (id, n, last)
         WHERE a.id = f.id",
    )
    .bind(&alert_ids)
    .bind(&counts)
    .bind(&lasts)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(made))
}

/// Watchdog events taken per round at most.
const EVENTS_PER_ROUND: i64 = 256;

#[derive(sqlx::FromRow)]
struct QualityEvent {
    id: String,
    #[sqlx(rename = "type")]
    kind: String,
    body: String,
}

#[derive(sqlx::FromRow)]
struct Subscriber {
    id: Uuid,
    owner: String,
    events: Vec<String>,
}

/// Turns up to [`EVENTS_PER_ROUND`] watchdog events into one message per
/// webhook naming its type and not disabled (its id from event and
/// webhook), and deletes them, in one transaction; how many messages were
/// made (`None`: there were no events).
pub async fn quality_round(pool: &PgPool) -> sqlx::Result<Option<u64>> {
    let mut tx = pool.begin().await?;
    let taken: Vec<QualityEvent> = sqlx::query_as(
        "DELETE FROM quality_events e
         WHERE e.id IN (SELECT id FROM quality_events
                        ORDER BY occurred_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING e.id, e.type, e.body",
    )
    .bind(EVENTS_PER_ROUND)
    .fetch_all(&mut *tx)
    .await?;
    if taken.is_empty() {
        return Ok(None);
    }
    let subscribers: Vec<Subscriber> = sqlx::query_as(
        "SELECT id, owner, events FROM webhooks
         WHERE cardinality(events) > 0 AND disabled_at IS NULL",
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut messages = Messages::default();
    let mut kinds = Vec::new();
    for event in &taken {
        for webhook in subscribers
            .iter()
            .filter(|w| w.events.contains(&event.kind))
        {
            messages.id.push(quality_message_id(&event.id, webhook.id));
            messages.webhook.push(webhook.id);
            messages.owner.push(webhook.owner.clone());
            messages.body.push(event.body.clone());
            kinds.push(event.kind.clone());
        }
    }
    let made = sqlx::query(
        "INSERT INTO deliveries (id, webhook_id, owner, type, body)
         SELECT * FROM UNNEST($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[])
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(&messages.id)
    .bind(&messages.webhook)
    .bind(&messages.owner)
    .bind(&kinds)
    .bind(&messages.body)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(Some(made))
}
