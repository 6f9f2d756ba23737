//! What the fold notes of each board as it stores it, so that a quality
//! report reads one row per board and the rates of only the few boards
//! that may matter: those with a spread that may be over the cap, and those
//! with a value that may be an outlier.
//!
//! Both figures are kept as measured, not as judged, so that changing
//! `RATEWIRE_SPREAD_CAP_PERCENT` or `RATEWIRE_OUTLIER_PERCENT` needs no
//! replay. A screen only ever says "cannot be": whatever it lets through
//! is judged exactly on its rates ([`super::spread`], [`super::outliers`]).

use rust_decimal::Decimal;

use super::spread::spread_percent;

/// A board's screen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Screen {
    /// The widest spread percent (as shown) of the board's pairs; `None`
    /// when none has one, or for a board stored before screens were kept.
    pub widest_spread: Option<Decimal>,
    /// The largest move of any of the board's values from the bank's
    /// previous value of the same field, in percent of that value; `None`
    /// when some value has no previous one to move from (a new currency
    /// or field, a previous value of zero), when the board is not the
    /// bank's newest (its previous values are then another board's, not
    /// at hand), or for a board stored before screens were kept.
    pub largest_move: Option<Decimal>,
}

impl Screen {
    /// The screen of a board with `pairs` (buying, selling) and `values`
    /// (each beside the bank's previous value of its field); `values` is
    /// `None` when the previous values are not at hand.
    pub fn of(
        pairs: impl IntoIterator<Item = (Decimal, Decimal)>,
        values: Option<impl IntoIterator<Item = (Decimal, Option<Decimal>)>>,
    ) -> Self {
        let pairs: Vec<(Decimal, Decimal)> = pairs.into_iter().collect();
        let spreads: Vec<(Decimal, Decimal)> = pairs
            .iter()
            .map(|(buying, selling)| (selling - buying, buying + selling))
            .collect();
        let widest_spread = match largest_fraction(&spreads) {
            Ok(widest) => widest.and_then(|i| spread_percent(pairs[i].0, pairs[i].1)),
            Err(Unordered) => pairs
                .iter()
                .filter_map(|(buying, selling)| spread_percent(*buying, *selling))
                .max(),
        };
        let largest_move = values.and_then(|values| {
            // (distance, previous): none when a value has no previous one.
            let moves: Vec<(Decimal, Decimal)> = values
                .into_iter()
                .map(|(value, previous)| {
                    let previous = previous.filter(|p| !p.is_zero())?;
                    Some(((value - previous).abs(), previous.abs()))
                })
                .collect::<Option<_>>()?;
            match largest_fraction(&moves) {
                Ok(None) => Some(Decimal::ZERO),
                Ok(Some(i)) => moved(moves[i]),
                Err(Unordered) => moves
                    .iter()
                    .try_fold(Decimal::ZERO, |largest, m| Some(largest.max(moved(*m)?))),
            }
        });
        Self {
            widest_spread,
            largest_move,
        }
    }

    /// Whether a pair of the board may be over `cap`.
    pub fn may_breach(&self, cap: Decimal) -> bool {
        self.widest_spread.is_none_or(|widest| widest > cap)
    }

    /// Whether a value of the board may be an outlier at `percent`: only a
    /// value that departs from the bank's previous one by more than
    /// `percent` can be (`>=`, so that the division's last digit never
    /// hides one).
    pub fn may_outlie(&self, percent: Decimal) -> bool {
        self.largest_move.is_none_or(|moved| moved >= percent)
    }
}

/// `distance / previous × 100`, the previous value's magnitude above 0.
fn moved((distance, previous): (Decimal, Decimal)) -> Option<Decimal> {
    distance
        .checked_mul(Decimal::ONE_HUNDRED)?
        .checked_div(previous)
}

/// Fractions that could not be compared by their products (a denominator
/// not above 0, or a product too large): each is divided instead.
struct Unordered;

/// The index of the largest of `fractions` (numerator, denominator),
/// found by comparing products, not by dividing: the fold screens every
/// board, and a division costs it far more than two products.
fn largest_fraction(fractions: &[(Decimal, Decimal)]) -> Result<Option<usize>, Unordered> {
    let mut largest: Option<usize> = None;
    for (i, (numerator, denominator)) in fractions.iter().enumerate() {
        if *denominator <= Decimal::ZERO {
            return Err(Unordered);
        }
        let Some(j) = largest else {
            largest = Some(i);
            continue;
        };
        let (top, bottom) = fractions[j];
        let this = numerator.checked_mul(bottom).ok_or(Unordered)?;
        let that = top.checked_mul(*denominator).ok_or(Unordered)?;
        if this > that {
            largest = Some(i);
        }
    }
    Ok(largest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn the_widest_pair_decides_whether_a_breach_may_be_there() {
        let screen = Screen::of([(d("150"), d("152")), (d("150"), d("155"))], None::<Vec<_>>);
        assert_eq!(screen.widest_spread, Some(d("3.2787")));
        assert!(screen.may_breach(d("2")));
        assert!(!screen.may_breach(d("3.2787")));
    }

    #[test]
    fn only_a_value_that_moved_beyond_the_percent_may_be_an_outlier() {
        let values = [(d("110"), Some(d("100"))), (d("98"), Some(d("100")))];
        let screen = Screen::of([], Some(values));
        assert_eq!(screen.largest_move, Some(d("10")));
        assert!(!screen.may_outlie(d("20")));
        assert!(screen.may_outlie(d("10")));
    }

    #[test]
    fn a_value_without_a_previous_one_or_a_board_without_them_must_be_judged() {
        let new_field = Screen::of([], Some([(d("110"), Some(d("100"))), (d("5"), None)]));
        assert_eq!(new_field.largest_move, None);
        let from_zero = Screen::of([], Some([(d("1"), Some(d("0")))]));
        assert_eq!(from_zero.largest_move, None);
        let falling = Screen::of(
            [],
            Some([(d("80"), Some(d("100"))), (d("-50"), Some(d("-40")))]),
        );
        assert_eq!(
            falling.largest_move,
            Some(d("25")),
            "magnitudes, from a negative too"
        );
        let not_newest = Screen::of([], None::<Vec<_>>);
        assert!(not_newest.may_outlie(d("20")));
        assert!(
            Screen::default().may_breach(d("2")),
            "stored before screens"
        );
    }
}
