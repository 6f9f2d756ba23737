//! Partitions whose events wait while their stored position stands still,
//! whoever owns them: a partition no member reads (a revocation the group
//! lost holds one until its rebalance timeout) or an owner that is stuck.
//! The lag gauges cover only the partitions an instance owns, so they
//! cannot show the first. Every member looks at every partition and
//! reports the same count, so it shows while any member runs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use tracing::{info, warn};

/// How long a partition's events may wait with its position unmoved
/// before it counts as stalled: longer than a batch or a hand-over.
pub const STALLED_AFTER: Duration = Duration::from_secs(10);

/// What each partition looked like, across the reports.
#[derive(Debug, Default)]
pub struct Stalls {
    /// Each partition's stored position, and since when it has been there
    /// with events waiting.
    since: BTreeMap<i32, (i64, Instant)>,
    stalled: BTreeSet<i32>,
}

/// What one look changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Partitions stalled since this look.
    pub stalled: Vec<i32>,
    /// Partitions stalled before that moved again, or have nothing waiting.
    pub moving: Vec<i32>,
}

impl Stalls {
    /// One look at `now`: each partition's stored next offset (absent: 0,
    /// never applied) and the broker's high watermark. Partitions the
    /// broker did not answer for keep their state.
    pub fn observe(
        &mut self,
        now: Instant,
        positions: &BTreeMap<i32, i64>,
        highs: &BTreeMap<i32, i64>,
    ) -> Changes {
        let mut changes = Changes::default();
        for (&partition, &high) in highs {
            let position = positions.get(&partition).copied().unwrap_or(0);
            let waiting = high > position;
            let since = match self.since.get(&partition) {
                Some(&(at, since)) if waiting && at == position => since,
                _ => now,
            };
            self.since.insert(partition, (position, since));
            let stalled = waiting && now.duration_since(since) >= STALLED_AFTER;
            match (stalled, self.stalled.contains(&partition)) {
                (true, false) => {
                    self.stalled.insert(partition);
                    changes.stalled.push(partition);
                }
                (false, true) => {
                    self.stalled.remove(&partition);
                    changes.moving.push(partition);
                }
                _ => {}
            }
        }
        changes
    }

    /// [`Stalls::observe`], then the gauge and a log line for each change.
    /// `owned` are this instance's partitions.
    pub fn report(
        &mut self,
        now: Instant,
        positions: &BTreeMap<i32, i64>,
        highs: &BTreeMap<i32, i64>,
        owned: &BTreeSet<i32>,
    ) {
        let changes = self.observe(now, positions, highs);
        metrics::gauge!("ratewire_projector_partitions_stalled").set(self.count() as f64);
        for partition in changes.stalled {
            let waiting = highs[&partition] - positions.get(&partition).copied().unwrap_or(0);
            warn!(
                partition,
                waiting,
                owned_here = owned.contains(&partition),
                seconds = self.standing(partition, now).as_secs(),
                "events wait on a partition whose position does not move: no member reads it, or its reader is stuck"
            );
        }
        for partition in changes.moving {
            info!(partition, "a stalled partition moves again");
        }
    }

    /// How many partitions are stalled now.
    pub fn count(&self) -> usize {
        self.stalled.len()
    }

    /// How long `partition` has stood still with events waiting.
    pub fn standing(&self, partition: i32, now: Instant) -> Duration {
        self.since
            .get(&partition)
            .map_or(Duration::ZERO, |(_, since)| now.duration_since(*since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(i32, i64)]) -> BTreeMap<i32, i64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn a_partition_with_events_waiting_and_a_position_unmoved_stalls_after_a_while() {
        let mut stalls = Stalls::default();
        let start = Instant::now();
        let highs = map(&[(0, 10), (1, 5)]);
        let positions = map(&[(0, 10), (1, 3)]);
        assert_eq!(
            stalls.observe(start, &positions, &highs),
            Changes::default()
        );
        let later = start + STALLED_AFTER;
        let changes = stalls.observe(later, &positions, &highs);
        assert_eq!(changes.stalled, vec![1]);
        assert_eq!(stalls.count(), 1);
        assert_eq!(stalls.standing(1, later), STALLED_AFTER);
        assert_eq!(stalls.standing(0, later), Duration::ZERO);
    }

    #[test]
    fn a_partition_never_applied_counts_from_offset_zero() {
        let mut stalls = Stalls::default();
        let start = Instant::now();
        stalls.observe(start, &map(&[]), &map(&[(2, 1)]));
        let changes = stalls.observe(start + STALLED_AFTER, &map(&[]), &map(&[(2, 1)]));
        assert_eq!(changes.stalled, vec![2]);
    }

    #[test]
    fn a_position_that_moves_starts_the_wait_again() {
        let mut stalls = Stalls::default();
        let start = Instant::now();
        let highs = map(&[(0, 100)]);
        stalls.observe(start, &map(&[(0, 10)]), &highs);
        let half = start + STALLED_AFTER / 2;
        stalls.observe(half, &map(&[(0, 20)]), &highs);
        let changes = stalls.observe(start + STALLED_AFTER, &map(&[(0, 20)]), &highs);
        assert_eq!(changes, Changes::default());
        assert_eq!(stalls.count(), 0);
    }

    #[test]
    fn a_stalled_partition_that_moves_or_empties_is_reported_moving() {
        let mut stalls = Stalls::default();
        let start = Instant::now();
        let highs = map(&[(0, 100), (1, 100)]);
        let stuck = map(&[(0, 10), (1, 10)]);
        stalls.observe(start, &stuck, &highs);
        stalls.observe(start + STALLED_AFTER, &stuck, &highs);
        assert_eq!(stalls.count(), 2);
        let changes = stalls.observe(
            start + STALLED_AFTER * 2,
            &map(&[(0, 11), (1, 100)]),
            &highs,
        );
        assert_eq!(changes.moving, vec![0, 1]);
        assert_eq!(stalls.count(), 0);
    }

    #[test]
    fn a_partition_the_broker_did_not_answer_for_keeps_its_state() {
        let mut stalls = Stalls::default();
        let start = Instant::now();
        stalls.observe(start, &map(&[(0, 1)]), &map(&[(0, 5)]));
        stalls.observe(start + STALLED_AFTER, &map(&[(0, 1)]), &map(&[]));
        let changes = stalls.observe(start + STALLED_AFTER, &map(&[(0, 1)]), &map(&[(0, 5)]));
        assert_eq!(changes.stalled, vec![0]);
    }
}
