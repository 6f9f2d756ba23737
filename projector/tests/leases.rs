//! Partition leases in Postgres, round by round, as the members' heartbeats
//! run them: an even split, a partition released only once its fold lets
//! go, a dead member's partitions taken after its lease, a graceful leave
//! handing over at once, and partitions added to the topic taken without a
//! restart (the development broker cannot add partitions, so this is where
//! that is tested).

use std::collections::BTreeSet;
use std::time::Duration;

use ratewire_projector::leases::{Membership, Round};

mod common;
use common::{drop_database, fresh_pool};

const LEASE: Duration = Duration::from_secs(3);

fn set(partitions: impl IntoIterator<Item = i32>) -> BTreeSet<i32> {
    partitions.into_iter().collect()
}

/// A member as its heartbeat task drives it: what it holds, and what its
/// fold reads (the fold follows within the round in these tests).
struct Member {
    membership: Membership,
    held: BTreeSet<i32>,
}

impl Member {
    async fn join(pool: &sqlx::PgPool) -> anyhow::Result<Member> {
        let membership = Membership::new(pool.clone(), "ratewire", "topic", LEASE);
        membership.prepare().await?;
        Ok(Member {
            membership,
            held: BTreeSet::new(),
        })
    }

    /// One heartbeat; the fold then reads what is kept.
    async fn beat(&mut self, partitions: &[i32]) -> anyhow::Result<Round> {
        let round = self
            .membership
            .round(partitions, &self.held, &self.held)
            .await?;
        self.held = round.keep.clone();
        Ok(round)
    }
}

/// Beats every member a few times (as their heartbeats would) and checks
/// every partition is held by exactly one, in shares at most one apart.
async fn settle(members: &mut [&mut Member], partitions: &[i32]) -> anyhow::Result<()> {
    for _ in 0..3 {
        for member in members.iter_mut() {
            member.beat(partitions).await?;
        }
    }
    let mut all = Vec::new();
    for member in members.iter() {
        all.extend(member.held.iter().copied());
    }
    all.sort_unstable();
    assert_eq!(all, partitions, "each partition held once");
    let sizes: Vec<usize> = members.iter().map(|m| m.held.len()).collect();
    assert!(
        sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
        "uneven shares {sizes:?}"
    );
    Ok(())
}

#[tokio::test]
async fn members_split_evenly_hand_over_and_pick_up_new_partitions() -> anyhow::Result<()> {
    let (pool, name) = fresh_pool("rw_leases").await?;
    let six: Vec<i32> = (0..6).collect();

    // Alone, a member takes everything at once.
    let mut a = Member::join(&pool).await?;
    let round = a.beat(&six).await?;
    assert_eq!(round.keep, set(0..6));
    assert!(round.taken.iter().all(|(_, previous)| previous.is_none()));

    // A second joins: the first gives up its excess, each partition only
    // once its fold no longer reads it.
    let mut b = Member::join(&pool).await?;
    let first = b.beat(&six).await?;
    assert!(first.keep.is_empty(), "nothing is free yet: {first:?}");
    let giving = a
        .membership
        .round(&six, &a.held.clone(), &a.held.clone())
        .await?;
    assert_eq!(giving.keep.len(), 3);
    assert_eq!(giving.revoking.len(), 3, "still read, so not yet released");
    assert!(giving.released.is_empty());
    assert!(
        b.beat(&six).await?.keep.is_empty(),
        "revoked but not released"
    );
    // The fold lets go; the next round releases them.
    a.held = giving.keep.clone();
    let released = a.beat(&six).await?;
    assert_eq!(released.released.len(), 3);
    settle(&mut [&mut a, &mut b], &six).await?;

    // New partitions on the topic are shared at the next heartbeats.
    let nine: Vec<i32> = (0..9).collect();
    settle(&mut [&mut a, &mut b], &nine).await?;

    // A third dies without a word after taking its share: the others take
    // its partitions once its lease lapses, naming it as the previous owner.
    let mut c = Member::join(&pool).await?;
    settle(&mut [&mut a, &mut b, &mut c], &nine).await?;
    let dead = c.membership.member.clone();
    let dead_held = c.held.clone();
    assert_eq!(dead_held.len(), 3);
    a.beat(&nine).await?;
    b.beat(&nine).await?;
    assert!(a.held.is_disjoint(&dead_held) && b.held.is_disjoint(&dead_held));
    // The living keep beating (a heartbeat is a third of the lease).
    let mut taken = Vec::new();
    let deadline = tokio::time::Instant::now() + LEASE + Duration::from_secs(3);
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(LEASE / 3).await;
        for member in [&mut a, &mut b] {
            taken.extend(member.beat(&nine).await?.taken);
        }
    }
    let from_dead: BTreeSet<i32> = taken
        .iter()
        .filter(|(_, previous)| previous.as_deref() == Some(dead.as_str()))
        .map(|(p, _)| *p)
        .collect();
    assert_eq!(from_dead, dead_held);
    settle(&mut [&mut a, &mut b], &nine).await?;

    // A graceful leave frees everything at once; the one left takes all.
    b.membership.leave().await?;
    let round = a.beat(&nine).await?;
    assert_eq!(round.keep, set(0..9));
    assert_eq!(round.members, 1);

    drop_database(pool, &name).await
}
