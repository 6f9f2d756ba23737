//! A board's `source`, read from its request body: every problem named
//! under `source.<field>`, a field a source does not have refused by name,
//! the rules the contract's (`ratewire_proto::source`).

use chrono::{DateTime, SubsecRound, Utc};
use ratewire_proto::source::SourceParts;
use ratewire_proto::Source;
use serde_json::value::RawValue;

use super::Problems;

const SOURCE_FIELDS: [&str; 4] = ["url", "method", "capturedAt", "sha256"];

/// A board's `source` received at `now`, or its problems added, each under
/// `source.<field>`.
pub(super) fn read(
    value: &RawValue,
    now: DateTime<Utc>,
    problems: &mut Problems,
) -> Option<Source> {
    const NOT_AN_OBJECT: &str =
        "must be an object with method and, optionally, url, capturedAt and sha256";
    if !value.get().starts_with('{') {
        problems.add("source", NOT_AN_OBJECT);
        return None;
    }
    let Ok(fields) =
        serde_json::from_str::<std::collections::BTreeMap<String, &RawValue>>(value.get())
    else {
        problems.add("source", NOT_AN_OBJECT);
        return None;
    };
    let before = problems.0.len();
    let mut text = |name: &str| -> Option<String> {
        let value = fields.get(name).filter(|v| v.get() != "null")?;
        match serde_json::from_str::<String>(value.get()) {
            Ok(text) => Some(text),
            Err(_) => {
                problems.add(format!("source.{name}"), "must be a string");
                None
            }
        }
    };
    let (url, method, sha256) = (text("url"), text("method"), text("sha256"));
    // Kept to the microsecond, as the as-of time is.
    let captured_at = text("capturedAt").map(|at| match DateTime::parse_from_rfc3339(&at) {
        Ok(t) => t
            .with_timezone(&Utc)
            .trunc_subsecs(6)
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        Err(_) => at,
    });
    for name in fields
        .keys()
        .filter(|k| !SOURCE_FIELDS.contains(&k.as_str()))
    {
        let known = SOURCE_FIELDS.join(", ");
        problems.add(
            format!("source.{name}"),
            format!("is not a field of a source ({known})"),
        );
    }
    let checked = SourceParts {
        url: url.as_deref(),
        method: method.as_deref(),
        captured_at: captured_at.as_deref(),
        sha256: sha256.as_deref(),
    }
    .check_received(now);
    let source = match checked {
        Ok(source) => Some(source),
        Err(violations) => {
            for v in violations.into_iter().map(|v| v.within("source")) {
                // A value of the wrong type was named as such already.
                if !problems.0.contains_key(&v.field) {
                    problems.broken(v);
                }
            }
            None
        }
    };
    source.filter(|_| problems.0.len() == before)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{now, problems};
    use super::super::{default_horizon, parse, parse_push};

    const USD: &str = r#"{"currency":"USD","cashBuying":1,"cashSelling":2}"#;

    #[test]
    fn a_board_may_say_where_its_numbers_came_from_and_why() {
        let body = format!(
            r#"{{"rates":[{USD}],"reason":"a typo: 1550 for 155.0","source":{{"url":"https://bank.example/rates","method":"page","capturedAt":"2026-11-23T10:59:00.1234567+03:00","sha256":"{}"}}}}"#,
            "AB".repeat(32)
        );
        let board = parse(body.as_bytes(), now()).unwrap();
        let source = board.source().unwrap();
        assert_eq!(source.method().as_str(), "page");
        assert_eq!(source.url(), Some("https://bank.example/rates"));
        assert_eq!(
            source.captured_at(),
            Some("2026-11-23T07:59:00.123456Z".parse().unwrap()),
            "kept to the microsecond, in UTC"
        );
        assert_eq!(source.sha256(), Some("ab".repeat(32).as_str()));
        assert_eq!(board.reason(), Some("a typo: 1550 for 155.0"));
        let plain = parse(
            format!(r#"{{"rates":[{USD}],"source":null,"reason":null}}"#).as_bytes(),
            now(),
        )
        .unwrap();
        assert_eq!((plain.source(), plain.reason()), (None, None));
    }

    #[test]
    fn every_problem_of_a_source_and_reason_is_named_under_its_field_at_once() {
        let errors = problems(&format!(
            r#"{{"rates":[{USD}],"reason":"{}","source":{{"url":"ftp://bank.example","method":"scrape","capturedAt":"2026-11-23T08:05:01Z","sha256":"abc","robot":1}}}}"#,
            "x".repeat(501)
        ));
        assert_eq!(
            errors.keys().collect::<Vec<_>>(),
            [
                "reason",
                "source.capturedAt",
                "source.method",
                "source.robot",
                "source.sha256",
                "source.url"
            ]
        );
        assert_eq!(errors["reason"], ["must be at most 500 characters"]);
        assert_eq!(
            errors["source.method"],
            ["must be one of api, page, file, manual"]
        );
        assert_eq!(
            errors["source.capturedAt"],
            ["must not be more than 5 minutes after the board was received"]
        );
        assert_eq!(
            errors["source.robot"],
            ["is not a field of a source (url, method, capturedAt, sha256)"]
        );
        let errors = problems(&format!(
            r#"{{"rates":[{USD}],"source":{{"url":"https://bank.example"}}}}"#
        ));
        assert_eq!(errors["source.method"], ["is required"]);
        let errors = problems(&format!(
            r#"{{"rates":[{USD}],"source":{{"method":7,"capturedAt":"soon"}},"reason":5}}"#
        ));
        assert_eq!(errors["source.method"], ["must be a string"]);
        assert_eq!(errors["reason"], ["must be a string"]);
        assert!(errors["source.capturedAt"][0].contains("RFC 3339"));
        let errors = problems(&format!(r#"{{"rates":[{USD}],"source":"scraper"}}"#));
        assert!(errors["source"][0].starts_with("must be an object"));
    }

    #[test]
    fn another_source_or_reason_is_another_push_and_a_digests_case_is_not() {
        let fingerprint = |extra: &str| {
            let body = format!(r#"{{"asOf":"2026-11-23T07:00:00Z","rates":[{USD}]{extra}}}"#);
            parse_push(body.as_bytes(), now(), default_horizon())
                .unwrap()
                .fingerprint()
        };
        let plain = fingerprint("");
        assert_eq!(fingerprint(r#","source":null,"reason":null"#), plain);
        let sha = "ab".repeat(32);
        let upper = sha.to_ascii_uppercase();
        let sourced = fingerprint(&format!(
            r#","source":{{"method":"file","sha256":"{sha}"}}"#
        ));
        assert_ne!(sourced, plain);
        assert_eq!(
            fingerprint(&format!(
                r#","source":{{"sha256":"{upper}","method":"file"}}"#
            )),
            sourced
        );
        assert_ne!(fingerprint(r#","source":{"method":"api"}"#), plain);
        assert_ne!(fingerprint(r#","reason":"a typo""#), plain);
    }
}
