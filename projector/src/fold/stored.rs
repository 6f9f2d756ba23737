//! How a board version's rates are stored: in full, or against a base
//! board. Most boards repeat most of their bank's previous values, and a
//! stored value costs more than the board's row around it, so a board that
//! repeats its bank's latest board keeps only what changed. What repeats is
//! read from the base: one full board of the same bank, in the same UTC
//! month (so that a month's rows never lean on another month's), named by
//! its event id (an event's values never change, whichever of its versions
//! is in force).
//!
//! The rules, on the bank's latest board before the new one (`previous`):
//! - no previous board, one not strictly earlier, or one in another month:
//!   full;
//! - a currency repeats when its four values are identical to the
//!   previous board's, scale included (`1.50` is not `1.5` in an answer),
//!   and the previous board read it from the base too (or is the base);
//! - when more than a quarter of the board's currencies changed, it is
//!   stored in full and becomes the base of the boards after it. A chain of
//!   small changes therefore never costs more than a quarter of a board.

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, Utc};
use ratewire_proto::{BankId, CurrencyCode};

use super::model::{Board, Model, Quote, Stored};

/// The bank's latest board before a new one, as stored.
pub struct Previous<'a> {
    pub as_of: DateTime<Utc>,
    pub board: &'a Board,
    pub stored: &'a Stored,
}

/// How `board`, at `as_of`, is stored after its bank's latest board in
/// `model`.
pub fn after_latest(model: &Model, bank: BankId, as_of: DateTime<Utc>, board: &Board) -> Stored {
    let previous = model.latest(bank).map(|(as_of, board)| Previous {
        as_of,
        board,
        stored: model.stored.get(&board.event_id).unwrap_or(&Stored::Full),
    });
    choose(previous, as_of, board)
}

/// How `board`, at `as_of`, is stored after `previous`.
pub fn choose(previous: Option<Previous<'_>>, as_of: DateTime<Utc>, board: &Board) -> Stored {
    let Some(previous) = previous else {
        return Stored::Full;
    };
    let same_month =
        (previous.as_of.year(), previous.as_of.month()) == (as_of.year(), as_of.month());
    if previous.as_of >= as_of || !same_month {
        return Stored::Full;
    }
    let base = previous.stored.base().unwrap_or(previous.board.event_id);
    let read_from_base = |currency| match previous.stored {
        Stored::Full => true,
        stored => stored.repeats(currency),
    };
    let same: BTreeSet<CurrencyCode> = board
        .quotes
        .iter()
        .filter(|quote| read_from_base(quote.currency))
        .filter(|quote| {
            previous
                .board
                .quote(quote.currency)
                .is_some_and(|before| identical(before, quote))
        })
        .map(|quote| quote.currency)
        .collect();
    let changed = board.quotes.len() - same.len();
    if same.is_empty() || changed * 4 > board.quotes.len() {
        return Stored::Full;
    }
    Stored::Against { base, same }
}

/// The same four values, written the same way.
fn identical(a: &Quote, b: &Quote) -> bool {
    let value = |d: rust_decimal::Decimal| (d, d.scale());
    let optional = |d: Option<rust_decimal::Decimal>| d.map(value);
    value(a.cash_buying) == value(b.cash_buying)
        && value(a.cash_selling) == value(b.cash_selling)
        && optional(a.transactional_buying) == optional(b.transactional_buying)
        && optional(a.transactional_selling) == optional(b.transactional_selling)
}

#[cfg(test)]
mod tests {
    use rust_decimal::Decimal;
    use uuid::Uuid;

    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn board(quotes: &[(&str, &str)]) -> Board {
        let quotes = quotes
            .iter()
            .map(|(code, buying)| Quote {
                currency: CurrencyCode::parse(code).unwrap(),
                cash_buying: buying.parse::<Decimal>().unwrap(),
                cash_selling: Decimal::new(2, 0),
                transactional_buying: None,
                transactional_selling: None,
            })
            .collect();
        Board::new(Uuid::new_v4(), quotes)
    }

    fn codes(list: &[&str]) -> BTreeSet<CurrencyCode> {
        list.iter()
            .map(|c| CurrencyCode::parse(c).unwrap())
            .collect()
    }

    /// `board`, stored in full, as the bank's latest at 10:00.
    fn full_at_ten(board: &Board) -> Previous<'_> {
        Previous {
            as_of: at("2026-01-05T10:00:00Z"),
            board,
            stored: &Stored::Full,
        }
    }

    const FOUR: [(&str, &str); 4] = [
        ("EUR", "1.1"),
        ("GBP", "1.3"),
        ("USD", "1.0"),
        ("CHF", "1.2"),
    ];

    #[test]
    fn a_bank_s_first_board_is_stored_in_full() {
        assert_eq!(
            choose(None, at("2026-01-05T10:00:00Z"), &board(&FOUR)),
            Stored::Full
        );
    }

    #[test]
    fn a_board_repeating_a_full_one_is_read_against_it() {
        let first = board(&FOUR);
        let previous = full_at_ten(&first);
        let mut changed = FOUR;
        changed[2].1 = "1.01";
        let stored = choose(Some(previous), at("2026-01-05T11:00:00Z"), &board(&changed));
        assert_eq!(
            stored,
            Stored::Against {
                base: first.event_id,
                same: codes(&["CHF", "EUR", "GBP"]),
            }
        );
    }

    #[test]
    fn a_value_written_with_another_scale_is_a_change() {
        let first = board(&FOUR);
        let previous = full_at_ten(&first);
        let mut rescaled = FOUR;
        rescaled[0].1 = "1.10";
        let stored = choose(
            Some(previous),
            at("2026-01-05T11:00:00Z"),
            &board(&rescaled),
        );
        assert!(!stored.repeats(CurrencyCode::parse("EUR").unwrap()));
        assert!(stored.repeats(CurrencyCode::parse("GBP").unwrap()));
    }

    #[test]
    fn a_currency_the_previous_board_stored_itself_is_stored_again() {
        let first = board(&FOUR);
        let second = board(&FOUR);
        let stored = Stored::Against {
            base: first.event_id,
            same: codes(&["CHF", "EUR", "GBP"]),
        };
        let previous = Previous {
            as_of: at("2026-01-05T11:00:00Z"),
            board: &second,
            stored: &stored,
        };
        let third = choose(Some(previous), at("2026-01-05T12:00:00Z"), &board(&FOUR));
        assert_eq!(third, stored, "the base stays the month's full board");
    }

    #[test]
    fn more_than_a_quarter_changed_makes_a_new_base() {
        let first = board(&FOUR);
        let previous = full_at_ten(&first);
        let mut changed = FOUR;
        changed[0].1 = "1.11";
        changed[1].1 = "1.31";
        assert_eq!(
            choose(Some(previous), at("2026-01-05T11:00:00Z"), &board(&changed)),
            Stored::Full
        );
    }

    #[test]
    fn a_new_month_or_a_board_behind_the_latest_is_stored_in_full() {
        let first = board(&FOUR);
        let previous = || Previous {
            as_of: at("2026-01-31T23:00:00Z"),
            board: &first,
            stored: &Stored::Full,
        };
        let same = board(&FOUR);
        assert_eq!(
            choose(Some(previous()), at("2026-02-01T00:00:00Z"), &same),
            Stored::Full
        );
        assert_eq!(
            choose(Some(previous()), at("2026-01-31T22:00:00Z"), &same),
            Stored::Full
        );
        assert_eq!(
            choose(Some(previous()), at("2026-01-31T23:00:00Z"), &same),
            Stored::Full
        );
    }
}
