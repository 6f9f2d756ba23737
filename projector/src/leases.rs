//! Elastic scale-out (`RATEWIRE_PROJECTOR_PARTITIONS=auto`, the default):
//! live projectors divide the topic's partitions among themselves through
//! leases in Postgres, the store that already holds the offsets, so it
//! works on any Kafka-compatible broker (a Kafka consumer group would need
//! the broker to rebalance groups, which some brokers in use here do not).
//!
//! In the control schema, `projector_members` has a row per live process
//! (renewed every heartbeat, expiring after the lease time) and
//! `partition_leases` a row per partition: its owner and when the lease
//! expires. Every heartbeat (a third of the lease time) each member, in
//! one transaction: renews its membership and its leases; computes its
//! fair share from the live members (sorted by id, the first `P mod n`
//! take one more); marks what it holds beyond its share for release; and
//! takes free or expired partitions up to its share (`SKIP LOCKED`, its
//! previous ones first). A partition is released only once the fold has
//! stopped reading it, and taken only when free or expired, so in normal
//! operation one instance folds it at a time.
//!
//! Takeover: a member that stops gracefully releases everything and
//! leaves at once (the others take over at their next heartbeat); one
//! killed is noticed when its lease expires (`RATEWIRE_PROJECTOR_LEASE_SECS`,
//! 6 s by default, so within lease + heartbeat = 8 s). An overlap, two
//! members folding one partition, needs a member stalled past its lease
//! (frozen, or cut from Postgres while still reading the broker): it lasts
//! until that member's next heartbeat, and costs nothing but re-reading:
//! every batch locks its partitions' stored offsets, so a message is
//! applied once whoever reads it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::StreamConsumer;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::Result;

/// What the fold is told to read, and what it tells back it reads.
pub struct Ownership {
    /// The partitions this member may fold now.
    pub desired: watch::Receiver<BTreeSet<i32>>,
    /// The partitions the consumer is assigned (set by the fold).
    pub assigned: watch::Sender<BTreeSet<i32>>,
}

/// This process's membership: its id, and the tables it works on.
#[derive(Clone)]
pub struct Membership {
    pool: PgPool,
    members: String,
    leases: String,
    topic: String,
    pub member: String,
    host: String,
    lease: Duration,
}

/// One heartbeat's outcome.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Round {
    /// What this member may fold: held, minus what it gives up.
    pub keep: BTreeSet<i32>,
    /// Taken this round, with the previous owner (`None`: it was free).
    pub taken: Vec<(i32, Option<String>)>,
    /// Released this round.
    pub released: Vec<i32>,
    /// Given up but still read by the fold: released once it lets go.
    pub revoking: Vec<i32>,
    /// Live members, this one included.
    pub members: usize,
}

impl Membership {
    pub fn new(pool: PgPool, control: &str, topic: &str, lease: Duration) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "unknown".into());
        Self {
            pool,
            members: format!("{control}.projector_members"),
            leases: format!("{control}.partition_leases"),
            topic: topic.to_owned(),
            member: uuid::Uuid::new_v4().to_string(),
            host,
            lease,
        }
    }

    pub fn heartbeat(&self) -> Duration {
        self.lease / 3
    }

    /// Creates the tables if needed.
    pub async fn prepare(&self) -> Result<()> {
        let control = self.members.split('.').next().unwrap_or_default();
        ratewire_service::postgres::create_schema(&self.pool, control).await?;
        for statement in [
            format!(
                "CREATE TABLE IF NOT EXISTS {} (
                     topic      TEXT        NOT NULL,
                     member     TEXT        NOT NULL,
                     host       TEXT        NOT NULL,
                     started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                     expires_at TIMESTAMPTZ NOT NULL,
                     PRIMARY KEY (topic, member)
                 )",
                self.members
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {} (
                     topic      TEXT        NOT NULL,
                     partition  INTEGER     NOT NULL,
                     owner      TEXT,
                     expires_at TIMESTAMPTZ,
                     changed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                     PRIMARY KEY (topic, partition)
                 )",
                self.leases
            ),
        ] {
            match sqlx::query(&statement).execute(&self.pool).await {
                Ok(_) => {}
                // Two processes creating it at once: the loser finds it made.
                Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// One heartbeat over `partitions` (the topic's, as the broker lists
    /// them). `assigned`: what the fold reads now (released only once it
    /// stopped); `before`: what this member held (taken back first).
    pub async fn round(
        &self,
        partitions: &[i32],
        assigned: &BTreeSet<i32>,
        before: &BTreeSet<i32>,
    ) -> Result<Round> {
        let lease_ms = self.lease.as_millis() as i64;
        let mut tx = self.pool.begin().await?;
        sqlx::query(&format!(
            "INSERT INTO {} (topic, member, host, expires_at)
             VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')
             ON CONFLICT (topic, member) DO UPDATE SET expires_at = EXCLUDED.expires_at",
            self.members
        ))
        .bind(&self.topic)
        .bind(&self.member)
        .bind(&self.host)
        .bind(lease_ms)
        .execute(&mut *tx)
        .await?;
        sqlx::query(&format!(
            "INSERT INTO {} (topic, partition) SELECT $1, unnest($2::int[])
             ON CONFLICT (topic, partition) DO NOTHING",
            self.leases
        ))
        .bind(&self.topic)
        .bind(partitions)
        .execute(&mut *tx)
        .await?;
        let members: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT member FROM {} WHERE topic = $1 AND expires_at > now() ORDER BY member",
            self.members
        ))
        .bind(&self.topic)
        .fetch_all(&mut *tx)
        .await?;
        let share = fair_share(partitions.len(), &members, &self.member);
        let held: BTreeSet<i32> = sqlx::query_scalar::<_, i32>(&format!(
            "UPDATE {} SET expires_at = now() + $3 * interval '1 millisecond'
             WHERE topic = $1 AND owner = $2 AND partition = ANY($4) RETURNING partition",
            self.leases
        ))
        .bind(&self.topic)
        .bind(&self.member)
        .bind(lease_ms)
        .bind(partitions)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
        let mut round = Round {
            members: members.len(),
            ..Round::default()
        };
        if held.len() > share {
            // Give up the highest-numbered first; release each only once
            // the fold no longer reads it.
            let extra: Vec<i32> = held
                .iter()
                .rev()
                .take(held.len() - share)
                .copied()
                .collect();
            let releasable: Vec<i32> = extra
                .iter()
                .copied()
                .filter(|p| !assigned.contains(p))
                .collect();
            if !releasable.is_empty() {
                sqlx::query(&format!(
                    "UPDATE {} SET owner = NULL, expires_at = NULL, changed_at = now()
                     WHERE topic = $1 AND owner = $2 AND partition = ANY($3)",
                    self.leases
                ))
                .bind(&self.topic)
                .bind(&self.member)
                .bind(&releasable)
                .execute(&mut *tx)
                .await?;
            }
            round.revoking = extra
                .iter()
                .copied()
                .filter(|p| assigned.contains(p))
                .collect();
            round.released = releasable;
            round.keep = held
                .iter()
                .copied()
                .filter(|p| !extra.contains(p))
                .collect();
        } else {
            round.keep = held.clone();
            let wanted = (share - held.len()) as i64;
            if wanted > 0 {
                let before: Vec<i32> = before.iter().copied().collect();
                let taken: Vec<(i32, Option<String>)> = sqlx::query_as(&format!(
                    "WITH free AS (
                         SELECT partition, owner AS previous FROM {leases}
                         WHERE topic = $1 AND partition = ANY($2)
                           AND (owner IS NULL OR expires_at < now())
                         ORDER BY partition = ANY($6) DESC, owner IS NULL DESC, partition
                         LIMIT $3
                         FOR UPDATE SKIP LOCKED)
                     UPDATE {leases} l
                     SET owner = $4, expires_at = now() + $5 * interval '1 millisecond', changed_at = now()
                     FROM free WHERE l.topic = $1 AND l.partition = free.partition
                     RETURNING l.partition, free.previous",
                    leases = self.leases
                ))
                .bind(&self.topic)
                .bind(partitions)
                .bind(wanted)
                .bind(&self.member)
                .bind(lease_ms)
                .bind(&before)
                .fetch_all(&mut *tx)
                .await?;
                round.keep.extend(taken.iter().map(|(p, _)| *p));
                round.taken = taken;
            }
        }
        tx.commit().await?;
        Ok(round)
    }

    /// Gives everything up and leaves (a graceful stop): the others take
    /// over at their next heartbeat instead of waiting for the leases.
    pub async fn leave(&self) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(&format!(
            "UPDATE {} SET owner = NULL, expires_at = NULL, changed_at = now()
             WHERE topic = $1 AND owner = $2",
            self.leases
        ))
        .bind(&self.topic)
        .bind(&self.member)
        .execute(&mut *tx)
        .await?;
        sqlx::query(&format!(
            "DELETE FROM {} WHERE topic = $1 AND (member = $2 OR expires_at < now() - interval '1 day')",
            self.members
        ))
        .bind(&self.topic)
        .bind(&self.member)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// How many of `partitions` partitions `member` should hold among the live
/// `members` (sorted): an even split, the first `partitions mod n` one more.
pub fn fair_share(partitions: usize, members: &[String], member: &str) -> usize {
    let Some(index) = members.iter().position(|m| m == member) else {
        return 0;
    };
    let n = members.len();
    partitions / n + usize::from(index < partitions % n)
}

/// The heartbeat task: renews, balances and tells the fold what to read,
/// until `shutdown`. A member that cannot reach Postgres for longer than
/// its lease stops folding: someone else may hold its partitions by then.
pub fn spawn(
    membership: Membership,
    consumer: Arc<StreamConsumer>,
    shutdown: CancellationToken,
) -> (Ownership, tokio::task::JoinHandle<()>) {
    let (desired_tx, desired) = watch::channel(BTreeSet::new());
    let (assigned, mut assigned_rx) = watch::channel(BTreeSet::new());
    let task = tokio::spawn(async move {
        let prepared = ratewire_service::retry("preparing the partition leases", &shutdown, || {
            membership.prepare()
        })
        .await;
        if prepared.is_none() {
            return;
        }
        let mut tick = tokio::time::interval(membership.heartbeat());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut partitions: Vec<i32> = Vec::new();
        let mut renewed = Instant::now();
        let mut failing = false;
        // The first round is always told, even when it takes nothing: the
        // fold waits for it before it calls itself consuming.
        let mut first = true;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
                // The fold let go of something: release it now rather than
                // at the next heartbeat.
                changed = assigned_rx.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
            match crate::consumer::topic_partitions(&consumer, &membership.topic).await {
                Ok(now) => {
                    if now.len() > partitions.len() && !partitions.is_empty() {
                        info!(
                            from = partitions.len(),
                            to = now.len(),
                            "the topic has new partitions"
                        );
                    }
                    partitions = now;
                }
                Err(e) if partitions.is_empty() => {
                    warn!(error = %e, "listing the topic's partitions failed; will retry");
                    continue;
                }
                // Carry on with the partitions known.
                Err(_) => {}
            }
            let assigned_now = assigned_rx.borrow_and_update().clone();
            let before = desired_tx.borrow().clone();
            match membership.round(&partitions, &assigned_now, &before).await {
                Ok(round) => {
                    renewed = Instant::now();
                    if failing {
                        info!("postgres answers again; leases renewed");
                        failing = false;
                    }
                    report(&membership.member, &before, &round);
                    desired_tx.send_if_modified(|desired| {
                        let changed = std::mem::take(&mut first) || *desired != round.keep;
                        *desired = round.keep.clone();
                        changed
                    });
                }
                Err(e) => {
                    crate::metrics::postgres_error();
                    if !failing {
                        warn!(error = %e, "renewing partition leases failed; will retry");
                        failing = true;
                    }
                    if renewed.elapsed() > membership.lease && !before.is_empty() {
                        warn!(partitions = ?before, "leases lapsed while postgres was unreachable; folding nothing until they are taken again");
                        desired_tx.send_replace(BTreeSet::new());
                    }
                }
            }
        }
    });
    (Ownership { desired, assigned }, task)
}

/// Logs and counts a round's changes of ownership.
fn report(member: &str, before: &BTreeSet<i32>, round: &Round) {
    for (partition, previous) in &round.taken {
        metrics::counter!("ratewire_projector_partition_changes_total", "change" => "taken")
            .increment(1);
        match previous {
            Some(previous) => info!(
                partition,
                member, previous, "took over an expired partition lease"
            ),
            None => info!(partition, member, "took a free partition"),
        }
    }
    for partition in &round.released {
        metrics::counter!("ratewire_projector_partition_changes_total", "change" => "released")
            .increment(1);
        info!(
            partition,
            member,
            members = round.members,
            "released a partition for a fair share"
        );
    }
    let taken: BTreeSet<i32> = round.taken.iter().map(|(p, _)| *p).collect();
    for partition in before.difference(&round.keep) {
        if !round.released.contains(partition)
            && !round.revoking.contains(partition)
            && !taken.contains(partition)
        {
            metrics::counter!("ratewire_projector_partition_changes_total", "change" => "lost")
                .increment(1);
            warn!(partition, member, "lost a partition whose lease lapsed");
        }
    }
    metrics::gauge!("ratewire_projector_partitions_owned").set(round.keep.len() as f64);
    metrics::gauge!("ratewire_projector_members").set(round.members as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("m{i}")).collect()
    }

    #[test]
    fn shares_are_even_and_add_up() {
        for (partitions, n) in [(6, 3), (6, 4), (7, 3), (2, 3), (0, 2), (12, 5)] {
            let all = members(n);
            let shares: Vec<usize> = all
                .iter()
                .map(|m| fair_share(partitions, &all, m))
                .collect();
            assert_eq!(
                shares.iter().sum::<usize>(),
                partitions,
                "{partitions} over {n}"
            );
            let (low, high) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
            assert!(high - low <= 1, "{partitions} over {n}: {shares:?}");
        }
        assert_eq!(fair_share(6, &members(2), "not a member"), 0);
    }
}
