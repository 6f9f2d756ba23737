//! What a webhook receives: each message's body as a type, written once by
//! serde (the deliverer's crossings and the API's test calls alike), and
//! its id.

use chrono::{DateTime, Utc};
use ratewire_readmodel::views::{millis, numbers};
use rust_decimal::Decimal;
use serde::Serialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::judge::{Condition, Field};

/// The event types webhooks receive.
pub const THRESHOLD_CROSSED: &str = "rate.threshold_crossed";
pub const WEBHOOK_TEST: &str = "webhook.test";
/// A bank began missing its schedule's slots (told once per run of
/// consecutive missed slots).
pub const PUBLICATION_MISSED: &str = "quality.publication_missed";
/// A pair of a bank's newest board went over the spread cap.
pub const SPREAD_CAP_BREACHED: &str = "quality.spread_cap_breached";
/// The event types a webhook may name in `events`.
pub const QUALITY_EVENTS: [&str; 2] = [PUBLICATION_MISSED, SPREAD_CAP_BREACHED];

/// A message's body: `{type, timestamp, data}`.
#[derive(Debug, Serialize)]
pub struct Body<D> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When it happened (a crossing: when its event occurred).
    #[serde(serialize_with = "millis::one")]
    pub timestamp: DateTime<Utc>,
    pub data: D,
}

impl<D: Serialize> Body<D> {
    /// The body as sent (and signed).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a webhook body serializes")
    }
}

/// `rate.threshold_crossed`: an alert's condition became true.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThresholdCrossed {
    pub alert_id: Uuid,
    /// The bank quoting the value (for the best rate, the best bank).
    pub bank: BankRef,
    pub currency_code: String,
    #[serde(serialize_with = "field_key")]
    pub field: Field,
    pub condition: Condition,
    #[serde(serialize_with = "numbers::one")]
    pub threshold: Decimal,
    /// The watched value before (`null`: not quoted).
    #[serde(serialize_with = "numbers::maybe")]
    pub previous: Option<Decimal>,
    #[serde(serialize_with = "numbers::one")]
    pub current: Decimal,
    /// The as-of of the board the value is on.
    #[serde(serialize_with = "millis::one")]
    pub updated_at: DateTime<Utc>,
    /// The event that moved it.
    pub event_id: Uuid,
}

#[derive(Debug, Clone, Serialize)]
pub struct BankRef {
    pub id: i64,
    pub name: String,
    pub code: String,
}

/// `quality.publication_missed`: the first slot of a run of missed ones
/// ended without a board, as judged once every partition's fold passed
/// its end.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicationMissed {
    pub bank: BankRef,
    pub schedule: ratewire_proto::Schedule,
    /// The missed slots found, consecutive ones as one span.
    #[serde(serialize_with = "millis::one")]
    pub from: DateTime<Utc>,
    #[serde(serialize_with = "millis::one")]
    pub to: DateTime<Utc>,
}

/// `quality.spread_cap_breached`: a pair whose spread was within the cap
/// (or not quoted) on the bank's board before is over it on its newest.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpreadCapBreached {
    pub bank: BankRef,
    pub currency_code: String,
    /// `cash` or `transactional`.
    pub pair: &'static str,
    #[serde(serialize_with = "numbers::one")]
    pub buying: Decimal,
    #[serde(serialize_with = "numbers::one")]
    pub selling: Decimal,
    #[serde(serialize_with = "numbers::one")]
    pub spread_percent: Decimal,
    #[serde(serialize_with = "numbers::one")]
    pub spread_cap_percent: Decimal,
    /// The as-of of the board.
    #[serde(serialize_with = "millis::one")]
    pub updated_at: DateTime<Utc>,
    /// The event that published it.
    pub event_id: Uuid,
}

/// `webhook.test`: asked for by the webhook's owner.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookTest {
    pub webhook_id: Uuid,
}

fn field_key<S: serde::Serializer>(field: &Field, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(field.key())
}

/// A crossing's message id (its `webhook-id`, the same on every attempt):
/// from the alert and the event, so no evaluation can make it twice.
pub fn crossing_id(alert: Uuid, event: Uuid) -> String {
    digest_id(&format!("{alert}:{event}"))
}

/// A watchdog event's message id for one webhook: from the event's id
/// and the webhook, so no expansion can make it twice.
pub fn quality_message_id(event: &str, webhook: Uuid) -> String {
    digest_id(&format!("{webhook}:{event}"))
}

fn digest_id(text: &str) -> String {
    let digest = Sha256::digest(text);
    format!("msg_{}", &hex::encode(digest)[..32])
}

/// A test message's id.
pub fn test_id() -> String {
    format!("msg_{}", Uuid::new_v4().simple())
}

/// What the live stream's `alert` event carries: the message's id, then
/// the body's own fields.
pub fn stream_data(id: &str, body: &str) -> String {
    let id = serde_json::Value::from(id);
    match body.strip_prefix('{') {
        Some(fields) if fields.trim_start().starts_with('}') => format!("{{\"id\":{id}}}"),
        Some(fields) => format!("{{\"id\":{id},{fields}"),
        None => format!("{{\"id\":{id}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crossing() -> Body<ThresholdCrossed> {
        Body {
            kind: THRESHOLD_CROSSED,
            timestamp: "2026-11-20T08:00:00.5Z".parse().unwrap(),
            data: ThresholdCrossed {
                alert_id: Uuid::nil(),
                bank: BankRef {
                    id: 3,
                    name: "Bank Three".into(),
                    code: "B3".into(),
                },
                currency_code: "USD".into(),
                field: Field::CashBuying,
                condition: Condition::Above,
                threshold: "155.10".parse().unwrap(),
                previous: None,
                current: "157.00".parse().unwrap(),
                updated_at: "2026-11-20T07:00:00Z".parse().unwrap(),
                event_id: Uuid::nil(),
            },
        }
    }

    #[test]
    fn a_crossing_reads_as_documented_with_every_digit_kept() {
        let json = crossing().to_json();
        assert_eq!(
            json,
            r#"{"type":"rate.threshold_crossed","timestamp":"2026-11-20T08:00:00.500Z","data":{"alertId":"00000000-0000-0000-0000-000000000000","bank":{"id":3,"name":"Bank Three","code":"B3"},"currencyCode":"USD","field":"cashBuying","condition":"above","threshold":155.10,"previous":null,"current":157.00,"updatedAt":"2026-11-20T07:00:00.000Z","eventId":"00000000-0000-0000-0000-000000000000"}}"#
        );
    }

    #[test]
    fn a_crossing_s_id_comes_from_its_alert_and_event() {
        let (a, e) = (Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(crossing_id(a, e), crossing_id(a, e));
        assert_ne!(crossing_id(a, e), crossing_id(e, a));
        assert_eq!(crossing_id(a, e).len(), 4 + 32);
    }

    #[test]
    fn the_stream_s_data_puts_the_id_first() {
        let data = stream_data("msg_1", &crossing().to_json());
        assert!(data.starts_with(r#"{"id":"msg_1","type":"rate.threshold_crossed""#));
        let value: serde_json::Value = serde_json::from_str(&data).unwrap();
        assert_eq!(value["data"]["bank"]["id"], 3);
    }
}
