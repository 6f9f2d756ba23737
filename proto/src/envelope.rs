//! The JSON envelope every event travels in, and the reader that upcasts.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::board::WireBoard;
use crate::event::{BoardRetracted, Event};
use crate::ids::BankId;
use crate::reference::{WireReferenceBoard, REFERENCE_SUBJECT};
use crate::rules::{earliest_as_of, Rule, Violation, MAX_FUTURE_SKEW};
use crate::topic::partition_key;

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

    /// A reference board's event, under the reserved subject.
    pub fn reference(
        occurred_at: DateTime<Utc>,
        board: crate::reference::ReferenceBoardPublished,
    ) -> Self {
        Self::new(
            REFERENCE_SUBJECT,
            occurred_at,
            Event::ReferenceBoardPublished(board),
        )
    }
}

/// The wire form; `payload` is decoded only once `type` and `version` are
/// known. Readers keep it as the raw text, so it is parsed once, straight
/// into its event type (a `Value` in between cost a second pass and its
/// allocations, a good part of the fold's decoding time).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire<P> {
    event_id: Uuid,
    #[serde(rename = "type")]
    event_type: String,
    version: u32,
    bank_id: BankId,
    occurred_at: DateTime<Utc>,
    payload: P,
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
    /// A well-formed message that breaks a rule of the contract.
    #[error("breaks the rule '{}': {violation}", violation.rule)]
    Violation {
        event_id: Option<Uuid>,
        violation: Violation,
    },
}

impl DecodeError {
    /// The rule broken (a malformed envelope or payload breaks the rule of
    /// its shape).
    pub fn rule(&self) -> Rule {
        match self {
            DecodeError::Envelope(_) => Rule::Envelope,
            DecodeError::Payload { .. } => Rule::Payload,
            DecodeError::Violation { violation, .. } => violation.rule,
        }
    }

    /// The event's id, when the message got as far as naming one.
    pub fn event_id(&self) -> Option<Uuid> {
        match self {
            DecodeError::Violation { event_id, .. } => *event_id,
            _ => None,
        }
    }

    fn violation(event_id: Uuid, violation: Violation) -> Self {
        DecodeError::Violation {
            event_id: Some(event_id),
            violation,
        }
    }
}

/// One message as the log holds it: what besides the payload the rules
/// need.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    /// The partitioning key: a bank's events are ordered by it.
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
    /// When the broker says the message was produced or appended.
    pub timestamp: Option<DateTime<Utc>>,
}

/// Decodes one message of the log ([`decode`]) and checks it against the
/// message it came in: the key must be the envelope's bank id (the key is
/// what orders a bank's events: another key would put them on another
/// partition, out of order), and `occurredAt` must not be more than
/// [`MAX_FUTURE_SKEW`] after the message's timestamp (a message cannot
/// have been received after it was written; the timestamp stays with the
/// message, so a replay decides the same).
pub fn decode_message(message: Message<'_>) -> Result<Decoded, DecodeError> {
    let decoded = decode(message.payload)?;
    let Decoded::Event(envelope) = &decoded else {
        return Ok(decoded);
    };
    let expected = partition_key(envelope.bank_id);
    if message.key != Some(expected.as_bytes()) {
        let found = message.key.map_or_else(
            || "no key".to_owned(),
            |key| format!("key {:?}", String::from_utf8_lossy(key)),
        );
        return Err(DecodeError::violation(
            envelope.event_id,
            Violation::new(
                Rule::Key,
                "key",
                format!(
                    "must be the envelope's bankId {expected} (found {found}): a bank's events are ordered by it"
                ),
            ),
        ));
    }
    if let Some(timestamp) = message.timestamp {
        if envelope.occurred_at > timestamp + MAX_FUTURE_SKEW {
            return Err(DecodeError::violation(
                envelope.event_id,
                Violation::new(
                    Rule::OccurredAt,
                    "occurredAt",
                    format!(
                        "must not be more than {} minutes after the message's timestamp ({})",
                        MAX_FUTURE_SKEW.num_minutes(),
                        timestamp.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                    ),
                ),
            ));
        }
    }
    Ok(decoded)
}

pub fn encode(envelope: &Envelope) -> Vec<u8> {
    let payload = match &envelope.event {
        Event::BankRegistered(e) => serde_json::to_value(e),
        Event::BankUpdated(e) => serde_json::to_value(e),
        Event::BankDeactivated(e) => serde_json::to_value(e),
        Event::BankReactivated(e) => serde_json::to_value(e),
        Event::BoardPublished(e) => serde_json::to_value(e),
        Event::BoardRetracted(e) => serde_json::to_value(e),
        Event::ReferenceBoardPublished(e) => serde_json::to_value(e),
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

/// The `type` of an envelope, read without decoding its payload (which
/// is skipped, not parsed into values).
pub fn event_type(bytes: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Kind {
        #[serde(rename = "type")]
        event_type: String,
    }
    serde_json::from_slice::<Kind>(bytes)
        .ok()
        .map(|k| k.event_type)
}

/// Decodes one message's payload, upcasting older versions to the current
/// shape, and checks every rule the payload and its envelope can tell
/// (see [`crate::rules`]); [`decode_message`] adds the rules of the message
/// around it.
pub fn decode(bytes: &[u8]) -> Result<Decoded, DecodeError> {
    let wire: Wire<&serde_json::value::RawValue> =
        serde_json::from_slice(bytes).map_err(DecodeError::Envelope)?;
    if wire.version == 0 {
        return Err(DecodeError::violation(
            wire.event_id,
            Violation::new(
                Rule::Version,
                "version",
                "must be 1 or more: version 0 does not exist",
            ),
        ));
    }
    let Some(current) = Event::current_version(&wire.event_type) else {
        return Ok(Decoded::UnknownType {
            event_id: wire.event_id,
            event_type: wire.event_type,
            version: wire.version,
        });
    };
    if wire.version > current {
        return Ok(Decoded::UnsupportedVersion {
            event_id: wire.event_id,
            event_type: wire.event_type,
            version: wire.version,
        });
    }
    if wire.occurred_at < earliest_as_of() {
        return Err(DecodeError::violation(
            wire.event_id,
            Violation::new(
                Rule::OccurredAt,
                "occurredAt",
                format!(
                    "must not be before {}",
                    earliest_as_of().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ),
            ),
        ));
    }
    // Only version 1 exists today. An upcaster for version N-1 goes here, as
    // a function from the old payload (parsed into a `Value`) to the current one.
    let payload_error = |source| DecodeError::Payload {
        event_type: wire.event_type.clone(),
        version: wire.version,
        source,
    };
    let broken = |violation: Violation| DecodeError::violation(wire.event_id, violation);
    let payload = wire.payload.get();
    let event = match wire.event_type.as_str() {
        "BankRegistered" => {
            Event::BankRegistered(serde_json::from_str(payload).map_err(payload_error)?)
        }
        "BankUpdated" => Event::BankUpdated(serde_json::from_str(payload).map_err(payload_error)?),
        "BankDeactivated" => {
            Event::BankDeactivated(serde_json::from_str(payload).map_err(payload_error)?)
        }
        "BankReactivated" => {
            Event::BankReactivated(serde_json::from_str(payload).map_err(payload_error)?)
        }
        "BoardPublished" => {
            // Read in its wire shape first, so a broken rule is named as
            // such and not as a malformed payload.
            let board = serde_json::from_str::<WireBoard>(payload)
                .map_err(payload_error)?
                .check()
                .map_err(broken)?;
            board.check_received(wire.occurred_at).map_err(broken)?;
            Event::BoardPublished(board)
        }
        "BoardRetracted" => {
            let retraction: BoardRetracted =
                serde_json::from_str(payload).map_err(payload_error)?;
            retraction.check().map_err(broken)?;
            Event::BoardRetracted(retraction)
        }
        "ReferenceBoardPublished" => {
            let board = serde_json::from_str::<WireReferenceBoard>(payload)
                .map_err(payload_error)?
                .check()
                .map_err(broken)?;
            board.check_received(wire.occurred_at).map_err(broken)?;
            Event::ReferenceBoardPublished(board)
        }
        other => unreachable!("current_version knows {other} but decode does not"),
    };
    // Reference boards, and only they, travel under the reserved subject.
    let reference = matches!(event, Event::ReferenceBoardPublished(_));
    if reference != (wire.bank_id == REFERENCE_SUBJECT) {
        let message = if reference {
            format!("must be {REFERENCE_SUBJECT} on a reference board")
        } else {
            format!("{REFERENCE_SUBJECT} is reserved for reference boards")
        };
        return Err(broken(Violation::new(Rule::Key, "bankId", message)));
    }
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
    use crate::board::{Pair, Rate, RateEntry};
    use crate::event::*;
    use crate::ids::CurrencyCode;

    fn bank() -> BankId {
        BankId::new(7).unwrap()
    }

    fn rate(s: &str) -> Rate {
        Rate::parse(s).unwrap()
    }

    fn board_with(transactional: Option<Pair>) -> Event {
        let cash = Pair::new("cash", rate("155.10"), rate("158.2")).unwrap();
        let usd = RateEntry::new(CurrencyCode::parse("USD").unwrap(), cash, transactional);
        Event::BoardPublished(
            BoardPublished::new("2026-11-23T08:00:00Z".parse().unwrap(), vec![usd]).unwrap(),
        )
    }

    fn board() -> Event {
        board_with(Some(
            Pair::new("transactional", rate("155.0"), rate("158.0")).unwrap(),
        ))
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
                schedule: None,
            }),
            Event::BankUpdated(BankUpdated {
                name: Some("CBE".into()),
                ..Default::default()
            }),
            Event::BankDeactivated(BankDeactivated { reason: None }),
            Event::BankReactivated(BankReactivated {}),
            board(),
            Event::BoardRetracted(BoardRetracted {
                board_event_id: Uuid::now_v7(),
                reason: Some("a typo: 1550 for 155.0".into()),
            }),
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

    fn reference_board() -> crate::reference::ReferenceBoardPublished {
        let wire = crate::reference::WireReferenceBoard {
            source: "NBE".into(),
            date: "2026-05-18".parse().unwrap(),
            rates: vec![crate::reference::WireReferenceEntry {
                currency: "USD".into(),
                buying: "157.227".into(),
                selling: "158.7993".into(),
                weighted_average: "157.227".into(),
            }],
        };
        wire.check().unwrap()
    }

    #[test]
    fn a_reference_board_round_trips_under_the_reserved_subject_only() {
        let envelope =
            Envelope::reference("2026-05-18T09:00:00Z".parse().unwrap(), reference_board());
        let bytes = encode(&envelope);
        assert_eq!(decode(&bytes).unwrap(), Decoded::Event(envelope.clone()));
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(json["bankId"], 9_007_199_254_740_991_i64);
        assert_eq!(json["payload"]["rates"][0]["weightedAverage"], "157.227");

        let elsewhere = Envelope {
            bank_id: bank(),
            ..envelope.clone()
        };
        assert_eq!(rule_of(decode(&encode(&elsewhere))), Rule::Key);
        let bank_event = Envelope::new(REFERENCE_SUBJECT, Utc::now(), board());
        assert_eq!(rule_of(decode(&encode(&bank_event))), Rule::Key);
        let early = Envelope {
            occurred_at: "2026-05-17T12:00:00Z".parse().unwrap(),
            ..envelope
        };
        assert_eq!(rule_of(decode(&encode(&early))), Rule::AsOf);
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
        let envelope = Envelope::new(bank(), Utc::now(), board_with(None));
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
        json["payload"]["publishedBy"] = "scraper-2".into();
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

    /// A board's envelope as a rogue producer might write it.
    fn message(bank: i64, version: u32, occurred_at: &str, payload: &str) -> Vec<u8> {
        format!(
            r#"{{"eventId":"0190b6a0-0000-7000-8000-000000000000","type":"BoardPublished","version":{version},"bankId":{bank},"occurredAt":"{occurred_at}","payload":{payload}}}"#
        )
        .into_bytes()
    }

    fn rule_of(result: Result<Decoded, DecodeError>) -> Rule {
        result.expect_err("the message breaks a rule").rule()
    }

    const USD: &str = r#"{"currency":"USD","cashBuying":"155.1","cashSelling":"158"}"#;

    #[test]
    fn a_board_dated_far_after_it_was_received_breaks_the_as_of_rule() {
        let bytes = message(
            3,
            1,
            "2026-11-23T08:00:00Z",
            &format!(r#"{{"asOf":"9999-01-01T00:00:00Z","rates":[{USD}]}}"#),
        );
        let error = decode(&bytes).unwrap_err();
        assert_eq!(error.rule(), Rule::AsOf);
        assert!(error.event_id().is_some());
        assert_eq!(
            error.to_string(),
            "breaks the rule 'as-of': asOf must not be more than 5 minutes in the future"
        );
    }

    #[test]
    fn rates_a_publisher_would_be_refused_are_refused_on_the_log_too() {
        for (entry, rule) in [
            (
                r#"{"currency":"EUR","cashBuying":"-5","cashSelling":"0"}"#,
                Rule::Rate,
            ),
            (
                r#"{"currency":"EUR","cashBuying":"99999999","cashSelling":"1"}"#,
                Rule::SellingBelowBuying,
            ),
            (
                r#"{"currency":"QQQ","cashBuying":"1","cashSelling":"2"}"#,
                Rule::Currency,
            ),
        ] {
            let bytes = message(
                3,
                1,
                "2026-11-23T08:00:00Z",
                &format!(r#"{{"asOf":"2026-11-23T07:00:00Z","rates":[{entry}]}}"#),
            );
            assert_eq!(rule_of(decode(&bytes)), rule, "{entry}");
        }
    }

    #[test]
    fn version_zero_does_not_exist() {
        let bytes = message(3, 0, "2026-11-23T08:00:00Z", "{}");
        let error = decode(&bytes).unwrap_err();
        assert_eq!(error.rule(), Rule::Version);
        assert!(!error.to_string().contains("newer"), "{error}");
    }

    #[test]
    fn the_key_must_be_the_envelopes_bank() {
        let bytes = message(
            3,
            1,
            "2026-11-23T08:00:00Z",
            &format!(r#"{{"asOf":"2026-11-23T07:00:00Z","rates":[{USD}]}}"#),
        );
        let read = |key: Option<&[u8]>| {
            decode_message(Message {
                key,
                payload: &bytes,
                timestamp: None,
            })
        };
        assert!(read(Some(b"3")).is_ok());
        assert_eq!(rule_of(read(Some(b"4"))), Rule::Key);
        assert_eq!(rule_of(read(None)), Rule::Key);
    }

    #[test]
    fn an_event_is_not_received_after_its_message_was_written() {
        let payload = format!(r#"{{"asOf":"9999-01-01T00:00:00Z","rates":[{USD}]}}"#);
        let bytes = message(3, 1, "9999-01-01T00:00:00Z", &payload);
        let read = |timestamp: &str| {
            decode_message(Message {
                key: Some(b"3"),
                payload: &bytes,
                timestamp: Some(timestamp.parse().unwrap()),
            })
        };
        assert_eq!(rule_of(read("2026-11-23T08:00:00Z")), Rule::OccurredAt);
        let old = message(3, 1, "1970-01-01T00:00:00Z", "{}");
        assert_eq!(rule_of(decode(&old)), Rule::OccurredAt);
    }
}
