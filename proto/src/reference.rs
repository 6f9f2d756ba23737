//! A reference board: one day's official rates from a central bank (the
//! National Bank of Ethiopia), beside the banks' boards but never one of
//! them.
//!
//! Reference boards travel in the same envelope as every event, under one
//! reserved subject ([`REFERENCE_SUBJECT`]) in place of a bank: so every
//! reader of version 1 still finds a `bankId`, and every reference board
//! has one key and so one partition, in log order. The reserved id is
//! never a bank's (ids are handed out from 1 up) and is the largest
//! integer every JSON reader holds exactly.

use chrono::{DateTime, FixedOffset, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::board::check_entries;
use crate::ids::{BankId, CurrencyCode};
use crate::rate::Rate;
use crate::rules::{earliest_as_of, Rule, Violation, MAX_FUTURE_SKEW};

/// The envelope `bankId` (and so the message key) of every reference
/// board: 2^53 − 1.
pub const REFERENCE_SUBJECT: BankId = BankId::RESERVED_FOR_REFERENCE;

/// The source the National Bank of Ethiopia's boards are published as.
pub const NATIONAL_BANK: &str = "NBE";

/// The National Bank's day: a reference board's `date` is a day in Addis
/// Ababa (UTC+3 all year).
pub fn reference_day(at: DateTime<Utc>) -> NaiveDate {
    let addis = FixedOffset::east_opt(3 * 3600).expect("UTC+3 is a valid offset");
    at.with_timezone(&addis).date_naive()
}

/// One currency of a reference board: what the central bank buys and sells
/// it at, and its weighted average (not a midpoint: for USD it has equalled
/// the buying rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WireReferenceEntry", into = "WireReferenceEntry")]
pub struct ReferenceEntry {
    currency: CurrencyCode,
    buying: Rate,
    selling: Rate,
    weighted_average: Rate,
}

impl ReferenceEntry {
    pub fn currency(&self) -> CurrencyCode {
        self.currency
    }

    pub fn buying(&self) -> Decimal {
        self.buying.get()
    }

    pub fn selling(&self) -> Decimal {
        self.selling.get()
    }

    pub fn weighted_average(&self) -> Decimal {
        self.weighted_average.get()
    }
}

/// A reference entry's parts as texts, any of them missing: what a reader
/// of a published response has before it knows the entry is whole.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReferenceParts<'a> {
    pub currency: Option<&'a str>,
    pub buying: Option<&'a str>,
    pub selling: Option<&'a str>,
    pub weighted_average: Option<&'a str>,
}

impl ReferenceParts<'_> {
    /// The entry, or every rule it breaks (fields relative to the entry,
    /// named as `names` gives them: the log's names or a source's).
    pub fn check(&self, names: &EntryNames) -> Result<ReferenceEntry, Vec<Violation>> {
        let mut problems = Vec::new();
        let currency = match self.currency {
            None => {
                problems.push(Violation::new(Rule::Payload, names.currency, "is required"));
                None
            }
            Some(code) => CurrencyCode::parse(code)
                .map_err(|e| {
                    problems.push(Violation::new(
                        Rule::Currency,
                        names.currency,
                        format!("{code:?} {e}"),
                    ))
                })
                .ok(),
        };
        let mut rate = |field: &str, text: Option<&str>| match text {
            None => {
                problems.push(Violation::new(Rule::Payload, field, "is required"));
                None
            }
            Some(text) => Rate::parse(text)
                .map_err(|message| problems.push(Violation::new(Rule::Rate, field, message)))
                .ok(),
        };
        let buying = rate(names.buying, self.buying);
        let selling = rate(names.selling, self.selling);
        let weighted_average = rate(names.weighted_average, self.weighted_average);
        if let (Some(buying), Some(selling)) = (buying, selling) {
            if selling < buying {
                problems.push(Violation::new(
                    Rule::SellingBelowBuying,
                    names.selling,
                    format!("must not be below {}", names.buying),
                ));
            }
        }
        match (currency, buying, selling, weighted_average) {
            (Some(currency), Some(buying), Some(selling), Some(weighted_average))
                if problems.is_empty() =>
            {
                Ok(ReferenceEntry {
                    currency,
                    buying,
                    selling,
                    weighted_average,
                })
            }
            _ => Err(problems),
        }
    }
}

/// What an entry's fields are called where it is read.
#[derive(Debug, Clone, Copy)]
pub struct EntryNames {
    pub currency: &'static str,
    pub buying: &'static str,
    pub selling: &'static str,
    pub weighted_average: &'static str,
}

/// The log's names (version 1).
pub const LOG_NAMES: EntryNames = EntryNames {
    currency: "currency",
    buying: "buying",
    selling: "selling",
    weighted_average: "weightedAverage",
};

/// A reference entry's wire shape (version 1): decimal strings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireReferenceEntry {
    pub currency: String,
    pub buying: String,
    pub selling: String,
    pub weighted_average: String,
}

impl TryFrom<WireReferenceEntry> for ReferenceEntry {
    type Error = Violation;
    fn try_from(wire: WireReferenceEntry) -> Result<Self, Self::Error> {
        ReferenceParts {
            currency: Some(&wire.currency),
            buying: Some(&wire.buying),
            selling: Some(&wire.selling),
            weighted_average: Some(&wire.weighted_average),
        }
        .check(&LOG_NAMES)
        .map_err(|mut problems| problems.swap_remove(0))
    }
}

impl From<ReferenceEntry> for WireReferenceEntry {
    fn from(entry: ReferenceEntry) -> Self {
        WireReferenceEntry {
            currency: entry.currency.as_str().to_owned(),
            buying: entry.buying.into(),
            selling: entry.selling.into(),
            weighted_average: entry.weighted_average.into(),
        }
    }
}

/// One day's reference board from one source: at least one currency, at
/// most [`crate::rules::MAX_ENTRIES`], each once; a day from the horizon on. A second
/// board for the same source and day replaces the first (a correction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WireReferenceBoard", into = "WireReferenceBoard")]
pub struct ReferenceBoardPublished {
    source: String,
    date: NaiveDate,
    rates: Vec<ReferenceEntry>,
}

impl ReferenceBoardPublished {
    /// The board, or every rule it breaks.
    pub fn new(
        source: &str,
        date: NaiveDate,
        rates: Vec<ReferenceEntry>,
    ) -> Result<Self, Vec<Violation>> {
        let mut problems = Vec::new();
        if let Err(v) = check_source(source) {
            problems.push(v);
        }
        if date < earliest_as_of().date_naive() {
            problems.push(Violation::new(
                Rule::AsOf,
                "date",
                format!("must not be before {}", earliest_as_of().date_naive()),
            ));
        }
        problems.extend(check_entries(rates.iter().map(|r| Some(r.currency))));
        if problems.is_empty() {
            Ok(Self {
                source: source.to_owned(),
                date,
                rates,
            })
        } else {
            Err(problems)
        }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn date(&self) -> NaiveDate {
        self.date
    }

    pub fn rates(&self) -> &[ReferenceEntry] {
        &self.rates
    }

    /// The rule between a board and when it was received: its day has
    /// begun in Addis Ababa (with the publishers' clock skew).
    pub fn check_received(&self, occurred_at: DateTime<Utc>) -> Result<(), Violation> {
        check_day_received(self.date, occurred_at)
    }

    /// The same board with its entries in currency order: two boards with
    /// the same rates in another order are the same board.
    pub fn canonical(mut self) -> Self {
        self.rates.sort_by_key(|r| r.currency);
        self
    }
}

/// The rule between a reference day and when its board was received.
pub fn check_day_received(date: NaiveDate, occurred_at: DateTime<Utc>) -> Result<(), Violation> {
    let today = reference_day(occurred_at + MAX_FUTURE_SKEW);
    if date > today {
        return Err(Violation::new(
            Rule::AsOf,
            "date",
            format!("must not be in the future (today is {today} in Addis Ababa)"),
        ));
    }
    Ok(())
}

/// A source's name: 2 to 16 upper-case ASCII letters.
fn check_source(source: &str) -> Result<(), Violation> {
    let ok = (2..=16).contains(&source.len()) && source.bytes().all(|b| b.is_ascii_uppercase());
    if ok {
        Ok(())
    } else {
        Err(Violation::new(
            Rule::Payload,
            "source",
            "must be 2 to 16 upper-case letters",
        ))
    }
}

/// A reference board's wire shape (version 1).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireReferenceBoard {
    pub source: String,
    pub date: NaiveDate,
    pub rates: Vec<WireReferenceEntry>,
}

impl WireReferenceBoard {
    /// The board, or the first rule it breaks.
    pub fn check(self) -> Result<ReferenceBoardPublished, Violation> {
        let mut rates = Vec::with_capacity(self.rates.len());
        for (i, entry) in self.rates.into_iter().enumerate() {
            rates.push(
                ReferenceEntry::try_from(entry).map_err(|v| v.within(&format!("rates[{i}]")))?,
            );
        }
        ReferenceBoardPublished::new(&self.source, self.date, rates)
            .map_err(|mut problems| problems.swap_remove(0))
    }
}

impl TryFrom<WireReferenceBoard> for ReferenceBoardPublished {
    type Error = Violation;
    fn try_from(wire: WireReferenceBoard) -> Result<Self, Self::Error> {
        wire.check()
    }
}

impl From<ReferenceBoardPublished> for WireReferenceBoard {
    fn from(board: ReferenceBoardPublished) -> Self {
        WireReferenceBoard {
            source: board.source,
            date: board.date,
            rates: board
                .rates
                .into_iter()
                .map(WireReferenceEntry::from)
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(code: &str, buying: &str, selling: &str, average: &str) -> WireReferenceEntry {
        WireReferenceEntry {
            currency: code.into(),
            buying: buying.into(),
            selling: selling.into(),
            weighted_average: average.into(),
        }
    }

    fn board(rates: Vec<WireReferenceEntry>) -> Result<ReferenceBoardPublished, Violation> {
        WireReferenceBoard {
            source: NATIONAL_BANK.into(),
            date: "2026-05-18".parse().unwrap(),
            rates,
        }
        .check()
    }

    #[test]
    fn a_published_day_keeps_its_digits_and_reads_the_sdr() {
        let board = board(vec![
            entry("USD", "157.227", "158.7993", "157.227"),
            entry("XDR", "214.5100", "216.6551", "215.0"),
        ])
        .unwrap();
        let json = serde_json::to_value(&board).unwrap();
        assert_eq!(json["rates"][0]["selling"], "158.7993");
        assert_eq!(json["rates"][1]["buying"], "214.5100");
        assert_eq!(json["date"], "2026-05-18");
        let back: ReferenceBoardPublished = serde_json::from_value(json).unwrap();
        assert_eq!(back, board);
    }

    #[test]
    fn the_rules_of_bank_boards_hold_for_reference_boards() {
        for (rates, rule) in [
            (vec![entry("USD", "0", "1", "1")], Rule::Rate),
            (vec![entry("USD", "2", "1", "1")], Rule::SellingBelowBuying),
            (vec![entry("QQQ", "1", "2", "1")], Rule::Currency),
            (
                vec![entry("USD", "1", "2", "1"), entry("usd", "1", "2", "1")],
                Rule::DuplicateCurrency,
            ),
            (vec![], Rule::BoardSize),
        ] {
            assert_eq!(board(rates).unwrap_err().rule, rule);
        }
    }

    #[test]
    fn a_day_is_not_in_the_future_in_addis_ababa() {
        let date: NaiveDate = "2026-05-18".parse().unwrap();
        // 21:00 UTC is already the 18th's next day in Addis Ababa.
        assert!(check_day_received(date, "2026-05-17T21:00:00Z".parse().unwrap()).is_ok());
        assert!(check_day_received(date, "2026-05-17T20:00:00Z".parse().unwrap()).is_err());
    }

    #[test]
    fn the_order_of_entries_does_not_make_another_board() {
        let a = board(vec![
            entry("USD", "1", "2", "1"),
            entry("EUR", "1", "2", "1"),
        ]);
        let b = board(vec![
            entry("EUR", "1", "2", "1"),
            entry("USD", "1", "2", "1"),
        ]);
        assert_eq!(a.unwrap().canonical(), b.unwrap().canonical());
    }
}
