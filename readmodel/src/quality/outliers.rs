//! Whether a published value is implausible: an outlier.
//!
//! A value is an outlier when it departs by more than a share (the
//! outlier percent) from every reference it can be held against:
//! - the bank's previous value of that field;
//! - the median of the other active banks' current values of it, when at
//!   least two others quote the currency.
//!
//! With neither (a new bank's first board in a currency fewer than two
//! others quote) nothing is an outlier. A new bank's first board is held
//! against the market alone, so a tenfold typo is caught at once; a bank
//! that moves first on a devaluation day is flagged until it confirms (its
//! next board repeats the value, which then no longer departs from its
//! previous one) or the others follow (the median comes within range).

use rust_decimal::Decimal;

/// The references a value is held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct References {
    pub previous: Option<Decimal>,
    /// The median of the other banks' current values, when at least two
    /// others quote the currency.
    pub median: Option<Decimal>,
}

impl References {
    /// `previous`, and the median of `others` when there are two or more.
    pub fn of(previous: Option<Decimal>, others: &[Decimal]) -> Self {
        Self {
            previous,
            median: (others.len() >= 2).then(|| median(others)).flatten(),
        }
    }

    /// Whether `value` departs by more than `percent` from every
    /// reference, and there is at least one.
    pub fn flag(&self, value: Decimal, percent: Decimal) -> bool {
        let references = [self.previous, self.median];
        references.iter().any(Option::is_some)
            && references
                .iter()
                .flatten()
                .all(|reference| departs(value, *reference, percent))
    }
}

/// Whether `value` is more than `percent` away from `reference`, relative
/// to the reference (a reference of zero departs from anything else).
fn departs(value: Decimal, reference: Decimal, percent: Decimal) -> bool {
    let distance = (value - reference).abs();
    match distance.checked_mul(Decimal::ONE_HUNDRED) {
        Some(scaled) => scaled > percent * reference.abs(),
        None => true,
    }
}

/// The median of `values`: the middle one, or the mean of the two middle
/// ones; `None` for none.
pub fn median(values: &[Decimal]) -> Option<Decimal> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / Decimal::TWO),
    }
}

/// How the best rates treat outliers: the percent that makes one
/// (`RATEWIRE_OUTLIER_PERCENT`), and whether one may still be a best rate
/// (`RATEWIRE_OUTLIERS_IN_BEST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutlierRule {
    pub percent: Decimal,
    pub in_best: bool,
}

impl Default for OutlierRule {
    fn default() -> Self {
        Self {
            percent: Decimal::from(20),
            in_best: false,
        }
    }
}

impl OutlierRule {
    /// Which of `market`'s values the best rates leave out.
    pub fn left_out(&self, market: &[Quoted]) -> Vec<bool> {
        if self.in_best {
            return vec![false; market.len()];
        }
        judge_market(market, self.percent)
            .iter()
            .map(Option::is_some)
            .collect()
    }
}

/// One bank's value of a field, beside its previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quoted {
    /// `None`: the bank does not quote the field.
    pub value: Option<Decimal>,
    pub previous: Option<Decimal>,
}

/// Judges every bank's value of one field of one currency against its
/// previous value and the median of the others': for each, the references
/// it departs from by more than `percent` when it is an outlier, else
/// `None`. The values are sorted once and each median is read around the
/// value left out, so a market of fifty banks costs one sort, not fifty.
pub fn judge_market(market: &[Quoted], percent: Decimal) -> Vec<Option<References>> {
    let mut sorted: Vec<Decimal> = market.iter().filter_map(|q| q.value).collect();
    sorted.sort_unstable();
    market
        .iter()
        .map(|quoted| {
            let value = quoted.value?;
            let references = References {
                previous: quoted.previous,
                median: median_without(&sorted, value),
            };
            references.flag(value, percent).then_some(references)
        })
        .collect()
}

/// The median of `sorted` with one occurrence of `left_out` removed, when
/// two or more values remain.
fn median_without(sorted: &[Decimal], left_out: Decimal) -> Option<Decimal> {
    let gap = sorted.binary_search(&left_out).ok()?;
    let others = sorted.len() - 1;
    if others < 2 {
        return None;
    }
    let at = |i: usize| sorted[if i < gap { i } else { i + 1 }];
    Some(match others % 2 {
        1 => at(others / 2),
        _ => (at(others / 2 - 1) + at(others / 2)) / Decimal::TWO,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn twenty() -> Decimal {
        Decimal::from(20)
    }

    #[test]
    fn a_tenfold_typo_on_a_new_bank_s_first_board_is_held_against_the_market() {
        let market = [d("155.10"), d("154.90"), d("156.00")];
        let first_board = References::of(None, &market);
        assert!(first_board.flag(d("1555.00"), twenty()));
        assert!(!first_board.flag(d("155.50"), twenty()));
    }

    #[test]
    fn a_value_must_depart_from_every_reference() {
        let market = [d("155"), d("156")];
        // Far from its previous value, but with the market: not an outlier.
        assert!(!References::of(Some(d("100")), &market).flag(d("155.5"), twenty()));
        // Far from both.
        assert!(References::of(Some(d("100")), &market).flag(d("300"), twenty()));
        // With one other bank only, the previous value decides alone.
        let alone = References::of(Some(d("155")), &[d("900")]);
        assert_eq!(alone.median, None);
        assert!(alone.flag(d("200"), twenty()));
        assert!(!alone.flag(d("160"), twenty()));
        // Nothing to hold it against: never an outlier.
        assert!(!References::of(None, &[d("155")]).flag(d("1555"), twenty()));
    }

    #[test]
    fn the_first_bank_to_move_is_flagged_until_it_confirms_or_the_others_follow() {
        // A devaluation: one bank moves from 155 to 200 (29 % up).
        let before = [d("155"), d("154"), d("156")];
        assert!(References::of(Some(d("155")), &before).flag(d("200"), twenty()));
        // Its next board repeats 200: no longer away from its previous.
        assert!(!References::of(Some(d("200")), &before).flag(d("200"), twenty()));
        // Or the others follow: the median comes within range.
        let after = [d("198"), d("201"), d("156")];
        assert!(!References::of(Some(d("155")), &after).flag(d("200"), twenty()));
    }

    #[test]
    fn exactly_the_percent_away_is_not_beyond_it() {
        let references = References::of(Some(d("100")), &[]);
        assert!(!references.flag(d("120"), twenty()));
        assert!(references.flag(d("120.01"), twenty()));
        assert!(!references.flag(d("80"), twenty()));
        assert!(references.flag(d("79.99"), twenty()));
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[d("3"), d("1"), d("2")]), Some(d("2")));
        assert_eq!(median(&[d("4"), d("1"), d("3"), d("2")]), Some(d("2.5")));
    }

    #[test]
    fn a_market_is_judged_with_each_bank_left_out_of_its_own_median() {
        let market: Vec<Quoted> = [
            (Some("155.10"), Some("155.00")),
            (Some("1555.00"), None),
            (Some("154.90"), Some("154.80")),
            (None, Some("150")),
            (Some("156.00"), Some("156.00")),
        ]
        .iter()
        .map(|(v, p)| Quoted {
            value: v.map(d),
            previous: p.map(d),
        })
        .collect();
        let judged = judge_market(&market, twenty());
        let flagged: Vec<bool> = judged.iter().map(Option::is_some).collect();
        assert_eq!(flagged, [false, true, false, false, false]);
        // The typo's median is the others': 155.10, 154.90, 156.00.
        assert_eq!(
            judged[1],
            Some(References {
                previous: None,
                median: Some(d("155.10"))
            })
        );
        // Every median read around the gap equals the one computed apart.
        for (i, quoted) in market.iter().enumerate() {
            let Some(value) = quoted.value else { continue };
            let others: Vec<Decimal> = market
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .filter_map(|(_, q)| q.value)
                .collect();
            let mut sorted: Vec<Decimal> = market.iter().filter_map(|q| q.value).collect();
            sorted.sort_unstable();
            assert_eq!(
                median_without(&sorted, value),
                References::of(None, &others).median
            );
        }
    }
}
