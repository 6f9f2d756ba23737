//! A rate board and its parts, as types that cannot hold a broken one.
//!
//! Money is `rust_decimal::Decimal` and travels as a JSON *string* on the
//! log ("155.10"), so the exact digits a bank published survive every hop;
//! only the API's edge renders them as JSON numbers. Reading a board from
//! the log goes through the same constructors as building one in ingest,
//! so a message that breaks a rule is refused with the [`Violation`] it
//! broke, whoever produced it.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::ids::CurrencyCode;
pub use crate::rate::Rate;
use crate::rules::{check_reason, earliest_as_of, Rule, Violation, MAX_ENTRIES, MAX_FUTURE_SKEW};
use crate::source::{Source, WireSource};

/// A buying and a selling rate, selling never below buying (a bank never
/// sells a currency for less than it pays for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    buying: Rate,
    selling: Rate,
}

impl Pair {
    /// `kind` names the pair in the fields of a violation (`cash`,
    /// `transactional`).
    pub fn new(kind: &str, buying: Rate, selling: Rate) -> Result<Pair, Violation> {
        if selling < buying {
            return Err(Violation::new(
                Rule::SellingBelowBuying,
                format!("{kind}Selling"),
                format!("must not be below {kind}Buying"),
            ));
        }
        Ok(Pair { buying, selling })
    }

    pub fn buying(&self) -> Decimal {
        self.buying.get()
    }

    pub fn selling(&self) -> Decimal {
        self.selling.get()
    }
}

/// One currency on a board: its cash pair and, when the bank quotes it,
/// its transactional pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WireEntry", into = "WireEntry")]
pub struct RateEntry {
    currency: CurrencyCode,
    cash: Pair,
    transactional: Option<Pair>,
}

impl RateEntry {
    pub fn new(currency: CurrencyCode, cash: Pair, transactional: Option<Pair>) -> Self {
        Self {
            currency,
            cash,
            transactional,
        }
    }

    pub fn currency(&self) -> CurrencyCode {
        self.currency
    }

    pub fn cash_buying(&self) -> Decimal {
        self.cash.buying()
    }

    pub fn cash_selling(&self) -> Decimal {
        self.cash.selling()
    }

    pub fn transactional_buying(&self) -> Option<Decimal> {
        self.transactional.map(|p| p.buying())
    }

    pub fn transactional_selling(&self) -> Option<Decimal> {
        self.transactional.map(|p| p.selling())
    }
}

/// A rate entry's wire shape (version 1): the names publishers send and
/// the log carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireEntry {
    pub currency: String,
    pub cash_buying: String,
    pub cash_selling: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactional_buying: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactional_selling: Option<String>,
}

impl WireEntry {
    /// The entry, or every rule it breaks (fields relative to the entry).
    pub fn check(&self) -> Result<RateEntry, Vec<Violation>> {
        EntryParts {
            currency: Some(&self.currency),
            cash_buying: Some(&self.cash_buying),
            cash_selling: Some(&self.cash_selling),
            transactional_buying: self.transactional_buying.as_deref(),
            transactional_selling: self.transactional_selling.as_deref(),
        }
        .check()
    }
}

/// An entry's parts as texts (rates as a number's or a decimal string's
/// text), any of them possibly missing: what a reader of a request body
/// has before it knows the entry is whole.
#[derive(Debug, Clone, Copy, Default)]
pub struct EntryParts<'a> {
    pub currency: Option<&'a str>,
    pub cash_buying: Option<&'a str>,
    pub cash_selling: Option<&'a str>,
    pub transactional_buying: Option<&'a str>,
    pub transactional_selling: Option<&'a str>,
}

impl EntryParts<'_> {
    /// The entry, or every rule it breaks (fields relative to the entry).
    pub fn check(&self) -> Result<RateEntry, Vec<Violation>> {
        let mut problems = Vec::new();
        let currency = match self.currency {
            None => {
                problems.push(Violation::new(Rule::Payload, "currency", "is required"));
                None
            }
            Some(code) => CurrencyCode::parse(code)
                .map_err(|e| {
                    problems.push(Violation::new(
                        Rule::Currency,
                        "currency",
                        format!("{code:?} {e}"),
                    ))
                })
                .ok(),
        };
        let mut rate = |field: &str, text: Option<&str>, required: bool| match text {
            None => {
                if required {
                    problems.push(Violation::new(Rule::Payload, field, "is required"));
                }
                None
            }
            Some(text) => Rate::parse(text)
                .map_err(|message| problems.push(Violation::new(Rule::Rate, field, message)))
                .ok(),
        };
        let cash = (
            rate("cashBuying", self.cash_buying, true),
            rate("cashSelling", self.cash_selling, true),
        );
        let transactional = (
            rate("transactionalBuying", self.transactional_buying, false),
            rate("transactionalSelling", self.transactional_selling, false),
        );
        let cash = match cash {
            (Some(buying), Some(selling)) => Pair::new("cash", buying, selling)
                .map_err(|v| problems.push(v))
                .ok(),
            _ => None,
        };
        let transactional = match (
            self.transactional_buying,
            self.transactional_selling,
            transactional,
        ) {
            (None, None, _) => Some(None),
            (Some(_), None, _) => {
                problems.push(Violation::new(
                    Rule::TransactionalPair,
                    "transactionalSelling",
                    "is required with transactionalBuying",
                ));
                None
            }
            (None, Some(_), _) => {
                problems.push(Violation::new(
                    Rule::TransactionalPair,
                    "transactionalBuying",
                    "is required with transactionalSelling",
                ));
                None
            }
            (Some(_), Some(_), (Some(buying), Some(selling))) => {
                Pair::new("transactional", buying, selling)
                    .map_err(|v| problems.push(v))
                    .ok()
                    .map(Some)
            }
            (Some(_), Some(_), _) => None,
        };
        match (currency, cash, transactional) {
            (Some(currency), Some(cash), Some(transactional)) if problems.is_empty() => {
                Ok(RateEntry::new(currency, cash, transactional))
            }
            _ => Err(problems),
        }
    }
}

impl TryFrom<WireEntry> for RateEntry {
    type Error = Violation;
    fn try_from(wire: WireEntry) -> Result<Self, Self::Error> {
        wire.check().map_err(first)
    }
}

impl From<RateEntry> for WireEntry {
    fn from(entry: RateEntry) -> Self {
        WireEntry {
            currency: entry.currency.as_str().to_owned(),
            cash_buying: entry.cash.buying.into(),
            cash_selling: entry.cash.selling.into(),
            transactional_buying: entry.transactional.map(|p| p.buying.into()),
            transactional_selling: entry.transactional.map(|p| p.selling.into()),
        }
    }
}

fn first(mut problems: Vec<Violation>) -> Violation {
    problems.swap_remove(0)
}

/// One rate board: every currency one bank quotes at one as-of time. At
/// least one currency, at most [`MAX_ENTRIES`], each once; an as-of time
/// from [`earliest_as_of`] on. Optionally where its numbers came from
/// ([`Source`]) and, in the publisher's words, why it was published (a
/// board that replaces one of the same as-of time is a correction, and
/// its reason is shown with the revision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WireBoard", into = "WireBoard")]
pub struct BoardPublished {
    as_of: DateTime<Utc>,
    rates: Vec<RateEntry>,
    source: Option<Source>,
    reason: Option<String>,
}

impl BoardPublished {
    /// The board, or every rule it breaks.
    pub fn new(as_of: DateTime<Utc>, rates: Vec<RateEntry>) -> Result<Self, Vec<Violation>> {
        let mut problems = Vec::new();
        if let Err(v) = check_as_of(as_of) {
            problems.push(v);
        }
        problems.extend(check_entries(rates.iter().map(|r| Some(r.currency()))));
        if problems.is_empty() {
            Ok(Self {
                as_of,
                rates,
                source: None,
                reason: None,
            })
        } else {
            Err(problems)
        }
    }

    /// The same board, with where its numbers came from.
    pub fn with_source(mut self, source: Source) -> Self {
        self.source = Some(source);
        self
    }

    /// The same board, with why it was published (at most
    /// [`MAX_REASON_CHARS`](crate::rules::MAX_REASON_CHARS) characters, no
    /// NUL).
    pub fn with_reason(mut self, reason: impl Into<String>) -> Result<Self, Violation> {
        let reason = reason.into();
        check_reason(&reason).map_err(|message| Violation::new(Rule::Reason, "reason", message))?;
        self.reason = Some(reason);
        Ok(self)
    }

    pub fn as_of(&self) -> DateTime<Utc> {
        self.as_of
    }

    pub fn rates(&self) -> &[RateEntry] {
        &self.rates
    }

    pub fn source(&self) -> Option<&Source> {
        self.source.as_ref()
    }

    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The rules between a board and the envelope it travels in: its as-of
    /// time, and its source's capture time, are at most [`MAX_FUTURE_SKEW`]
    /// after `occurred_at`, when it was received.
    pub fn check_received(&self, occurred_at: DateTime<Utc>) -> Result<(), Violation> {
        check_received(self.as_of, occurred_at)?;
        match &self.source {
            Some(source) => source
                .check_received(occurred_at)
                .map_err(|v| v.within("source")),
            None => Ok(()),
        }
    }
}

/// The rule between an as-of time and when its board was received.
pub fn check_received(as_of: DateTime<Utc>, occurred_at: DateTime<Utc>) -> Result<(), Violation> {
    if as_of > occurred_at + MAX_FUTURE_SKEW {
        return Err(Violation::new(
            Rule::AsOf,
            "asOf",
            format!(
                "must not be more than {} minutes in the future",
                MAX_FUTURE_SKEW.num_minutes()
            ),
        ));
    }
    Ok(())
}

/// An as-of time's own rule (the horizon).
pub fn check_as_of(as_of: DateTime<Utc>) -> Result<(), Violation> {
    let horizon = earliest_as_of();
    if as_of < horizon {
        return Err(Violation::new(
            Rule::AsOf,
            "asOf",
            format!(
                "must not be before {}",
                horizon.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        ));
    }
    Ok(())
}

/// The rules of a board's list of entries: how many, and each currency
/// once (`None` for an entry whose currency is unreadable).
pub fn check_entries(
    currencies: impl ExactSizeIterator<Item = Option<CurrencyCode>>,
) -> Vec<Violation> {
    let count = currencies.len();
    if count == 0 {
        return vec![Violation::new(
            Rule::BoardSize,
            "rates",
            "must contain at least one currency",
        )];
    }
    if count > MAX_ENTRIES {
        return vec![Violation::new(
            Rule::BoardSize,
            "rates",
            format!("must contain at most {MAX_ENTRIES} currencies"),
        )];
    }
    let mut seen = BTreeSet::new();
    currencies
        .enumerate()
        .filter_map(|(i, code)| {
            let code = code?;
            (!seen.insert(code)).then(|| {
                Violation::new(
                    Rule::DuplicateCurrency,
                    format!("rates[{i}].currency"),
                    format!("{code} appears more than once"),
                )
            })
        })
        .collect()
}

/// A board's wire shape (version 1). `source` and `reason` are optional
/// additions: a board without them is written as before, and a reader
/// that does not know them ignores them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireBoard {
    pub as_of: DateTime<Utc>,
    pub rates: Vec<WireEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<WireSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl WireBoard {
    /// The board, or the first rule it breaks.
    pub fn check(self) -> Result<BoardPublished, Violation> {
        let mut rates = Vec::with_capacity(self.rates.len());
        for (i, entry) in self.rates.iter().enumerate() {
            let entry = entry
                .check()
                .map_err(|problems| first(problems).within(&format!("rates[{i}]")))?;
            rates.push(entry);
        }
        let mut board = BoardPublished::new(self.as_of, rates).map_err(first)?;
        if let Some(source) = &self.source {
            let source = source
                .check()
                .map_err(|problems| first(problems).within("source"))?;
            board = board.with_source(source);
        }
        match self.reason {
            Some(reason) => board.with_reason(reason),
            None => Ok(board),
        }
    }
}

impl TryFrom<WireBoard> for BoardPublished {
    type Error = Violation;
    fn try_from(wire: WireBoard) -> Result<Self, Self::Error> {
        wire.check()
    }
}

impl From<BoardPublished> for WireBoard {
    fn from(board: BoardPublished) -> Self {
        WireBoard {
            as_of: board.as_of,
            rates: board.rates.into_iter().map(WireEntry::from).collect(),
            source: board.source.map(WireSource::from),
            reason: board.reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(currency: &str, buying: &str, selling: &str) -> WireEntry {
        WireEntry {
            currency: currency.into(),
            cash_buying: buying.into(),
            cash_selling: selling.into(),
            transactional_buying: None,
            transactional_selling: None,
        }
    }

    fn board(as_of: &str, rates: Vec<WireEntry>) -> Result<BoardPublished, Violation> {
        WireBoard {
            as_of: as_of.parse().unwrap(),
            rates,
            source: None,
            reason: None,
        }
        .check()
    }

    #[test]
    fn a_rate_is_positive_exact_and_within_range() {
        assert_eq!(Rate::parse("155.10").unwrap().to_string(), "155.10");
        assert_eq!(Rate::parse("1.5e2").unwrap().to_string(), "150");
        assert_eq!(Rate::parse("0").unwrap_err(), "must be greater than zero");
        assert_eq!(Rate::parse("-5").unwrap_err(), "must be greater than zero");
        assert!(Rate::parse("99999999999")
            .unwrap_err()
            .contains("at most 1000000000"));
        assert!(Rate::parse("1.0000000000000000000000000001")
            .unwrap_err()
            .contains("28 significant digits"));
        assert_eq!(
            Rate::parse("1.000000000000000000000000001")
                .unwrap()
                .to_string(),
            "1.000000000000000000000000001"
        );
        assert_eq!(Rate::parse("\"1\"").unwrap_err(), "must be a number");
        assert_eq!(
            Rate::parse("1e400").unwrap_err(),
            "must be a finite number within range"
        );
    }

    #[test]
    fn a_pair_never_sells_below_it_buys() {
        let v = board("2026-11-23T08:00:00Z", vec![entry("EUR", "99999999", "1")]).unwrap_err();
        assert_eq!(v.rule, Rule::SellingBelowBuying);
        assert_eq!(
            v.to_string(),
            "rates[0].cashSelling must not be below cashBuying"
        );
        let mut tx = entry("USD", "1", "2");
        tx.transactional_buying = Some("3".into());
        tx.transactional_selling = Some("2".into());
        let v = board("2026-11-23T08:00:00Z", vec![tx]).unwrap_err();
        assert_eq!(v.field, "rates[0].transactionalSelling");
    }

    #[test]
    fn the_transactional_pair_comes_whole() {
        let mut half = entry("USD", "1", "2");
        half.transactional_buying = Some("1".into());
        let v = board("2026-11-23T08:00:00Z", vec![half]).unwrap_err();
        assert_eq!(v.rule, Rule::TransactionalPair);
    }

    #[test]
    fn negative_and_made_up_values_are_named_by_their_rule() {
        let v = board("2026-11-23T08:00:00Z", vec![entry("EUR", "-5", "0")]).unwrap_err();
        assert_eq!(
            (v.rule, v.field.as_str()),
            (Rule::Rate, "rates[0].cashBuying")
        );
        let v = board("2026-11-23T08:00:00Z", vec![entry("QQQ", "1", "2")]).unwrap_err();
        assert_eq!(v.rule, Rule::Currency);
    }

    #[test]
    fn a_board_has_one_to_five_hundred_distinct_currencies_after_1990() {
        assert_eq!(
            board("2026-11-23T08:00:00Z", vec![]).unwrap_err().rule,
            Rule::BoardSize
        );
        let twice = vec![entry("USD", "1", "2"), entry("usd", "1", "2")];
        let v = board("2026-11-23T08:00:00Z", twice).unwrap_err();
        assert_eq!(
            (v.rule, v.field.as_str()),
            (Rule::DuplicateCurrency, "rates[1].currency")
        );
        let v = board("0001-01-01T00:00:00Z", vec![entry("USD", "1", "2")]).unwrap_err();
        assert_eq!(
            v.to_string(),
            "asOf must not be before 1990-01-01T00:00:00Z"
        );
    }

    #[test]
    fn a_board_is_not_dated_after_it_was_received() {
        let b = board("9999-01-01T00:00:00Z", vec![entry("USD", "1", "2")]).unwrap();
        let received: DateTime<Utc> = "2026-11-23T08:00:00Z".parse().unwrap();
        assert_eq!(b.check_received(received).unwrap_err().rule, Rule::AsOf);
        let b = board("2026-11-23T08:05:00Z", vec![entry("USD", "1", "2")]).unwrap();
        assert!(b.check_received(received).is_ok(), "five minutes of skew");
    }

    #[test]
    fn the_wire_shape_is_unchanged() {
        let b = board(
            "2026-11-23T08:00:00Z",
            vec![entry("usd", "155.10", "158.2")],
        )
        .unwrap();
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"asOf":"2026-11-23T08:00:00Z","rates":[{"currency":"USD","cashBuying":"155.10","cashSelling":"158.2"}]})
        );
        let back: BoardPublished = serde_json::from_value(json).unwrap();
        assert_eq!(back, b);
    }

    #[test]
    fn a_reason_is_at_most_500_characters_without_nul() {
        let b = board("2026-11-23T08:00:00Z", vec![entry("USD", "1", "2")]).unwrap();
        let kept = b.clone().with_reason("é".repeat(500)).unwrap();
        assert_eq!(kept.reason().map(|r| r.chars().count()), Some(500));
        let v = b.clone().with_reason("é".repeat(501)).unwrap_err();
        assert_eq!(
            (v.rule, v.to_string().as_str()),
            (Rule::Reason, "reason must be at most 500 characters")
        );
        assert_eq!(b.with_reason("a\0").unwrap_err().rule, Rule::Reason);
    }
}
