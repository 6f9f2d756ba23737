//! A board's screen for quality reports ([`Screen`]), made as the fold
//! adds the board: the previous values it is held against are its bank's
//! newest board's, which every batch loads.

use chrono::{DateTime, Utc};
use ratewire_proto::BankId;
use ratewire_readmodel::quality::Screen;

use super::model::{Board, Model};

/// The board's screen for quality reports: its values beside the bank's
/// previous ones when it is the bank's newest board (the previous values
/// are then its newest board's, if that quotes the currency).
pub fn screen(model: &Model, bank: BankId, as_of: DateTime<Utc>, board: &Board) -> Screen {
    let pairs = board.quotes.iter().flat_map(|q| {
        let transactional = q.transactional_buying.zip(q.transactional_selling);
        std::iter::once((q.cash_buying, q.cash_selling)).chain(transactional)
    });
    let previous = model
        .latest(bank)
        .filter(|(latest, _)| *latest < as_of)
        .map(|(_, previous)| previous);
    let values = previous.and_then(|previous| {
        let mut values = Vec::with_capacity(board.quotes.len() * 4);
        for quote in &board.quotes {
            let before = previous.quote(quote.currency)?;
            values.push((quote.cash_buying, Some(before.cash_buying)));
            values.push((quote.cash_selling, Some(before.cash_selling)));
            let transactional = [
                (quote.transactional_buying, before.transactional_buying),
                (quote.transactional_selling, before.transactional_selling),
            ];
            values.extend(
                transactional
                    .into_iter()
                    .filter_map(|(value, before)| Some((value?, before))),
            );
        }
        Some(values)
    });
    Screen::of(pairs, values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::model::Quote;
    use ratewire_proto::CurrencyCode;
    use rust_decimal::Decimal;
    use std::str::FromStr;
    use uuid::Uuid;

    fn board(quotes: &[(&str, &str, &str)]) -> Board {
        let d = |s: &str| Decimal::from_str(s).unwrap();
        let quotes = quotes
            .iter()
            .map(|(code, buying, selling)| Quote {
                currency: CurrencyCode::parse(code).unwrap(),
                cash_buying: d(buying),
                cash_selling: d(selling),
                transactional_buying: None,
                transactional_selling: None,
            })
            .collect();
        Board::new(Uuid::new_v4(), quotes)
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_newest_board_is_held_against_the_bank_s_newest_and_any_other_is_not() {
        let bank = BankId::new(1).unwrap();
        let mut model = Model::default();
        let first = board(&[("USD", "100", "102")]);
        let alone = screen(&model, bank, at("2026-11-02T08:00:00Z"), &first);
        assert_eq!(alone.largest_move, None, "nothing before it");
        model
            .boards
            .insert((bank, at("2026-11-02T08:00:00Z")), first);

        let next = board(&[("USD", "110", "112")]);
        let newest = screen(&model, bank, at("2026-11-02T09:00:00Z"), &next);
        assert_eq!(newest.largest_move, Some(Decimal::from(10)));
        assert_eq!(
            newest.widest_spread,
            Some(Decimal::from_str("1.8018").unwrap())
        );
        let earlier = screen(&model, bank, at("2026-11-02T07:00:00Z"), &next);
        assert_eq!(earlier.largest_move, None, "not the newest");
        let new_currency = board(&[("EUR", "120", "122"), ("USD", "100", "102")]);
        let with_eur = screen(&model, bank, at("2026-11-02T09:00:00Z"), &new_currency);
        assert_eq!(with_eur.largest_move, None, "EUR has no previous value");
    }
}
