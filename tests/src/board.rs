//! A rate board as a publisher pushes it (docs/publishers.md), built in one
//! expression instead of JSON by hand:
//!
//! ```
//! # use ratewire_e2e::{ago, Board};
//! let board = Board::at(ago(0, 1))
//!     .rate("USD", "155.10", "157.00")
//!     .transactional("USD", "155.50", "156.75")
//!     .rate("EUR", 180, 184.5);
//! assert!(board.to_string().contains(r#""cashBuying":155.10"#));
//! ```
//!
//! Rates are written into the body as the tests give them (JSON numbers
//! with exactly those digits), so a test can check that the published
//! digits are served. Bodies that are wrong on purpose are not boards:
//! those tests write their JSON by hand.

use std::fmt;

/// One currency on a board: its cash pair, and its transactional pair
/// when the bank quotes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    pub currency: String,
    pub cash_buying: String,
    pub cash_selling: String,
    pub transactional: Option<(String, String)>,
}

/// A board's body: an as-of time (or none: ingest stamps the time it
/// receives it) and its quotes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Board {
    as_of: Option<String>,
    quotes: Vec<Quote>,
    /// Where the numbers came from (`{url?, method, capturedAt?, sha256?}`).
    source: Option<serde_json::Value>,
    reason: Option<String>,
}

impl Board {
    /// A board as of `as_of` (RFC 3339, e.g. [`crate::ago`] or [`crate::at`]).
    pub fn at(as_of: impl Into<String>) -> Self {
        Self {
            as_of: Some(as_of.into()),
            quotes: Vec::new(),
            source: None,
            reason: None,
        }
    }

    /// A board without an as-of time: ingest gives it the time it is
    /// received.
    pub fn now() -> Self {
        Self {
            as_of: None,
            quotes: Vec::new(),
            source: None,
            reason: None,
        }
    }

    /// Adds `currency` with its cash buying and selling rates.
    pub fn rate(
        mut self,
        currency: &str,
        buying: impl fmt::Display,
        selling: impl fmt::Display,
    ) -> Self {
        self.quotes.push(Quote {
            currency: currency.to_owned(),
            cash_buying: buying.to_string(),
            cash_selling: selling.to_string(),
            transactional: None,
        });
        self
    }

    /// Gives `currency` (added before with [`Board::rate`]) transactional
    /// rates.
    pub fn transactional(
        mut self,
        currency: &str,
        buying: impl fmt::Display,
        selling: impl fmt::Display,
    ) -> Self {
        let quote = self
            .quotes
            .iter_mut()
            .find(|q| q.currency == currency)
            .unwrap_or_else(|| panic!("{currency} is not on the board yet"));
        quote.transactional = Some((buying.to_string(), selling.to_string()));
        self
    }

    /// The same quotes as of another time (a correction of the board as of
    /// `as_of`, say).
    pub fn as_of(mut self, as_of: impl Into<String>) -> Self {
        self.as_of = Some(as_of.into());
        self
    }

    /// The board with where its numbers came from, as the publisher says
    /// (`{"method": "api", "url": ...}`).
    pub fn source(mut self, source: serde_json::Value) -> Self {
        self.source = Some(source);
        self
    }

    /// The board with why it is published (a correction's reason).
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The as-of time, when the board has one.
    pub fn as_of_time(&self) -> Option<&str> {
        self.as_of.as_deref()
    }

    pub fn quotes(&self) -> &[Quote] {
        &self.quotes
    }

    /// The body as ingest takes it.
    pub fn body(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Board {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let json = |text: &str| serde_json::Value::from(text).to_string();
        f.write_str("{")?;
        if let Some(as_of) = &self.as_of {
            write!(f, r#""asOf":{},"#, json(as_of))?;
        }
        f.write_str(r#""rates":["#)?;
        for (i, quote) in self.quotes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(
                f,
                r#"{{"currency":{},"cashBuying":{},"cashSelling":{}"#,
                json(&quote.currency),
                quote.cash_buying,
                quote.cash_selling
            )?;
            if let Some((buying, selling)) = &quote.transactional {
                write!(
                    f,
                    r#","transactionalBuying":{buying},"transactionalSelling":{selling}"#
                )?;
            }
            f.write_str("}")?;
        }
        f.write_str("]")?;
        if let Some(source) = &self.source {
            write!(f, r#","source":{source}"#)?;
        }
        if let Some(reason) = &self.reason {
            write!(f, r#","reason":{}"#, json(reason))?;
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_is_the_body_publishers_send_with_the_digits_given() {
        let board = Board::at("2026-05-14T08:00:00Z")
            .rate("USD", "155.10", 157)
            .transactional("USD", 155.5, "156.75")
            .rate("EUR", 180, 184.5);
        assert_eq!(
            board.to_string(),
            r#"{"asOf":"2026-05-14T08:00:00Z","rates":[{"currency":"USD","cashBuying":155.10,"cashSelling":157,"transactionalBuying":155.5,"transactionalSelling":156.75},{"currency":"EUR","cashBuying":180,"cashSelling":184.5}]}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&board.body()).unwrap();
        assert_eq!(parsed["rates"][1]["cashSelling"], 184.5);
    }

    #[test]
    fn a_board_without_an_as_of_leaves_it_to_ingest() {
        let board = Board::now().rate("USD", "155.1", 158);
        assert_eq!(
            board.to_string(),
            r#"{"rates":[{"currency":"USD","cashBuying":155.1,"cashSelling":158}]}"#
        );
    }
}
