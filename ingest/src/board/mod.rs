//! Turns a publisher's request body into a valid board, or into the full
//! list of what is wrong with it.
//!
//! The rules are the contract's (`ratewire_proto::rules`): this module reads
//! the body and hands each part to the proto type that holds it, so what
//! ingest accepts is exactly what the projector applies. Numbers are read
//! from their JSON text, not through `f64`, so a published 155.10 reaches
//! the log as exactly 155.10.

use chrono::{DateTime, SubsecRound, Utc};
use ratewire_proto::board::{check_as_of, check_entries, check_received, EntryParts};
use ratewire_proto::rules::{check_reason, earliest_as_of};
use ratewire_proto::{BoardPublished, CurrencyCode, RateEntry, Violation};
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::error::FieldErrors;

mod source;

/// The earliest as-of time accepted unless configured otherwise: the
/// contract's horizon. A deployment may set a later one, never an earlier.
pub fn default_horizon() -> DateTime<Utc> {
    earliest_as_of()
}

#[derive(Deserialize)]
struct RawBoard<'a> {
    #[serde(rename = "asOf", borrow, default)]
    as_of: Option<&'a RawValue>,
    #[serde(borrow, default)]
    rates: Option<&'a RawValue>,
    #[serde(borrow, default)]
    source: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reason: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RawEntry<'a> {
    #[serde(borrow, default)]
    currency: Option<&'a RawValue>,
    #[serde(rename = "cashBuying", borrow, default)]
    cash_buying: Option<&'a RawValue>,
    #[serde(rename = "cashSelling", borrow, default)]
    cash_selling: Option<&'a RawValue>,
    #[serde(rename = "transactionalBuying", borrow, default)]
    transactional_buying: Option<&'a RawValue>,
    #[serde(rename = "transactionalSelling", borrow, default)]
    transactional_selling: Option<&'a RawValue>,
}

struct Problems(FieldErrors);

/// The fields of a board, and of one of its rate entries.
const BOARD_FIELDS: [&str; 4] = ["asOf", "rates", "source", "reason"];
const ENTRY_FIELDS: [&str; 5] = [
    "currency",
    "cashBuying",
    "cashSelling",
    "transactionalBuying",
    "transactionalSelling",
];

/// The names in the JSON object `text` that are not `known` (a misspelt
/// field would otherwise be ignored, and its value lost without a word).
fn unknown_fields(text: &str, known: &[&str]) -> Vec<String> {
    serde_json::from_str::<std::collections::BTreeMap<String, serde::de::IgnoredAny>>(text)
        .map(|fields| {
            fields
                .into_keys()
                .filter(|name| !known.contains(&name.as_str()))
                .collect()
        })
        .unwrap_or_default()
}

impl Problems {
    fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.entry(field.into()).or_default().push(message.into());
    }

    fn broken(&mut self, violation: Violation) {
        self.add(violation.field, violation.message);
    }
}

/// Parses and checks a board body received at `now`, with as-of times
/// from the default horizon on (see [`parse_since`]).
pub fn parse(body: &[u8], now: DateTime<Utc>) -> Result<BoardPublished, FieldErrors> {
    parse_since(body, now, default_horizon())
}

/// Parses and checks a board body received at `now`; its as-of time must
/// lie between `horizon` and 5 minutes after `now`. The as-of time is kept
/// to the microsecond, the precision history is stored with, so two boards
/// never collide in storage while differing on the log.
pub fn parse_since(
    body: &[u8],
    now: DateTime<Utc>,
    horizon: DateTime<Utc>,
) -> Result<BoardPublished, FieldErrors> {
    parse_push(body, now, horizon).map(|push| push.board)
}

/// A push's board, and what its publisher said of it.
#[derive(Debug, Clone)]
pub struct Push {
    pub board: BoardPublished,
    /// Whether the body gave the as-of time (else it is the receipt time).
    pub as_of_given: bool,
}

impl Push {
    /// What the publisher sent, whatever way it was written: the same for
    /// two bodies that say the same board (other whitespace, field or
    /// entry order, a currency's case, `asOf` in another offset, `null` for
    /// an absent `asOf`, `source` or `reason`, a digest's case), another for
    /// other values or digits (`155.10` is not `155.1`), another source or
    /// reason. A retry under one `Idempotency-Key` is compared by it.
    pub fn fingerprint(&self) -> String {
        let mut rates: Vec<&RateEntry> = self.board.rates().iter().collect();
        rates.sort_by_key(|rate| rate.currency());
        let as_of = self.as_of_given.then(|| {
            self.board
                .as_of()
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        });
        let mut said = serde_json::json!({"asOf": as_of, "rates": rates});
        // Absent, they leave the fingerprint of a board as it was before
        // boards had them, so a key claimed then still matches.
        if let Some(source) = self.board.source() {
            said["source"] = serde_json::to_value(source).expect("a source serializes");
        }
        if let Some(reason) = self.board.reason() {
            said["reason"] = reason.into();
        }
        hex::encode(Sha256::digest(said.to_string()))
    }
}

/// [`parse_since`], telling also whether the body gave its as-of time.
pub fn parse_push(
    body: &[u8],
    now: DateTime<Utc>,
    horizon: DateTime<Utc>,
) -> Result<Push, FieldErrors> {
    let now = now.trunc_subsecs(6);
    let mut problems = Problems(FieldErrors::new());
    // serde would also read a struct from an array; a board is an object.
    let is_object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let parsed = if is_object {
        serde_json::from_slice::<RawBoard<'_>>(body).map_err(|e| e.to_string())
    } else {
        Err("not an object".into())
    };
    let raw = match parsed {
        Ok(raw) => raw,
        Err(e) => {
            problems.add(
                "body",
                format!("must be a JSON object with asOf and rates: {e}"),
            );
            return Err(problems.0);
        }
    };
    let text = std::str::from_utf8(body).unwrap_or_default();
    for name in unknown_fields(text, &BOARD_FIELDS) {
        let known = BOARD_FIELDS.join(", ");
        problems.add(name, format!("is not a field of a board ({known})"));
    }

    let given_as_of = raw.as_of.filter(|v| v.get() != "null");
    let as_of_given = given_as_of.is_some();
    let as_of = match given_as_of {
        None => Some(now),
        Some(value) => match serde_json::from_str::<String>(value.get())
            .ok()
            .and_then(|s| DateTime::parse_from_rfc3339(&s).ok())
        {
            Some(t) => {
                let t = t.with_timezone(&Utc).trunc_subsecs(6);
                let before_horizon = if t < horizon && check_as_of(t).is_ok() {
                    // A horizon this deployment set later than the contract's.
                    Err(format!(
                        "must not be before {}",
                        horizon.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    ))
                } else {
                    check_as_of(t)
                        .and_then(|()| check_received(t, now))
                        .map_err(|v| v.message)
                };
                match before_horizon {
                    Ok(()) => Some(t),
                    Err(message) => {
                        problems.add("asOf", message);
                        None
                    }
                }
            }
            None => {
                problems.add(
                    "asOf",
                    "must be an RFC 3339 timestamp such as 2026-11-23T08:00:00Z",
                );
                None
            }
        },
    };

    let mut rates = Vec::new();
    match raw
        .rates
        .map(|r| serde_json::from_str::<Vec<&RawValue>>(r.get()))
    {
        None => problems.add("rates", "is required"),
        Some(Err(_)) => problems.add("rates", "must be an array of rate entries"),
        Some(Ok(entries)) => {
            let parsed: Vec<Parsed> = entries.iter().map(|entry| read_entry(entry)).collect();
            for v in check_entries(parsed.iter().map(|p| p.currency)) {
                problems.broken(v);
            }
            for (i, entry) in parsed.into_iter().enumerate() {
                match entry.result {
                    Ok(rate) => rates.push(rate),
                    Err(entry_problems) => {
                        for (field, message) in entry_problems {
                            let field = if field.is_empty() {
                                format!("rates[{i}]")
                            } else {
                                format!("rates[{i}].{field}")
                            };
                            problems.add(field, message);
                        }
                    }
                }
            }
        }
    }

    let source = raw
        .source
        .filter(|v| v.get() != "null")
        .and_then(|value| source::read(value, now, &mut problems));
    let reason = match raw.reason.filter(|v| v.get() != "null") {
        None => None,
        Some(value) => match serde_json::from_str::<String>(value.get()) {
            Ok(reason) => match check_reason(&reason) {
                Ok(()) => Some(reason),
                Err(message) => {
                    problems.add("reason", message);
                    None
                }
            },
            Err(_) => {
                problems.add("reason", "must be a string");
                None
            }
        },
    };

    let Some(as_of) = as_of.filter(|_| problems.0.is_empty()) else {
        return Err(problems.0);
    };
    // Every rule was checked above, part by part; the contract's type
    // checks them again as a whole.
    let board = BoardPublished::new(as_of, rates).map_err(|violations| {
        for v in violations {
            problems.broken(v);
        }
        problems.0.clone()
    })?;
    let board = match source {
        Some(source) => board.with_source(source),
        None => board,
    };
    let board = match reason {
        Some(reason) => board.with_reason(reason).map_err(|v| {
            problems.broken(v);
            problems.0.clone()
        })?,
        None => board,
    };
    Ok(Push { board, as_of_given })
}

/// One entry as read: its currency when readable (for the duplicates
/// rule), and the entry or its problems (fields relative to the entry).
struct Parsed {
    currency: Option<CurrencyCode>,
    result: Result<RateEntry, Vec<(String, String)>>,
}

fn read_entry<'a>(entry: &'a RawValue) -> Parsed {
    let Ok(raw) = serde_json::from_str::<RawEntry<'_>>(entry.get()) else {
        return Parsed {
            currency: None,
            result: Err(vec![(String::new(), "must be an object".into())]),
        };
    };
    let mut problems: Vec<(String, String)> = unknown_fields(entry.get(), &ENTRY_FIELDS)
        .into_iter()
        .map(|name| {
            let known = ENTRY_FIELDS.join(", ");
            (name, format!("is not a field of a rate entry ({known})"))
        })
        .collect();
    let currency = match raw
        .currency
        .map(|c| serde_json::from_str::<String>(c.get()))
    {
        // Reported by the entry's check.
        None => None,
        Some(Err(_)) => {
            problems.push(("currency".into(), "must be a string".into()));
            None
        }
        Some(Ok(code)) => Some(code),
    };
    // The number's own text: the contract's rate reads it exactly.
    let amount =
        |value: Option<&'a RawValue>| value.filter(|v| v.get() != "null").map(RawValue::get);
    let parts = EntryParts {
        currency: currency.as_deref(),
        cash_buying: amount(raw.cash_buying),
        cash_selling: amount(raw.cash_selling),
        transactional_buying: amount(raw.transactional_buying),
        transactional_selling: amount(raw.transactional_selling),
    };
    let result = match parts.check() {
        Ok(rate) if problems.is_empty() => Ok(rate),
        Ok(_) => Err(problems),
        Err(violations) => {
            for v in violations {
                // A currency that is not a string was reported as such.
                if !problems.iter().any(|(field, _)| *field == v.field) {
                    problems.push((v.field, v.message));
                }
            }
            Err(problems)
        }
    };
    Parsed {
        currency: parts
            .currency
            .and_then(|code| CurrencyCode::parse(code).ok()),
        result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When the boards of these tests are received.
    pub(super) fn now() -> DateTime<Utc> {
        "2026-11-23T08:00:00Z".parse().unwrap()
    }

    pub(super) fn problems(body: &str) -> FieldErrors {
        parse(body.as_bytes(), now()).expect_err("the board should be rejected")
    }

    #[test]
    fn unknown_fields_are_refused_each_by_name() {
        let errors = problems(
            r#"{"asof":"2026-11-19T00:00:00Z","rates":[{"currency":"USD","cashBuying":1,"cashSelling":2,"transactionalbuying":3}],"note":1}"#,
        );
        assert_eq!(
            errors.keys().collect::<Vec<_>>(),
            ["asof", "note", "rates[0].transactionalbuying"]
        );
    }

    #[test]
    fn as_of_times_before_the_horizon_are_refused() {
        let errors = problems(
            r#"{"asOf":"0001-01-01T00:00:00Z","rates":[{"currency":"USD","cashBuying":1,"cashSelling":2}]}"#,
        );
        assert_eq!(errors["asOf"], ["must not be before 1990-01-01T00:00:00Z"]);
        let later = parse_since(
            br#"{"asOf":"2000-01-01T00:00:00Z","rates":[{"currency":"USD","cashBuying":1,"cashSelling":2}]}"#,
            now(),
            "2010-01-01T00:00:00Z".parse().unwrap(),
        );
        assert!(later.is_err());
    }

    #[test]
    fn numbers_beyond_what_is_kept_exactly_are_refused_not_rounded() {
        let digits29 = "1.0000000000000000000000000001";
        let errors = problems(&format!(
            r#"{{"rates":[{{"currency":"USD","cashBuying":{digits29},"cashSelling":2}}]}}"#
        ));
        assert!(
            errors["rates[0].cashBuying"][0].contains("at most 28 significant digits"),
            "{errors:?}"
        );
        let digits28 = "1.000000000000000000000000001";
        let board = parse(
            format!(
                r#"{{"rates":[{{"currency":"USD","cashBuying":{digits28},"cashSelling":2}}]}}"#
            )
            .as_bytes(),
            now(),
        )
        .unwrap();
        assert_eq!(board.rates()[0].cash_buying().to_string(), digits28);
        let errors =
            problems(r#"{"rates":[{"currency":"USD","cashBuying":1,"cashSelling":1e10}]}"#);
        assert!(
            errors["rates[0].cashSelling"][0].contains("at most 1000000000"),
            "{errors:?}"
        );
    }

    #[test]
    fn a_valid_board_keeps_the_published_digits() {
        let board = parse(
            br#"{"asOf":"2026-11-23T07:59:00Z","rates":[{"currency":"usd","cashBuying":155.10,"cashSelling":158.2,"transactionalBuying":155.0,"transactionalSelling":158.0}]}"#,
            now(),
        )
        .unwrap();
        assert_eq!(
            board.as_of(),
            "2026-11-23T07:59:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        let rate = &board.rates()[0];
        assert_eq!(rate.currency().as_str(), "USD");
        assert_eq!(rate.cash_buying().to_string(), "155.10");
        assert_eq!(rate.transactional_buying().unwrap().to_string(), "155.0");
    }

    #[test]
    fn as_of_is_kept_to_the_microsecond() {
        let board = parse(br#"{"asOf":"2026-11-23T07:59:00.123456789Z","rates":[{"currency":"EUR","cashBuying":1,"cashSelling":2}]}"#, now()).unwrap();
        assert_eq!(
            board.as_of(),
            "2026-11-23T07:59:00.123456Z"
                .parse::<DateTime<Utc>>()
                .unwrap()
        );
    }

    #[test]
    fn as_of_defaults_to_receipt_time_and_transactional_pair_is_optional() {
        let board = parse(
            br#"{"rates":[{"currency":"EUR","cashBuying":1,"cashSelling":2}]}"#,
            now(),
        )
        .unwrap();
        assert_eq!(board.as_of(), now());
        assert_eq!(board.rates()[0].transactional_buying(), None);
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let errors = problems(
            r#"{"asOf":"2026-11-23T08:06:00Z","rates":[
                {"currency":"USD","cashBuying":0,"cashSelling":-1},
                {"currency":"QQQ","cashBuying":"1","cashSelling":2},
                {"currency":"usd","cashBuying":5,"cashSelling":4},
                {"cashBuying":1,"cashSelling":2,"transactionalBuying":1}
            ]}"#,
        );
        assert!(errors.contains_key("asOf"));
        assert!(errors.contains_key("rates[0].cashBuying"));
        assert!(errors.contains_key("rates[0].cashSelling"));
        assert!(errors.contains_key("rates[1].currency"));
        assert!(errors.contains_key("rates[1].cashBuying"));
        assert_eq!(
            errors["rates[2].currency"],
            vec!["USD appears more than once"]
        );
        assert!(errors.contains_key("rates[2].cashSelling"));
        assert!(errors.contains_key("rates[3].currency"));
        assert!(errors.contains_key("rates[3].transactionalSelling"));
    }

    #[test]
    fn empty_missing_and_malformed_boards_are_rejected() {
        assert!(problems(r#"{"rates":[]}"#).contains_key("rates"));
        assert!(problems(r#"{}"#).contains_key("rates"));
        assert!(problems(r#"{"rates":{}}"#).contains_key("rates"));
        assert!(problems(r#"{"rates":[1]}"#).contains_key("rates[0]"));
        assert!(problems(r#"not json"#).contains_key("body"));
        assert!(problems(r#"[1,2]"#).contains_key("body"));
        assert!(problems(
            r#"{"asOf":"yesterday","rates":[{"currency":"USD","cashBuying":1,"cashSelling":1}]}"#
        )
        .contains_key("asOf"));
    }

    #[test]
    fn a_push_written_otherwise_has_the_same_fingerprint_and_other_values_another() {
        let fingerprint = |body: &str| {
            parse_push(body.as_bytes(), now(), default_horizon())
                .unwrap()
                .fingerprint()
        };
        let first = fingerprint(
            r#"{"asOf":"2026-11-23T07:59:00Z","rates":[{"currency":"USD","cashBuying":155.10,"cashSelling":158.2},{"currency":"EUR","cashBuying":1,"cashSelling":2}]}"#,
        );
        let same = fingerprint(
            r#"{ "rates" : [ {"cashSelling": 2, "cashBuying": 1, "currency": "eur"},
                            {"currency": "USD", "cashSelling": 158.2, "cashBuying": 155.10} ],
                 "asOf" : "2026-11-23T10:59:00+03:00" }"#,
        );
        assert_eq!(same, first);
        let other_digits = fingerprint(
            r#"{"asOf":"2026-11-23T07:59:00Z","rates":[{"currency":"USD","cashBuying":155.1,"cashSelling":158.2},{"currency":"EUR","cashBuying":1,"cashSelling":2}]}"#,
        );
        assert_ne!(other_digits, first, "155.1 is not the 155.10 published");
        // Without `asOf`, a board is the receipt time's: a retry later is
        // still the same push.
        let unstamped = r#"{"rates":[{"currency":"USD","cashBuying":1,"cashSelling":2}]}"#;
        let later = parse_push(
            unstamped.as_bytes(),
            now() + chrono::Duration::seconds(30),
            default_horizon(),
        )
        .unwrap();
        assert_eq!(later.fingerprint(), fingerprint(unstamped));
        assert_eq!(
            fingerprint(
                r#"{"asOf":null,"rates":[{"currency":"USD","cashBuying":1,"cashSelling":2}]}"#
            ),
            fingerprint(unstamped)
        );
    }

    #[test]
    fn out_of_range_numbers_are_rejected_not_rounded() {
        let errors =
            problems(r#"{"rates":[{"currency":"USD","cashBuying":1e400,"cashSelling":2}]}"#);
        assert!(errors.contains_key("rates[0].cashBuying"));
    }
}
