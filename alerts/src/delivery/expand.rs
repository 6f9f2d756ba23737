//! Crossings into messages: the fold records one row per watch a board
//! moved, naming the alerts it fired; here each becomes one message per
//! alert still there whose webhook is not disabled (its id from alert and
//! event), counted on its alert, and the crossing row goes, all in one
//! transaction. A crossing of thousands of alerts is taken a chunk at a
//! time (the row keeps the rest), so its first calls start while the rest
//! are made. The watchdog's events ([`quality_round`]) become one
//! message per webhook naming their type, the same way.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use rust_decimal::Decimal;
use sqlx::PgPool;
use tracing::warn;
use uuid::Uuid;

use super::stream::Offer;
use crate::judge::{Condition, Field};
use crate::message::{
    crossing_id, quality_message_id, BankRef, Body, ThresholdCrossed, THRESHOLD_CROSSED,
};

/// Crossings taken per round at most...
const PER_ROUND: i64 = 16;
/// ...and alerts: a larger crossing keeps the rest for the next round.
const ALERTS_PER_ROUND: usize = 1_000;

#[derive(sqlx::FromRow)]
struct Crossing {
    event_id: Uuid,
    watch_bank: i64,
    currency: String,
    field: String,
    alert_ids: Vec<Uuid>,
    previous: Option<Decimal>,
    current: Decimal,
    holder: i64,
    updated_at: DateTime<Utc>,
    occurred_at: DateTime<Utc>,
    /// The fold's trace context, for the messages' calls.
    traceparent: Option<String>,
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
    traceparent: Vec<Option<String>>,
}

/// Turns up to [`PER_ROUND`] crossings into messages; how many were made
/// (`None`: there were no crossings).
pub async fn round(pool: &PgPool, stream: &Offer) -> sqlx::Result<Option<u64>> {
    let mut tx = pool.begin().await?;
    let mut taken: Vec<Crossing> = sqlx::query_as(
        "SELECT event_id, currency, field, watch_bank, alert_ids, previous, current, holder,
                updated_at, occurred_at, traceparent
         FROM crossings ORDER BY occurred_at LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(PER_ROUND)
    .fetch_all(&mut *tx)
    .await?;
    if taken.is_empty() {
        return Ok(None);
    }
    let (done, rest) = take_chunk(&mut taken, ALERTS_PER_ROUND);
    sqlx::query(
        "DELETE FROM crossings c
         USING UNNEST($1::uuid[], $2::text[], $3::text[], $4::bigint[]) AS d (e, cu, f, b)
         WHERE (c.event_id, c.currency, c.field, c.watch_bank) = (d.e, d.cu, d.f, d.b)",
    )
    .bind(done.iter().map(|c| c.event_id).collect::<Vec<_>>())
    .bind(done.iter().map(|c| c.currency.as_str()).collect::<Vec<_>>())
    .bind(done.iter().map(|c| c.field.as_str()).collect::<Vec<_>>())
    .bind(done.iter().map(|c| c.watch_bank).collect::<Vec<_>>())
    .execute(&mut *tx)
    .await?;
    if let Some((crossing, left)) = &rest {
        sqlx::query(
            "UPDATE crossings SET alert_ids = $5
             WHERE (event_id, currency, field, watch_bank) = ($1, $2, $3, $4)",
        )
        .bind(crossing.event_id)
        .bind(&crossing.currency)
        .bind(&crossing.field)
        .bind(crossing.watch_bank)
        .bind(left)
        .execute(&mut *tx)
        .await?;
    }
    let taken = taken;
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
            messages.traceparent.push(crossing.traceparent.clone());
            let count = fired.entry(alert.id).or_insert((0, crossing.occurred_at));
            count.0 += 1;
            count.1 = count.1.max(crossing.occurred_at);
        }
    }
    let made: Vec<String> = sqlx::query_scalar(
        "INSERT INTO deliveries (id, webhook_id, alert_id, owner, type, body, traceparent)
         SELECT id, webhook, alert, owner, $6, body, traceparent
         FROM UNNEST($1::text[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $7::text[])
              AS m (id, webhook, alert, owner, body, traceparent)
         ON CONFLICT (id) DO NOTHING
         RETURNING id",
    )
    .bind(&messages.id)
    .bind(&messages.webhook)
    .bind(&messages.alert)
    .bind(&messages.owner)
    .bind(&messages.body)
    .bind(THRESHOLD_CROSSED)
    .bind(&messages.traceparent)
    .fetch_all(&mut *tx)
    .await?;
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
    // Offered to the live stream once stored (a reader it sends to the
    // API finds the alert fired), then marked, before any claim of this
    // deliverer looks for them.
    let made: std::collections::HashSet<String> = made.into_iter().collect();
    let new: Vec<(&str, &str, &str)> = (0..messages.id.len())
        .filter(|i| made.contains(&messages.id[*i]))
        .map(|i| {
            (
                messages.owner[i].as_str(),
                messages.id[i].as_str(),
                messages.body[i].as_str(),
            )
        })
        .collect();
    stream.offer_made(pool, &new).await;
    Ok(Some(made.len() as u64))
}

/// Cuts `taken` to `most` alerts in all: the crossings wholly taken (to
/// delete), and the one cut short with the alerts it keeps (to update).
/// `taken` keeps only the alerts of this round.
fn take_chunk(taken: &mut Vec<Crossing>, most: usize) -> (Vec<Key>, Option<(Key, Vec<Uuid>)>) {
    let mut room = most;
    let mut done = Vec::new();
    let mut rest = None;
    let mut kept = 0;
    for crossing in taken.iter_mut() {
        if room == 0 {
            break;
        }
        kept += 1;
        if crossing.alert_ids.len() > room {
            let left = crossing.alert_ids.split_off(room);
            rest = Some((Key::of(crossing), left));
            break;
        }
        room -= crossing.alert_ids.len();
        done.push(Key::of(crossing));
    }
    taken.truncate(kept);
    (done, rest)
}

/// A crossing row's key.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    event_id: Uuid,
    currency: String,
    field: String,
    watch_bank: i64,
}

impl Key {
    fn of(c: &Crossing) -> Self {
        Key {
            event_id: c.event_id,
            currency: c.currency.clone(),
            field: c.field.clone(),
            watch_bank: c.watch_bank,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn crossing(n: u128, alerts: u128) -> Crossing {
        Crossing {
            event_id: Uuid::from_u128(n),
            watch_bank: 0,
            currency: "USD".into(),
            field: "cashBuying".into(),
            alert_ids: (0..alerts).map(Uuid::from_u128).collect(),
            previous: None,
            current: Decimal::ONE,
            holder: 1,
            updated_at: DateTime::UNIX_EPOCH,
            occurred_at: DateTime::UNIX_EPOCH,
            traceparent: None,
        }
    }

    #[test]
    fn a_round_takes_whole_crossings_and_cuts_the_one_that_passes_the_chunk() {
        let mut taken = vec![crossing(1, 3), crossing(2, 5), crossing(3, 1)];
        let (done, rest) = take_chunk(&mut taken, 6);
        assert_eq!(done, [Key::of(&crossing(1, 0))]);
        let (cut, left) = rest.expect("the second is cut");
        assert_eq!(cut.event_id, Uuid::from_u128(2));
        assert_eq!(left, [Uuid::from_u128(3), Uuid::from_u128(4)]);
        assert_eq!(taken.len(), 2, "the third waits");
        assert_eq!(taken[1].alert_ids.len(), 3);
    }

    #[test]
    fn a_round_within_the_chunk_takes_every_crossing() {
        let mut taken = vec![crossing(1, 3), crossing(2, 3)];
        let (done, rest) = take_chunk(&mut taken, 6);
        assert_eq!((done.len(), rest, taken.len()), (2, None, 2));
    }
}
