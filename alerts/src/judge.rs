//! Whether an alert fires, decided on typed values, with no I/O.
//!
//! An alert reads a watch: one rate of a currency at one bank, or the
//! best across active banks ([`watched`]). Every alert on a watch shares
//! its value, so an alert known to the watch (made before its last
//! evaluation) held exactly when that value met its condition, and a
//! board moving the watch from `old` to `new` fires it when `old` did not
//! meet it and `new` does ([`fires`]): a crossing, not a level. An alert
//! made since the watch's last evaluation is not known yet, and fires if
//! `new` meets it. Those that `new` no longer meets are re-armed without a
//! write. The alerts a move may fire have thresholds between `old` and
//! `new` ([`Move::thresholds`]), a range of an index.

use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use ratewire_readmodel::quality::{OutlierRule, Quoted};
use ratewire_readmodel::views::{best_offer, Offer};
use rust_decimal::Decimal;

/// The rate an alert watches: one of a board's four.
pub use ratewire_readmodel::views::Field;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Condition {
    /// Strictly greater than the threshold.
    Above,
    /// Strictly less than the threshold.
    Below,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Condition::Above => "above",
            Condition::Below => "below",
        }
    }

    pub fn parse(name: &str) -> Option<Condition> {
        [Condition::Above, Condition::Below]
            .into_iter()
            .find(|c| c.name() == name)
    }

    /// Whether `value` meets the condition against `threshold`.
    pub fn holds(self, value: Decimal, threshold: Decimal) -> bool {
        match self {
            Condition::Above => value > threshold,
            Condition::Below => value < threshold,
        }
    }
}

/// The bank a watch reads: one bank, or [`BEST`].
pub type WatchBank = i64;

/// The watch bank of alerts on the best rate across active banks.
pub const BEST: WatchBank = 0;

/// A bank's rates of one currency, as alerts see them (its latest board).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    pub bank: i64,
    pub currency: CurrencyCode,
    pub cash_buying: Option<Decimal>,
    pub cash_selling: Option<Decimal>,
    pub transactional_buying: Option<Decimal>,
    pub transactional_selling: Option<Decimal>,
    /// The as-of of the board it is on.
    pub updated_at: DateTime<Utc>,
    /// The bank's previous values of the four fields (in [`Field::ALL`]
    /// order): its last ones before this board's, which the best rate's
    /// outliers are judged by, as best-rates judge them.
    pub previous: [Option<Decimal>; 4],
}

impl Quote {
    /// The bank's previous value of `field`.
    pub fn previous(&self, field: Field) -> Option<Decimal> {
        Field::ALL
            .iter()
            .position(|f| *f == field)
            .and_then(|i| self.previous[i])
    }

    pub fn value(&self, field: Field) -> Option<Decimal> {
        match field {
            Field::CashBuying => self.cash_buying,
            Field::CashSelling => self.cash_selling,
            Field::TransactionalBuying => self.transactional_buying,
            Field::TransactionalSelling => self.transactional_selling,
        }
    }
}

/// A watch's value, and the quote it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub value: Decimal,
    /// The bank quoting it (for the best rate, the best bank).
    pub holder: i64,
    pub updated_at: DateTime<Utc>,
}

/// What the watch on `field` at `bank` reads among `quotes` (one
/// currency's; `active` says whether a bank is listed): the bank's own
/// value, or for [`BEST`] the best across active banks by the best-rate
/// rule, the values `outliers` leaves out of best-rates left out here too.
/// `None` when nobody quotes it.
pub fn watched<'a>(
    field: Field,
    bank: WatchBank,
    quotes: impl IntoIterator<Item = (&'a Quote, bool)>,
    outliers: OutlierRule,
) -> Option<Seen> {
    let candidates: Vec<&Quote> = quotes
        .into_iter()
        .filter(|(quote, active)| match bank {
            BEST => *active,
            bank => quote.bank == bank,
        })
        .map(|(quote, _)| quote)
        .collect();
    let left_out = match bank {
        BEST => outliers.left_out(
            &candidates
                .iter()
                .map(|q| Quoted {
                    value: q.value(field),
                    previous: q.previous(field),
                })
                .collect::<Vec<_>>(),
        ),
        _ => vec![false; candidates.len()],
    };
    let offers = candidates.iter().zip(left_out).map(|(q, out)| Offer {
        value: q.value(field).filter(|_| !out),
        updated_at: q.updated_at,
        bank: q.bank,
    });
    let best = candidates[best_offer(field, offers)?];
    Some(Seen {
        value: best.value(field)?,
        holder: best.bank,
        updated_at: best.updated_at,
    })
}

/// One evaluation of a watch: its value before and after an event
/// (`None`: not quoted), and how many evaluations it had before this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub old: Option<Decimal>,
    pub new: Option<Decimal>,
    pub evaluations: i64,
}

impl Move {
    /// The thresholds of the known alerts this move may fire: those of
    /// `above` alerts the value rose through, those of `below` alerts it
    /// fell through (every threshold on its side when the watch was not
    /// quoted before); `None` when it fires nothing (nothing is quoted
    /// now). Alerts not known yet may fire whatever their threshold.
    pub fn thresholds(&self) -> Option<Thresholds> {
        let new = self.new?;
        let empty = (new, new);
        Some(match self.old {
            None => Thresholds {
                above: (Decimal::MIN, new),
                below: (new, Decimal::MAX),
            },
            Some(old) if old < new => Thresholds {
                above: (old, new),
                below: empty,
            },
            Some(old) => Thresholds {
                above: empty,
                below: (new, old),
            },
        })
    }
}

/// The threshold ranges a move may fire: `above` from its low end
/// included to its high end excluded (a value at the threshold does not
/// hold), `below` from its low end excluded to its high end included.
/// A move one way leaves the other range empty, so a board that re-arms
/// alerts reads none of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub above: (Decimal, Decimal),
    pub below: (Decimal, Decimal),
}

impl Thresholds {
    pub fn contain(&self, condition: Condition, threshold: Decimal) -> bool {
        match condition {
            Condition::Above => self.above.0 <= threshold && threshold < self.above.1,
            Condition::Below => self.below.0 < threshold && threshold <= self.below.1,
        }
    }
}

/// An alert as the judge needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Armed {
    pub condition: Condition,
    pub threshold: Decimal,
    /// Its watch's evaluations when it was made: until the next one its
    /// state is not known.
    pub since: i64,
}

/// Whether `alert` fires on `step`.
pub fn fires(alert: &Armed, step: &Move) -> bool {
    let Some(new) = step.new else {
        return false;
    };
    let now = alert.condition.holds(new, alert.threshold);
    if alert.since >= step.evaluations {
        // Not known yet: the first value that meets it fires.
        return now && alert.since == step.evaluations;
    }
    let before = step
        .old
        .is_some_and(|old| alert.condition.holds(old, alert.threshold));
    now && !before
}

/// Whether an alert's condition held at its watch's last evaluation:
/// `None` while it is not known (no evaluation since the alert was made)
/// or nothing is quoted.
pub fn state(
    condition: Condition,
    threshold: Decimal,
    since: i64,
    value: Option<Decimal>,
    evaluations: i64,
) -> Option<bool> {
    if evaluations <= since {
        return None;
    }
    value.map(|v| condition.holds(v, threshold))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn step(old: Option<&str>, new: Option<&str>) -> Move {
        Move {
            old: old.map(dec),
            new: new.map(dec),
            evaluations: 3,
        }
    }

    fn alert(condition: Condition, threshold: &str) -> Armed {
        Armed {
            condition,
            threshold: dec(threshold),
            since: 1,
        }
    }

    #[test]
    fn an_above_alert_fires_when_the_value_crosses_its_threshold_upward() {
        let above = alert(Condition::Above, "150");
        assert!(fires(&above, &step(Some("149"), Some("151"))));
        assert!(fires(&above, &step(Some("150"), Some("150.01"))));
        assert!(
            !fires(&above, &step(Some("151"), Some("152"))),
            "held already"
        );
        assert!(
            !fires(&above, &step(Some("149"), Some("150"))),
            "strictly above"
        );
        assert!(!fires(&above, &step(Some("151"), Some("149"))));
        assert!(
            fires(&above, &step(None, Some("151"))),
            "quoted for the first time"
        );
        assert!(!fires(&above, &step(Some("149"), None)));
    }

    #[test]
    fn a_below_alert_fires_when_the_value_crosses_its_threshold_downward() {
        let below = alert(Condition::Below, "150");
        assert!(fires(&below, &step(Some("151"), Some("149"))));
        assert!(!fires(&below, &step(Some("149"), Some("148"))));
        assert!(!fires(&below, &step(Some("151"), Some("150"))));
        assert!(fires(&below, &step(None, Some("1"))));
    }

    #[test]
    fn an_alert_not_known_yet_fires_on_the_first_value_that_meets_it() {
        let new = Armed {
            since: 3,
            ..alert(Condition::Above, "150")
        };
        assert!(fires(&new, &step(Some("151"), Some("152"))));
        assert!(!fires(&new, &step(Some("151"), Some("149"))));
        let later = Armed { since: 4, ..new };
        assert!(!fires(&later, &step(Some("149"), Some("152"))));
    }

    #[test]
    fn the_thresholds_a_move_may_fire_are_those_it_passed_through() {
        let fall = step(Some("151"), Some("149")).thresholds().unwrap();
        assert!(fall.contain(Condition::Below, dec("151")));
        assert!(!fall.contain(Condition::Below, dec("149")));
        assert!(!fall.contain(Condition::Above, dec("150")), "re-arms only");
        assert_eq!(step(Some("151"), None).thresholds(), None);
        let first = step(None, Some("1")).thresholds().unwrap();
        assert!(first.contain(Condition::Above, dec("0.5")));
        assert!(first.contain(Condition::Below, dec("1.5")));
        // Every known alert a move fires has its threshold in the ranges.
        let values = ["148", "149", "150", "151", "152"];
        for old in values.iter().map(|v| Some(*v)).chain([None]) {
            for new in values {
                let step = step(old, Some(new));
                let ranges = step.thresholds().unwrap();
                for threshold in values {
                    for condition in [Condition::Above, Condition::Below] {
                        let a = alert(condition, threshold);
                        assert_eq!(
                            fires(&a, &step),
                            ranges.contain(condition, a.threshold),
                            "{old:?} -> {new} {condition:?} {threshold}"
                        );
                    }
                }
            }
        }
    }

    fn quote(bank: i64, cash_buying: &str, at: &str) -> Quote {
        Quote {
            bank,
            currency: CurrencyCode::parse("USD").unwrap(),
            cash_buying: Some(dec(cash_buying)),
            cash_selling: Some(dec("200")),
            transactional_buying: None,
            transactional_selling: None,
            updated_at: at.parse().unwrap(),
            previous: [None; 4],
        }
    }

    #[test]
    fn the_best_watch_reads_the_best_active_bank_and_a_bank_watch_its_bank() {
        let quotes = [
            quote(5, "150", "2026-11-20T08:00:00Z"),
            quote(2, "150", "2026-11-20T08:00:00Z"),
            quote(9, "160", "2026-11-20T08:00:00Z"),
        ];
        let active = |q: &Quote| q.bank != 9;
        let seen = |bank| {
            watched(
                Field::CashBuying,
                bank,
                quotes.iter().map(|q| (q, active(q))),
                OutlierRule::default(),
            )
        };
        assert_eq!(
            seen(BEST).unwrap().holder,
            2,
            "a tie goes to the lower bank id"
        );
        assert_eq!(
            seen(9).unwrap().value,
            dec("160"),
            "inactive, but watched itself"
        );
        assert_eq!(seen(7), None);
        assert_eq!(
            watched(
                Field::TransactionalBuying,
                BEST,
                quotes.iter().map(|q| (q, true)),
                OutlierRule::default(),
            ),
            None
        );
    }

    #[test]
    fn a_tenfold_typo_is_not_the_best_rate_unless_outliers_count() {
        let mut typo = quote(4, "1510", "2026-11-20T08:00:00Z");
        typo.previous[0] = Some(dec("150"));
        let quotes = [
            quote(1, "150", "2026-11-20T08:00:00Z"),
            quote(2, "151", "2026-11-20T08:00:00Z"),
            quote(3, "149", "2026-11-20T08:00:00Z"),
            typo,
        ];
        // The highest cash buying wins: the typo, were it counted.
        let best = |rule| {
            watched(
                Field::CashBuying,
                BEST,
                quotes.iter().map(|q| (q, true)),
                rule,
            )
            .map(|seen| seen.holder)
        };
        assert_eq!(best(OutlierRule::default()), Some(2));
        let plain = OutlierRule {
            in_best: true,
            ..OutlierRule::default()
        };
        assert_eq!(best(plain), Some(4));
    }
}
