//! A batch folded in several transactions at once, one per group of
//! partitions.
//!
//! A bank's events are all in one partition (the key is the bank), and
//! nothing the fold writes for one bank depends on another bank's rows, so
//! partitions can be applied side by side: each lane is an
//! [`apply_batch`] of its own, with its own connection, locked positions
//! and commit. On a backlog one transaction at a time left Postgres idle
//! while the projector decoded the next batch, and the projector idle while
//! Postgres wrote; lanes overlap the two and let Postgres use more than one
//! core.
//!
//! The one table lanes share is `currencies`, whose rule does not depend on
//! the order the lanes commit in (see `event::currencies_first_quoted`).
//!
//! If a lane fails, the others may have committed: the caller retries the
//! whole batch, and what was committed is skipped by its stored positions
//! (as after a commit that answered an error).

use std::collections::BTreeMap;

use sqlx::PgPool;

use ratewire_alerts::evaluation::Judge;

use super::{apply_batch, BatchOutcome, Incoming};
use crate::error::Result;
use crate::holes::Hole;

/// Folds `batch` in up to `lanes` transactions at once; the outcome is
/// theirs together.
pub async fn apply_lanes(
    pool: &PgPool,
    topic: &str,
    batch: &[Incoming],
    holes: &[Hole],
    judge: Option<&Judge>,
    lanes: usize,
) -> Result<BatchOutcome> {
    let first = batch.first().map(|m| m.partition);
    if lanes <= 1 || batch.iter().all(|m| Some(m.partition) == first) {
        return apply_batch(pool, topic, batch, holes, judge).await;
    }
    let groups = split(batch, lanes);
    // Tasks, not joined futures: decoding is CPU work, and joined futures
    // would all run on one thread.
    let tasks: Vec<_> = groups
        .into_iter()
        .map(|group| {
            let (pool, topic, holes) = (pool.clone(), topic.to_owned(), holes.to_vec());
            let judge = judge.cloned();
            tokio::spawn(
                async move { apply_batch(&pool, &topic, &group, &holes, judge.as_ref()).await },
            )
        })
        .collect();
    let mut merged = BatchOutcome::default();
    let mut failed = None;
    for task in tasks {
        match task.await {
            Ok(Ok(outcome)) => merged.merge(outcome),
            Ok(Err(e)) => failed = failed.or(Some(e)),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(merged),
    }
}

/// The batch's messages by lane, in log order within each partition; a
/// partition's messages always go to one lane.
fn split(batch: &[Incoming], lanes: usize) -> Vec<Vec<Incoming>> {
    let mut by_partition: BTreeMap<i32, Vec<Incoming>> = BTreeMap::new();
    for message in batch {
        by_partition
            .entry(message.partition)
            .or_default()
            .push(message.clone());
    }
    let lanes = lanes.clamp(1, by_partition.len().max(1));
    let mut groups: Vec<Vec<Incoming>> = vec![Vec::new(); lanes];
    // Largest partitions first, each to the lane with least so far.
    let mut parts: Vec<Vec<Incoming>> = by_partition.into_values().collect();
    parts.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for part in parts {
        let lane = groups
            .iter_mut()
            .min_by_key(|g| g.len())
            .expect("at least one lane");
        lane.extend(part);
    }
    groups.retain(|g| !g.is_empty());
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewire_proto::BankId;

    fn message(partition: i32, offset: i64) -> Incoming {
        Incoming::keyed(partition, offset, BankId::new(1).unwrap(), Vec::new())
    }

    #[test]
    fn a_partition_stays_in_one_lane_in_order() {
        let batch: Vec<Incoming> = [(0, 5), (1, 9), (0, 6), (2, 1), (0, 7), (1, 10)]
            .into_iter()
            .map(|(p, o)| message(p, o))
            .collect();
        let groups = split(&batch, 2);
        assert_eq!(groups.len(), 2);
        let lanes_of = |p: i32| {
            groups
                .iter()
                .filter(|g| g.iter().any(|m| m.partition == p))
                .count()
        };
        assert!((0..3).all(|p| lanes_of(p) == 1));
        let zero: Vec<i64> = groups
            .iter()
            .flatten()
            .filter(|m| m.partition == 0)
            .map(|m| m.offset)
            .collect();
        assert_eq!(zero, [5, 6, 7]);
        // The busiest partition has a lane to itself.
        assert!(groups.iter().any(|g| g.iter().all(|m| m.partition == 0)));
    }

    #[test]
    fn one_partition_or_one_lane_is_one_group() {
        let batch = vec![message(0, 1), message(0, 2)];
        assert_eq!(split(&batch, 4).len(), 1);
        let batch = vec![message(0, 1), message(1, 2)];
        assert_eq!(split(&batch, 1).len(), 1);
        assert!(split(&[], 3).is_empty());
    }
}
