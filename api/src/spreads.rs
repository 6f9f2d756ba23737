//! A bank's spread and its premium over the reference rate, as the
//! spreads endpoint shows them, and how old a quote is. Percents are rounded to
//! [`PERCENT_DIGITS`] fraction digits, half away from zero; a spread is
//! exact.

use chrono::{DateTime, Utc};
use rust_decimal::{Decimal, RoundingStrategy};

/// Fraction digits of every percent.
pub const PERCENT_DIGITS: u32 = 4;

const HUNDRED: Decimal = Decimal::ONE_HUNDRED;

/// A percent as shown: 4 fraction digits, half away from zero, without
/// trailing zeros.
pub fn percent(value: Decimal) -> Decimal {
    value
        .round_dp_with_strategy(PERCENT_DIGITS, RoundingStrategy::MidpointAwayFromZero)
        .normalize()
}

/// `selling − buying`, exact.
pub fn spread(buying: Decimal, selling: Decimal) -> Decimal {
    selling - buying
}

/// `spread / ((buying + selling) / 2) × 100`, computed as
/// `spread × 200 / (buying + selling)` so nothing is rounded before the
/// end.
pub fn spread_percent(buying: Decimal, selling: Decimal) -> Option<Decimal> {
    let total = buying.checked_add(selling)?;
    if total.is_zero() {
        return None;
    }
    Some(percent(
        spread(buying, selling)
            .checked_mul(Decimal::TWO * HUNDRED)?
            .checked_div(total)?,
    ))
}

/// Whether a pair's spread percent (as shown) is over `cap`; `None` for a
/// pair without one.
pub fn over_cap(spread_percent: Option<Decimal>, cap: Decimal) -> Option<bool> {
    spread_percent.map(|percent| percent > cap)
}

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
    fn a_half_at_the_fifth_digit_goes_away_from_zero() {
        assert_eq!(percent(d("0.00005")), d("0.0001"));
        assert_eq!(percent(d("-0.00005")), d("-0.0001"));
        assert_eq!(percent(d("1.23445")), d("1.2345"));
        assert_eq!(percent(d("-1.23445")), d("-1.2345"));
        assert_eq!(percent(d("0.0000499999")), d("0"));
        assert_eq!(percent(d("-0.0000499999")), d("0"));
        assert_eq!(percent(d("2.99995")), d("3"));
    }

    #[test]
    fn a_premium_exactly_on_a_boundary_is_rounded_up_in_size() {
        // 100.00005 over 100 is 0.00005 %; 99.99995 is -0.00005 %.
        assert_eq!(premium_percent(d("100.00005"), d("100")), Some(d("0.0001")));
        assert_eq!(premium_percent(d("99.99995"), d("100")), Some(d("-0.0001")));
        assert_eq!(premium_percent(d("100.000049"), d("100")), Some(d("0")));
    }

    #[test]
    fn spreads_follow_the_formulas() {
        // The National Bank's USD day: 158.7993 − 157.227.
        assert_eq!(spread(d("157.227"), d("158.7993")), d("1.5723"));
        // 1.5723 / 158.01315 × 100 = 0.99504...
        assert_eq!(
            spread_percent(d("157.227"), d("158.7993")),
            Some(d("0.995"))
        );
        assert_eq!(spread_percent(d("155"), d("155")), Some(d("0")));
        // A bank selling at 160.5 over a weighted average of 157.227.
        assert_eq!(premium_percent(d("160.5"), d("157.227")), Some(d("2.0817")));
        assert_eq!(premium_percent(d("150"), d("157.227")), Some(d("-4.5965")));
    }
}
