//! Turns a publisher's request body into a valid board, or into the full
//! list of what is wrong with it.
//!
//! Numbers are read from their JSON text, not through `f64`, so a published
//! 155.10 reaches the log as exactly 155.10.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, SubsecRound, Utc};
use ratewire_proto::{BoardPublished, CurrencyCode, RateEntry};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::FieldErrors;

/// How far ahead of the receiving clock an as-of time may be.
pub const MAX_FUTURE_SKEW: Duration = Duration::minutes(5);
/// The most currencies one board may carry.
pub const MAX_ENTRIES: usize = 500;
/// The most significant digits a rate may have: what a decimal holds
/// exactly, so a published number is kept digit for digit or refused,
/// never rounded.
pub const MAX_DIGITS: usize = 28;
/// The largest rate accepted: far above any bank's quote, far below what
/// would overflow a sum or a difference of rates.
pub const MAX_RATE: Decimal = Decimal::from_parts(1_000_000_000, 0, 0, false, 0);

/// The earliest as-of time accepted unless configured otherwise: older
/// boards are mistakes (a year 0001 would rewrite history at that instant).
pub fn default_horizon() -> DateTime<Utc> {
    "1990-01-01T00:00:00Z".parse().expect("a valid constant")
}

#[derive(Deserialize)]
struct RawBoard<'a> {
    #[serde(rename = "asOf", borrow, default)]
    as_of: Option<&'a RawValue>,
    #[serde(borrow, default)]
    rates: Option<&'a RawValue>,
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

impl Problems {
    fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.entry(field.into()).or_default().push(message.into());
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

    let as_of = match raw.as_of.filter(|v| v.get() != "null") {
        None => Some(now),
        Some(value) => match serde_json::from_str::<String>(value.get())
            .ok()
            .and_then(|s| DateTime::parse_from_rfc3339(&s).ok())
        {
            Some(t) if t.with_timezone(&Utc) > now + MAX_FUTURE_SKEW => {
                problems.add("asOf", "must not be more than 5 minutes in the future");
                None
            }
            Some(t) if t.with_timezone(&Utc) < horizon => {
                problems.add(
                    "asOf",
                    format!(
                        "must not be before {}",
                        horizon.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    ),
                );
                None
            }
            Some(t) => Some(t.with_timezone(&Utc).trunc_subsecs(6)),
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
        Some(Ok(entries)) if entries.is_empty() => {
            problems.add("rates", "must contain at least one currency")
        }
        Some(Ok(entries)) if entries.len() > MAX_ENTRIES => problems.add(
            "rates",
            format!("must contain at most {MAX_ENTRIES} currencies"),
        ),
        Some(Ok(entries)) => {
            let mut seen = BTreeSet::new();
            for (i, entry) in entries.iter().enumerate() {
                if let Some(rate) = parse_entry(i, entry, &mut seen, &mut problems) {
                    rates.push(rate);
                }
            }
        }
    }

    match as_of {
        Some(as_of) if problems.0.is_empty() => Ok(BoardPublished { as_of, rates }),
        _ => Err(problems.0),
    }
}

fn parse_entry(
    i: usize,
    entry: &RawValue,
    seen: &mut BTreeSet<CurrencyCode>,
    problems: &mut Problems,
) -> Option<RateEntry> {
    let field = |name: &str| format!("rates[{i}].{name}");
    let Ok(raw) = serde_json::from_str::<RawEntry<'_>>(entry.get()) else {
        problems.add(format!("rates[{i}]"), "must be an object");
        return None;
    };
    let before = problems.0.len();

    let currency = match raw
        .currency
        .map(|c| serde_json::from_str::<String>(c.get()))
    {
        None => {
            problems.add(field("currency"), "is required");
            None
        }
        Some(Err(_)) => {
            problems.add(field("currency"), "must be a string");
            None
        }
        Some(Ok(code)) => match CurrencyCode::parse(&code) {
            Ok(code) if !seen.insert(code) => {
                problems.add(field("currency"), format!("{code} appears more than once"));
                None
            }
            Ok(code) => Some(code),
            Err(e) => {
                problems.add(field("currency"), format!("{code:?} {e}"));
                None
            }
        },
    };

    let mut amount = |name: &str, value: Option<&RawValue>, required: bool| -> Option<Decimal> {
        match value.filter(|v| v.get() != "null") {
            None if required => {
                problems.add(field(name), "is required");
                None
            }
            None => None,
            Some(v) => match positive_number(v.get()) {
                Ok(d) => Some(d),
                Err(message) => {
                    problems.add(field(name), message);
                    None
                }
            },
        }
    };
    let cash_buying = amount("cashBuying", raw.cash_buying, true);
    let cash_selling = amount("cashSelling", raw.cash_selling, true);
    let tx_buying = amount("transactionalBuying", raw.transactional_buying, false);
    let tx_selling = amount("transactionalSelling", raw.transactional_selling, false);

    if let (Some(b), Some(s)) = (cash_buying, cash_selling) {
        if s < b {
            problems.add(field("cashSelling"), "must not be below cashBuying");
        }
    }
    match (
        raw.transactional_buying.is_some(),
        raw.transactional_selling.is_some(),
    ) {
        (true, false) => problems.add(
            field("transactionalSelling"),
            "is required with transactionalBuying",
        ),
        (false, true) => problems.add(
            field("transactionalBuying"),
            "is required with transactionalSelling",
        ),
        _ => {}
    }
    if let (Some(b), Some(s)) = (tx_buying, tx_selling) {
        if s < b {
            problems.add(
                field("transactionalSelling"),
                "must not be below transactionalBuying",
            );
        }
    }

    if problems.0.len() != before {
        return None;
    }
    Some(RateEntry {
        currency: currency?,
        cash_buying: cash_buying?,
        cash_selling: cash_selling?,
        transactional_buying: tx_buying,
        transactional_selling: tx_selling,
    })
}

/// A JSON number's text as an exact, finite, positive decimal with at most
/// [`MAX_DIGITS`] significant digits and at most [`MAX_RATE`].
fn positive_number(text: &str) -> Result<Decimal, String> {
    let is_number = text.starts_with(|c: char| c == '-' || c.is_ascii_digit());
    if !is_number {
        return Err("must be a number".into());
    }
    if significant_digits(text) > MAX_DIGITS {
        return Err(format!(
            "must have at most {MAX_DIGITS} significant digits (they are kept exactly, never rounded)"
        ));
    }
    let value = if text.contains(['e', 'E']) {
        Decimal::from_scientific(text)
    } else {
        Decimal::from_str_exact(text)
    }
    .map_err(|_| "must be a finite number within range".to_owned())?;
    if value <= Decimal::ZERO {
        return Err("must be greater than zero".into());
    }
    if value > MAX_RATE {
        return Err(format!("must be at most {MAX_RATE}"));
    }
    Ok(value)
}

/// The significant digits of a JSON number's text: those of its mantissa
/// without leading zeros (trailing zeros count: 155.10 has five).
fn significant_digits(text: &str) -> usize {
    let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
    mantissa
        .chars()
        .filter(char::is_ascii_digit)
        .skip_while(|d| *d == '0')
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-11-23T08:00:00Z".parse().unwrap()
    }

    fn problems(body: &str) -> FieldErrors {
        parse(body.as_bytes(), now()).expect_err("the board should be rejected")
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
        assert_eq!(board.rates[0].cash_buying.to_string(), digits28);
        let errors =
            problems(r#"{"rates":[{"currency":"USD","cashBuying":1,"cashSelling":1e10}]}"#);
        assert!(
            errors["rates[0].cashSelling"][0].contains("at most 1000000000"),
            "{errors:?}"
        );
        assert_eq!(significant_digits("0.000155"), 3);
        assert_eq!(significant_digits("155.10"), 5);
        assert_eq!(significant_digits("1.5e2"), 2);
    }

    #[test]
    fn a_valid_board_keeps_the_published_digits() {
        let board = parse(
            br#"{"asOf":"2026-11-23T07:59:00Z","rates":[{"currency":"usd","cashBuying":155.10,"cashSelling":158.2,"transactionalBuying":155.0,"transactionalSelling":158.0}]}"#,
            now(),
        )
        .unwrap();
        assert_eq!(
            board.as_of,
            "2026-11-23T07:59:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        let rate = &board.rates[0];
        assert_eq!(rate.currency.as_str(), "USD");
        assert_eq!(rate.cash_buying.to_string(), "155.10");
        assert_eq!(rate.transactional_buying.unwrap().to_string(), "155.0");
    }

    #[test]
    fn as_of_is_kept_to_the_microsecond() {
        let board = parse(br#"{"asOf":"2026-11-23T07:59:00.123456789Z","rates":[{"currency":"EUR","cashBuying":1,"cashSelling":2}]}"#, now()).unwrap();
        assert_eq!(
            board.as_of,
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
        assert_eq!(board.as_of, now());
        assert_eq!(board.rates[0].transactional_buying, None);
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
    fn out_of_range_numbers_are_rejected_not_rounded() {
        let errors =
            problems(r#"{"rates":[{"currency":"USD","cashBuying":1e400,"cashSelling":2}]}"#);
        assert!(errors.contains_key("rates[0].cashBuying"));
    }
}
