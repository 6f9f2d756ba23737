//! A bank's spread (`ratewire_readmodel::quality::spread`, shared with
//! the quality reports) and its premium over the reference rate, as the
//! spreads endpoint shows them, and how old a quote is. Percents are
//! rounded as spreads are.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

pub use ratewire_readmodel::quality::spread::{over_cap, percent, spread, spread_percent};

const HUNDRED: Decimal = Decimal::ONE_HUNDRED;

/// `(side / weightedAverage − 1) × 100`, computed as
/// `(side − weightedAverage) × 100 / weightedAverage`.
pub fn premium_percent(side: Decimal, weighted_average: Decimal) -> Option<Decimal> {
    if weighted_average.is_zero() {
        return None;
    }
    Some(percent(
        (side - weighted_average)
            .checked_mul(HUNDRED)?
            .checked_div(weighted_average)?,
    ))
}

/// How old a board is, and whether that is too old.
#[derive(Debug, Clone, Copy)]
pub struct Age {
    pub seconds: i64,
    pub stale: bool,
}

impl Age {
    pub fn of(
        updated_at: DateTime<Utc>,
        now: DateTime<Utc>,
        stale_after: std::time::Duration,
    ) -> Self {
        let seconds = (now - updated_at).num_seconds().max(0);
        Self {
            seconds,
            stale: u64::try_from(seconds).unwrap_or(0) > stale_after.as_secs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn a_premium_exactly_on_a_boundary_is_rounded_up_in_size() {
        // 100.00005 over 100 is 0.00005 %; 99.99995 is -0.00005 %.
        assert_eq!(premium_percent(d("100.00005"), d("100")), Some(d("0.0001")));
        assert_eq!(premium_percent(d("99.99995"), d("100")), Some(d("-0.0001")));
        assert_eq!(premium_percent(d("100.000049"), d("100")), Some(d("0")));
    }

    #[test]
    fn premiums_follow_the_formula() {
        // A bank selling at 160.5 over a weighted average of 157.227.
        assert_eq!(premium_percent(d("160.5"), d("157.227")), Some(d("2.0817")));
        assert_eq!(premium_percent(d("150"), d("157.227")), Some(d("-4.5965")));
    }
}
