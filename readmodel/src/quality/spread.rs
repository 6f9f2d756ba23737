//! A pair's spread as every read shows it, and the spans a bank held a
//! spread over the cap (`RATEWIRE_SPREAD_CAP_PERCENT`).
//!
//! Percents are rounded to [`PERCENT_DIGITS`] fraction digits, half away
//! from zero; a spread is exact. A breach of one currency's pair opens
//! with the first board quoting it over the cap and closes with the first
//! later board quoting it within the cap, or not quoting it at all.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use rust_decimal::{Decimal, RoundingStrategy};

/// Fraction digits of every percent.
pub const PERCENT_DIGITS: u32 = 4;

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
            .checked_mul(Decimal::TWO * Decimal::ONE_HUNDRED)?
            .checked_div(total)?,
    ))
}

/// Whether a pair's spread percent (as shown) is over `cap`; `None` for a
/// pair without one.
pub fn over_cap(spread_percent: Option<Decimal>, cap: Decimal) -> Option<bool> {
    spread_percent.map(|percent| percent > cap)
}

/// A pair of a board: cash, or transactional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pair {
    Cash,
    Transactional,
}

impl Pair {
    pub fn name(self) -> &'static str {
        match self {
            Pair::Cash => "cash",
            Pair::Transactional => "transactional",
        }
    }
}

/// One pair of one currency on a board: its buying and selling values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    pub currency: CurrencyCode,
    pub pair: Pair,
    pub buying: Decimal,
    pub selling: Decimal,
}

/// A span over the cap: from the as-of of the board that opened it to that
/// of the board that closed it (`None` while it is open), and the widest
/// spread percent in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    pub currency: CurrencyCode,
    pub pair: Pair,
    pub from: DateTime<Utc>,
    pub to: Option<DateTime<Utc>>,
    pub max_spread_percent: Decimal,
}

/// The breaches of `cap` in `boards`: a bank's boards in force, each its
/// as-of and the pairs it quotes, in as-of order. Ordered by when they
/// opened, then currency and pair.
pub fn breaches<'a>(
    boards: impl IntoIterator<Item = (DateTime<Utc>, &'a [Quote])>,
    cap: Decimal,
) -> Vec<Breach> {
    let mut open: BTreeMap<(CurrencyCode, Pair), Breach> = BTreeMap::new();
    let mut done = Vec::new();
    for (as_of, quotes) in boards {
        let over: BTreeMap<(CurrencyCode, Pair), Decimal> = quotes
            .iter()
            .filter_map(|q| Some(((q.currency, q.pair), spread_percent(q.buying, q.selling)?)))
            .filter(|(_, spread)| *spread > cap)
            .collect();
        let ended: Vec<_> = open
            .keys()
            .filter(|key| !over.contains_key(key))
            .copied()
            .collect();
        for key in ended {
            let mut breach = open.remove(&key).expect("listed above");
            breach.to = Some(as_of);
            done.push(breach);
        }
        for ((currency, pair), spread) in over {
            let breach = open.entry((currency, pair)).or_insert(Breach {
                currency,
                pair,
                from: as_of,
                to: None,
                max_spread_percent: spread,
            });
            breach.max_spread_percent = breach.max_spread_percent.max(spread);
        }
    }
    done.extend(open.into_values());
    done.sort_by_key(|b| (b.from, b.currency, b.pair));
    done
}

/// The share of `[from, until)` that some breach covered (overlapping
/// breaches count once; an open one lasts until `until`).
pub fn share_in_breach(breaches: &[Breach], from: DateTime<Utc>, until: DateTime<Utc>) -> f64 {
    let whole = (until - from).num_milliseconds();
    if whole <= 0 {
        return 0.0;
    }
    let mut spans: Vec<(DateTime<Utc>, DateTime<Utc>)> = breaches
        .iter()
        .map(|b| (b.from.max(from), b.to.unwrap_or(until).min(until)))
        .filter(|(a, b)| a < b)
        .collect();
    spans.sort();
    let mut covered = 0;
    let mut reach = from;
    for (start, end) in spans {
        let start = start.max(reach);
        if end > start {
            covered += (end - start).num_milliseconds();
            reach = end;
        }
    }
    covered as f64 / whole as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// USD's pairs on a board: cash, and transactional when given.
    fn usd(cash: (&str, &str), transactional: Option<(&str, &str)>) -> Vec<Quote> {
        let quote = |pair, (buying, selling): (&str, &str)| Quote {
            currency: CurrencyCode::parse("USD").unwrap(),
            pair,
            buying: d(buying),
            selling: d(selling),
        };
        let mut quotes = vec![quote(Pair::Cash, cash)];
        quotes.extend(transactional.map(|t| quote(Pair::Transactional, t)));
        quotes
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
    fn spreads_follow_the_formula() {
        // The National Bank's USD day: 158.7993 − 157.227.
        assert_eq!(spread(d("157.227"), d("158.7993")), d("1.5723"));
        // 1.5723 / 158.01315 × 100 = 0.99504...
        assert_eq!(
            spread_percent(d("157.227"), d("158.7993")),
            Some(d("0.995"))
        );
        assert_eq!(spread_percent(d("155"), d("155")), Some(d("0")));
    }

    #[test]
    fn a_breach_opens_over_the_cap_widens_and_closes_within_it() {
        let boards = [
            ("2026-11-02T08:00:00Z", usd(("150", "152"), None)), // 1.32 %
            ("2026-11-02T09:00:00Z", usd(("150", "154"), None)), // 2.63 %
            (
                "2026-11-02T10:00:00Z",
                usd(("150", "155"), Some(("150", "151"))),
            ), // 3.28 %
            (
                "2026-11-02T11:00:00Z",
                usd(("150", "152"), Some(("150", "151"))),
            ),
        ];
        let found = breaches(boards.iter().map(|(t, q)| (at(t), q.as_slice())), d("2"));
        assert_eq!(
            found,
            [Breach {
                currency: CurrencyCode::parse("USD").unwrap(),
                pair: Pair::Cash,
                from: at("2026-11-02T09:00:00Z"),
                to: Some(at("2026-11-02T11:00:00Z")),
                max_spread_percent: d("3.2787"),
            }]
        );
        // Two hours of the four from 08:00 to 12:00.
        let share = share_in_breach(
            &found,
            at("2026-11-02T08:00:00Z"),
            at("2026-11-02T12:00:00Z"),
        );
        assert!((share - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_currency_left_out_closes_its_breach_and_one_still_over_stays_open() {
        let boards = [
            (
                "2026-11-02T08:00:00Z",
                usd(("150", "155"), Some(("150", "155"))),
            ),
            ("2026-11-02T09:00:00Z", Vec::new()),
            (
                "2026-11-02T10:00:00Z",
                usd(("150", "151"), Some(("150", "155"))),
            ),
        ];
        let found = breaches(boards.iter().map(|(t, q)| (at(t), q.as_slice())), d("2"));
        let spans: Vec<_> = found.iter().map(|b| (b.pair, b.from, b.to)).collect();
        let (eight, nine, ten) = (
            at("2026-11-02T08:00:00Z"),
            at("2026-11-02T09:00:00Z"),
            at("2026-11-02T10:00:00Z"),
        );
        assert_eq!(
            spans,
            [
                (Pair::Cash, eight, Some(nine)),
                (Pair::Transactional, eight, Some(nine)),
                (Pair::Transactional, ten, None),
            ]
        );
    }
}
