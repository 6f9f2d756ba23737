//! A board's source and reason on the log: optional additions to
//! `BoardPublished` version 1 (the compatibility rule in the crate docs).
//! Boards written before them read as they did; boards with them round-trip;
//! a broken one is refused with the rule it breaks, whoever wrote it.

use ratewire_proto::{decode, encode, DecodeError, Decoded, Event, Method, Rule};

const USD: &str = r#"{"currency":"USD","cashBuying":"155.1","cashSelling":"158"}"#;

/// A board's envelope as any producer might write it.
fn message(occurred_at: &str, payload: &str) -> Vec<u8> {
    format!(
        r#"{{"eventId":"0190b6a0-0000-7000-8000-000000000000","type":"BoardPublished","version":1,"bankId":3,"occurredAt":"{occurred_at}","payload":{payload}}}"#
    )
    .into_bytes()
}

fn rule_of(result: Result<Decoded, DecodeError>) -> Rule {
    result.expect_err("the message breaks a rule").rule()
}

#[test]
fn a_board_written_before_source_and_reason_existed_decodes_and_encodes_as_it_was() {
    let payload = format!(r#"{{"asOf":"2026-11-23T07:00:00Z","rates":[{USD}]}}"#);
    let bytes = message("2026-11-23T08:00:00Z", &payload);
    let Decoded::Event(envelope) = decode(&bytes).unwrap() else {
        panic!("a board");
    };
    let Event::BoardPublished(board) = &envelope.event else {
        panic!("a board");
    };
    assert_eq!((board.source(), board.reason()), (None, None));
    let json: serde_json::Value = serde_json::from_slice(&encode(&envelope)).unwrap();
    let keys: Vec<&String> = json["payload"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["asOf", "rates"],
        "nothing new on a board without them"
    );
}

fn board_with_source(source: &str, reason: Option<&str>) -> String {
    let reason = reason.map_or(String::new(), |r| {
        format!(r#","reason":{}"#, serde_json::Value::from(r))
    });
    format!(r#"{{"asOf":"2026-11-23T07:00:00Z","rates":[{USD}],"source":{source}{reason}}}"#)
}

#[test]
fn a_board_with_its_source_and_reason_round_trips() {
    let sha = "0f".repeat(32);
    let payload = board_with_source(
        &format!(
            r#"{{"url":"https://bank.example/rates","method":"api","capturedAt":"2026-11-23T07:59:00Z","sha256":"{sha}"}}"#
        ),
        Some("a typo: 1550 for 155.0"),
    );
    let bytes = message("2026-11-23T08:00:00Z", &payload);
    let Decoded::Event(envelope) = decode(&bytes).unwrap() else {
        panic!("a board");
    };
    let Event::BoardPublished(board) = &envelope.event else {
        panic!("a board");
    };
    let source = board.source().expect("its source");
    assert_eq!(source.method(), Method::Api);
    assert_eq!(source.url(), Some("https://bank.example/rates"));
    assert_eq!(
        source.captured_at(),
        Some("2026-11-23T07:59:00Z".parse().unwrap())
    );
    assert_eq!(source.sha256(), Some(sha.as_str()));
    assert_eq!(board.reason(), Some("a typo: 1550 for 155.0"));
    let again = encode(&envelope);
    assert_eq!(decode(&again).unwrap(), Decoded::Event(envelope));
    let json: serde_json::Value = serde_json::from_slice(&again).unwrap();
    assert_eq!(json["payload"]["source"]["method"], "api");
    assert_eq!(json["payload"]["reason"], "a typo: 1550 for 155.0");
}

#[test]
fn a_field_of_a_source_this_build_does_not_know_is_ignored() {
    let payload = board_with_source(r#"{"method":"page","robot":"v2"}"#, None);
    let bytes = message("2026-11-23T08:00:00Z", &payload);
    assert!(matches!(decode(&bytes).unwrap(), Decoded::Event(_)));
}

#[test]
fn a_source_or_reason_that_breaks_its_rule_is_refused_on_the_log_too() {
    let long = "x".repeat(501);
    for (source, reason, rule, field) in [
        (
            r#"{"url":"https://bank.example"}"#,
            None,
            Rule::Source,
            "source.method",
        ),
        (
            r#"{"method":"scrape"}"#,
            None,
            Rule::Source,
            "source.method",
        ),
        (
            r#"{"method":"page","url":"ftp://bank.example"}"#,
            None,
            Rule::Source,
            "source.url",
        ),
        (
            r#"{"method":"file","sha256":"abc"}"#,
            None,
            Rule::Source,
            "source.sha256",
        ),
        (
            r#"{"method":"api","capturedAt":"soon"}"#,
            None,
            Rule::Source,
            "source.capturedAt",
        ),
        // Captured after the board was received (plus the skew).
        (
            r#"{"method":"api","capturedAt":"2026-11-23T08:05:01Z"}"#,
            None,
            Rule::Source,
            "source.capturedAt",
        ),
        (
            r#"{"method":"api"}"#,
            Some(long.as_str()),
            Rule::Reason,
            "reason",
        ),
        (
            r#"{"method":"api"}"#,
            Some("a\u{0}b"),
            Rule::Reason,
            "reason",
        ),
    ] {
        let bytes = message("2026-11-23T08:00:00Z", &board_with_source(source, reason));
        match decode(&bytes) {
            Err(DecodeError::Violation {
                event_id: Some(_),
                violation,
            }) => assert_eq!((violation.rule, violation.field.as_str()), (rule, field)),
            other => panic!("{source} {reason:?}: {other:?}"),
        }
    }
    // Not an object at all: the payload has not its event's shape.
    let bytes = message(
        "2026-11-23T08:00:00Z",
        &board_with_source("\"scraper\"", None),
    );
    assert_eq!(rule_of(decode(&bytes)), Rule::Payload);
}
