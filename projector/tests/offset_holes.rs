//! Offsets with no message: the stored position steps over a hole only when
//! the read proved it, and never over a message that was merely not received.

use chrono::{SubsecRound, Utc};
use ratewire_projector::fold::{apply_batch, Gap, Incoming};
use ratewire_projector::holes::{Hole, Reads, Start};
use std::collections::BTreeMap;

mod common;
use common::{bank_and_boards, drop_database, fresh_pool, messages};

const TOPIC: &str = "holes";

/// A registration and three boards of one bank at offsets 0, 1, 2, 3.
fn log() -> Vec<Incoming> {
    let now = Utc::now().trunc_subsecs(0);
    let log = bank_and_boards(3, now, 3);
    messages(&log)
}

fn at(mut message: Incoming, offset: i64) -> Incoming {
    message.offset = offset;
    message
}

#[tokio::test]
async fn a_message_past_the_position_waits_until_the_read_proves_the_offsets_between_empty(
) -> anyhow::Result<()> {
    let (pool, name) = fresh_pool("rw_holes").await?;
    let log = log();
    // The broker holds offsets 0, 1, 4, 5: nothing at 2 and 3.
    let on_broker = [
        log[0].clone(),
        log[1].clone(),
        at(log[2].clone(), 4),
        at(log[3].clone(), 5),
    ];
    apply_batch(&pool, TOPIC, &on_broker[..2], &[], None).await?;

    // A read started at the stored position 2 that begins at 4 proves
    // nothing: 2 and 3 may exist and have been skipped by the broker.
    let mut reads = Reads::default();
    reads.started(&BTreeMap::from([(
        0,
        Start {
            offset: 2,
            at_log_start: false,
        },
    )]));
    let holes = reads.holes(on_broker[2..].iter().map(|m| (m.partition, m.offset)));
    assert_eq!(holes, vec![]);
    let outcome = apply_batch(&pool, TOPIC, &on_broker[2..], &holes, None).await?;
    assert_eq!(outcome.applied, 0);
    assert_eq!(
        outcome.gaps,
        vec![Gap {
            partition: 0,
            expected: 2,
            found: 4
        }]
    );
    assert_eq!(outcome.positions[&0], 2, "the position did not move");

    // Started further back, the read delivers 1 (applied already) and then
    // 4: offsets 2 and 3 are proven empty and the position steps over them.
    reads.started(&BTreeMap::from([(
        0,
        Start {
            offset: 1,
            at_log_start: false,
        },
    )]));
    let holes = reads.holes(on_broker[1..].iter().map(|m| (m.partition, m.offset)));
    assert_eq!(
        holes,
        vec![Hole {
            partition: 0,
            from: 2,
            to: 4
        }]
    );
    let outcome = apply_batch(&pool, TOPIC, &on_broker[1..], &holes, None).await?;
    assert_eq!((outcome.skipped, outcome.applied), (1, 2));
    assert_eq!(outcome.positions[&0], 6);
    assert_eq!(
        outcome.crossed,
        vec![Hole {
            partition: 0,
            from: 2,
            to: 4
        }]
    );
    let boards: i64 = sqlx::query_scalar("SELECT count(*) FROM boards")
        .fetch_one(&pool)
        .await?;
    assert_eq!(boards, 3, "every board the broker holds is folded");

    drop_database(pool, name).await
}

#[tokio::test]
async fn a_hole_proven_for_other_offsets_does_not_let_a_missing_message_through(
) -> anyhow::Result<()> {
    let (pool, name) = fresh_pool("rw_holes").await?;
    let log = log();
    apply_batch(&pool, TOPIC, &log[..2], &[], None).await?;
    // Offset 2 exists but was not received; a hole elsewhere is no licence.
    let stray = Hole {
        partition: 0,
        from: 2,
        to: 5,
    };
    let outcome = apply_batch(&pool, TOPIC, &[log[3].clone()], &[stray], None).await?;
    assert_eq!(outcome.applied, 0);
    assert_eq!(outcome.positions[&0], 2);
    assert!(outcome.crossed.is_empty());

    drop_database(pool, name).await
}
