//! The JSON envelope every event travels in, and the reader that upcasts.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::event::Event;
use crate::ids::BankId;

/// An event with the metadata every consumer needs to order, de-duplicate and
/// trace it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Unique per event; a producer retry carries the same id, so consumers
    /// use it to apply an event at most once.
    pub event_id: Uuid,
    pub bank_id: BankId,
    pub occurred_at: DateTime<Utc>,
    pub event: Event,
}

impl Envelope {
    /// A new event with a fresh, time-ordered id.
    pub fn new(bank_id: BankId, occurred_at: DateTime<Utc>, event: Event) -> Self {
        Self {
            event_id: Uuid::now_v7(),
            bank_id,
            occurred_at,
            event,
        }
    }
}

/// The wire form; `payload` is decoded only once `type` and `version` are known.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    event_id: Uuid,
    #[serde(rename = "type")]
    event_type: String,
    version: u32,
    bank_id: BankId,
    occurred_at: DateTime<Utc>,
    payload: serde_json::Value,
}

/// What a reader made of one message.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Event(Envelope),
    /// A type this build does not know: skip it, with a warning.
    UnknownType {
        event_id: Uuid,
        event_type: String,
        version: u32,
    },
    /// A known type in a version newer than this build reads.
    UnsupportedVersion {
        event_id: Uuid,
        event_type: String,
        version: u32,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not a ratewire envelope: {0}")]
    Envelope(serde_json::Error),
    #[error("{event_type} v{version} payload is invalid: {source}")]
    Payload {
        event_type: String,
        version: u32,
        source: serde_json::Error,
    },
}

pub fn encode(envelope: &Envelope) -> Vec<u8> {
    let payload = match &envelope.event {
        Event::BankRegistered(e) => serde_json::to_value(e),
        Event::BankUpdated(e) => serde_json::to_value(e),
        Event::BankDeactivated(e) => serde_json::to_value(e),
        Event::BankReactivated(e) => serde_json::to_value(e),
        Event::BoardPublished(e) => serde_json::to_value(e),
    }
    .expect("event payloads are plain data and always serialize");
    let type_name = envelope.event.type_name();
    let wire = Wire {
        event_id: envelope.event_id,
        event_type: type_name.to_owned(),
        version: Event::current_version(type_name).expect("every Event variant has a version"),
        bank_id: envelope.bank_id,
        occurred_at: envelope.occurred_at,
        payload,
    };
    serde_json::to_vec(&wire).expect("the envelope always serializes")
}

/// Decodes one message, upcasting older versions to the current shape.
pub fn decode(bytes: &[u8]) -> Result<Decoded, DecodeError> {
    let wire: Wire = serde_json::from_slice(bytes).map_err(DecodeError::Envelope)?;
    let Some(current) = Event::current_version(&wire.event_type) else {
        return Ok(Decoded::UnknownType {
            event_id: wire.event_id,
            event_type: wire.event_type,
            version: wire.version,
        });
    };
    if wire.version > current || wire.version == 0 {
        return Ok(Decoded::UnsupportedVersion {
            event_id: wire.event_id,
            event_type: wire.event_type,
            version: wire.version,
        });
    }
    // Only version 1 exists today. An upcaster for version N-1 goes here, as
    // a function from the old payload `Value` to the current one.
    let payload_error = |source| DecodeError::Payload {
        event_type: wire.event_type.clone(),
        version: wire.version,
        source,
    };
    let payload = wire.payload.clone();
    let event = match wire.event_type.as_str() {
        "BankRegistered" => {
            Event::BankRegistered(serde_json::from_value(payload).map_err(payload_error)?)
        }
        "BankUpdated" => {
            Event::BankUpdated(serde_json::from_value(payload).map_err(payload_error)?)
        }
        "BankDeactivated" => {
            Event::BankDeactivated(serde_json::from_value(payload).map_err(payload_error)?)
        }
        "BankReactivated" => {
            Event::BankReactivated(serde_json::from_value(payload).map_err(payload_error)?)
        }
        "BoardPublished" => {
            Event::BoardPublished(serde_json::from_value(payload).map_err(payload_error)?)
        }
        other => unreachable!("current_version knows {other} but decode does not"),
    };
    Ok(Decoded::Event(Envelope {
        event_id: wire.event_id,
        bank_id: wire.bank_id,
        occurred_at: wire.occurred_at,
        event,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::*;
    use crate::ids::CurrencyCode;
    use rust_decimal::Decimal;
    use std::str::FromStr;

    fn bank() -> BankId {
        BankId::new(7).unwrap()
    }

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn board() -> Event {
        Event::BoardPublished(BoardPublished {
            as_of: "2026-11-23T08:00:00Z".parse().unwrap(),
            rates: vec![RateEntry {
                currency: CurrencyCode::parse("USD").unwrap(),
                cash_buying: dec("155.10"),
                cash_selling: dec("158.2"),
                transactional_buying: Some(dec("155.0")),
                transactional_selling: None,
            }],
        })
    }

    fn all_events() -> Vec<Event> {
        vec![
            Event::BankRegistered(BankRegistered {
                code: "CBE".into(),
                name: "Commercial Bank of Ethiopia".into(),
                image_url: "https://example.com/cbe.png".into(),
                social_links: vec![SocialLink {
                    platform: "x".into(),
                    url: "https://x.com/cbe".into(),
                }],
            }),
            Event::BankUpdated(BankUpdated {
                name: Some("CBE".into()),
                ..Default::default()
            }),
            Event::BankDeactivated(BankDeactivated { reason: None }),
            Event::BankReactivated(BankReactivated {}),
            board(),
        ]
    }

    #[test]
    fn every_event_round_trips_through_the_envelope() {
        for event in all_events() {
            let envelope = Envelope::new(bank(), Utc::now(), event);
            let bytes = encode(&envelope);
            assert_eq!(decode(&bytes).unwrap(), Decoded::Event(envelope));
        }
    }

    #[test]
    fn the_envelope_carries_id_type_version_bank_and_time() {
        let envelope = Envelope::new(bank(), Utc::now(), board());
        let json: serde_json::Value = serde_json::from_slice(&encode(&envelope)).unwrap();
        assert_eq!(json["eventId"], envelope.event_id.to_string());
        assert_eq!(json["type"], "BoardPublished");
        assert_eq!(json["version"], 1);
        assert_eq!(json["bankId"], 7);
        assert!(json["occurredAt"].is_string());
        assert_eq!(json["payload"]["asOf"], "2026-11-23T08:00:00Z");
    }

    #[test]
    fn money_keeps_its_published_digits_on_the_log() {
        let envelope = Envelope::new(bank(), Utc::now(), board());
        let json: serde_json::Value = serde_json::from_slice(&encode(&envelope)).unwrap();
        assert_eq!(json["payload"]["rates"][0]["cashBuying"], "155.10");
        assert!(json["payload"]["rates"][0]
            .get("transactionalSelling")
            .is_none());
    }

    #[test]
    fn unknown_fields_are_ignored_so_optional_additions_stay_compatible() {
        let envelope = Envelope::new(bank(), Utc::now(), board());
        let mut json: serde_json::Value = serde_json::from_slice(&encode(&envelope)).unwrap();
        json["payload"]["source"] = "scraper-2".into();
        json["traceId"] = "abc".into();
        let decoded = decode(&serde_json::to_vec(&json).unwrap()).unwrap();
        assert_eq!(decoded, Decoded::Event(envelope));
    }

    #[test]
    fn an_unknown_event_type_is_reported_not_an_error() {
        let bytes = br#"{"eventId":"0190b6a0-0000-7000-8000-000000000000","type":"BankMerged","version":1,"bankId":3,"occurredAt":"2026-11-23T08:00:00Z","payload":{}}"#;
        assert!(
            matches!(decode(bytes).unwrap(), Decoded::UnknownType { event_type, .. } if event_type == "BankMerged")
        );
    }

    #[test]
    fn a_newer_version_is_unsupported_not_misread() {
        let bytes = br#"{"eventId":"0190b6a0-0000-7000-8000-000000000000","type":"BoardPublished","version":2,"bankId":3,"occurredAt":"2026-11-23T08:00:00Z","payload":{"x":1}}"#;
        assert!(matches!(
            decode(bytes).unwrap(),
            Decoded::UnsupportedVersion { version: 2, .. }
        ));
    }

    #[test]
    fn garbage_and_bad_payloads_are_errors() {
        assert!(matches!(decode(b"not json"), Err(DecodeError::Envelope(_))));
        let bytes = br#"{"eventId":"0190b6a0-0000-7000-8000-000000000000","type":"BoardPublished","version":1,"bankId":3,"occurredAt":"2026-11-23T08:00:00Z","payload":{"rates":[]}}"#;
        assert!(matches!(decode(bytes), Err(DecodeError::Payload { .. })));
    }
}
