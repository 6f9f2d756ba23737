//! A bank's quality report over a window, and its score.
//!
//! The score, from 0 to 100, is the weighted sum of four components, each
//! a share from 0 to 1 (docs/api.md, "Quality"):
//! - `publishing` (weight 40): the share of the schedule's slots with a
//!   board (1 without a schedule, or before a slot has ended);
//! - `plausibility` (20): the share of the boards without an outlier;
//! - `stability` (20): one less the corrections and retractions per board
//!   (at least 0);
//! - `spreadCap` (20): the share of the window no spread was over the cap.
//!
//! Without a board in the window, plausibility and stability are 1: there
//! was nothing to get wrong, and publishing says what was missed.

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, Schedule};

use super::slots::{median, Judged};
use super::spread::{share_in_breach, Breach};

/// What went into one bank's report, as read.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Boards received in the window (corrections included).
    pub boards: u64,
    pub corrections: u64,
    pub retractions: u64,
    /// Outlying values on the window's boards, and the boards with any.
    pub outliers: u64,
    pub boards_with_outliers: u64,
    pub last_board_at: Option<DateTime<Utc>>,
}

/// One bank's report over `[from, to)`.
#[derive(Debug, Clone)]
pub struct Report {
    pub bank_id: BankId,
    pub days: u32,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The schedule in force at the window's end.
    pub schedule: Option<Schedule>,
    pub slots: Judged,
    pub tally: Tally,
    pub breaches: Vec<Breach>,
    /// The median delay after a daily deadline, in seconds.
    pub median_delay_seconds: Option<i64>,
    pub score: Score,
}

/// The score and its components.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    pub value: u8,
    pub components: [Component; 4],
}

/// One component of the score: its share, weight and points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Component {
    pub name: &'static str,
    pub weight: u8,
    /// From 0 to 1.
    pub share: f64,
}

impl Component {
    pub fn points(&self) -> f64 {
        self.share * f64::from(self.weight)
    }
}

impl Report {
    /// The report of what was read for one bank.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        bank_id: BankId,
        days: u32,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        schedule: Option<Schedule>,
        slots: Judged,
        tally: Tally,
        breaches: Vec<Breach>,
    ) -> Self {
        let daily = matches!(schedule, Some(Schedule::Days { .. }));
        let median_delay_seconds = daily.then(|| median(&slots.delays)).flatten();
        let score = Score::of(&slots, &tally, share_in_breach(&breaches, from, to));
        Self {
            bank_id,
            days,
            from,
            to,
            schedule,
            slots,
            tally,
            breaches,
            median_delay_seconds,
            score,
        }
    }
}

impl Score {
    /// The score of `slots` and `tally`, with `in_breach` the share of the
    /// window some spread was over the cap.
    pub fn of(slots: &Judged, tally: &Tally, in_breach: f64) -> Self {
        let share = |part: u64, whole: u64| match whole {
            0 => 1.0,
            _ => (1.0 - part as f64 / whole as f64).clamp(0.0, 1.0),
        };
        let components = [
            Component {
                name: "publishing",
                weight: 40,
                share: share(slots.missed, slots.expected),
            },
            Component {
                name: "plausibility",
                weight: 20,
                share: share(tally.boards_with_outliers, tally.boards),
            },
            Component {
                name: "stability",
                weight: 20,
                share: share(tally.corrections + tally.retractions, tally.boards),
            },
            Component {
                name: "spreadCap",
                weight: 20,
                share: (1.0 - in_breach).clamp(0.0, 1.0),
            },
        ];
        let points: f64 = components.iter().map(Component::points).sum();
        Self {
            value: points.round().clamp(0.0, 100.0) as u8,
            components,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bank_that_kept_to_everything_scores_100() {
        let score = Score::of(&Judged::default(), &Tally::default(), 0.0);
        assert_eq!(score.value, 100);
    }

    #[test]
    fn each_component_weighs_as_documented() {
        let slots = Judged {
            expected: 10,
            missed: 5,
            ..Judged::default()
        };
        let tally = Tally {
            boards: 4,
            corrections: 1,
            retractions: 1,
            boards_with_outliers: 1,
            ..Tally::default()
        };
        let score = Score::of(&slots, &tally, 0.25);
        let points: Vec<f64> = score.components.iter().map(Component::points).collect();
        // 0.5 × 40, 0.75 × 20, 0.5 × 20, 0.75 × 20.
        assert_eq!(points, [20.0, 15.0, 10.0, 15.0]);
        assert_eq!(score.value, 60);
    }

    #[test]
    fn more_revisions_than_boards_count_as_none_kept() {
        let tally = Tally {
            boards: 1,
            corrections: 3,
            ..Tally::default()
        };
        assert_eq!(
            Score::of(&Judged::default(), &tally, 0.0).components[2].share,
            0.0
        );
    }
}
