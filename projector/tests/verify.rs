//! `verify` and `compare` find two generations equal when the same log was
//! folded into both, and name the table when it was not. A generation a
//! replay loaded is analyzed table by table before it is read.

use chrono::{Duration, SubsecRound, Utc};
use ratewire_projector::fold::{apply_batch, Incoming};
use ratewire_projector::verify::{compare_tables, TABLES};
use ratewire_readmodel::db;

mod common;
use common::{bank_and_boards, drop_database, fresh_pool, messages};

const TOPIC: &str = "verify";

/// A registration and two boards of one bank, stamped by the broker (the
/// known-at times come from the log, as in a replay).
fn log() -> Vec<Incoming> {
    let now = Utc::now().trunc_subsecs(0);
    let log = bank_and_boards(4, now, 2);
    messages(&log)
        .into_iter()
        .map(|mut message| {
            message.timestamp = Some(now + Duration::seconds(message.offset));
            message
        })
        .collect()
}

#[tokio::test]
async fn generations_folded_from_one_log_are_equal_and_an_extra_board_is_named(
) -> anyhow::Result<()> {
    let (live, database) = fresh_pool("rw_verify").await?;
    let replayed = db::writer_pool(&database.url(), "replayed", 2)?;
    db::migrate(&replayed, "replayed").await?;
    let log = log();
    // The live fold in two batches, the replay in one.
    apply_batch(&live, TOPIC, &log[..1], &[], None).await?;
    apply_batch(&live, TOPIC, &log[1..2], &[], None).await?;
    apply_batch(&replayed, TOPIC, &log[..2], &[], None).await?;

    let (rows, differences) = compare_tables(&live, "readmodel", "replayed").await?;
    assert!(differences.is_empty(), "{differences:?}");
    assert_eq!(rows.len(), TABLES.len());
    assert_eq!((rows["banks"], rows["boards"], rows["rates"]), (1, 1, 1));

    // The live generation has folded one more board: one row more, named
    // with the compared generation's count.
    apply_batch(&live, TOPIC, &log[2..], &[], None).await?;
    let (rows, differences) = compare_tables(&live, "readmodel", "replayed").await?;
    assert_eq!(rows["board_versions"], 2);
    assert!(
        differences.contains(&"board_versions: 1 rows differ (2 in readmodel)".to_owned()),
        "{differences:?}"
    );
    assert!(
        differences
            .iter()
            .any(|d| d.starts_with("applied_events: ")),
        "{differences:?}"
    );
    let (_, reversed) = compare_tables(&live, "replayed", "readmodel").await?;
    assert!(
        reversed.contains(&"board_versions: 1 rows differ (1 in replayed)".to_owned()),
        "{reversed:?}"
    );

    replayed.close().await;
    drop_database(live, database).await
}

#[tokio::test]
async fn analyzing_a_loaded_generation_gives_every_table_statistics() -> anyhow::Result<()> {
    let (pool, database) = fresh_pool("rw_analyze").await?;
    apply_batch(&pool, TOPIC, &log(), &[], None).await?;
    db::analyze(&pool).await?;
    // reltuples is -1 until a table is first analyzed (or vacuumed).
    let tables: Vec<(String, f32)> = sqlx::query_as(
        "SELECT c.relname::text, c.reltuples FROM pg_class c \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'readmodel' AND c.relkind IN ('r', 'p') ORDER BY 1",
    )
    .fetch_all(&pool)
    .await?;
    let never: Vec<&str> = tables
        .iter()
        .filter(|(_, tuples)| *tuples < 0.0)
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(never.is_empty(), "never analyzed: {never:?}");
    // The boards' partitioned table too: autovacuum never analyses one,
    // and the readers' plans are costed on it.
    let boards = tables.iter().find(|(name, _)| name == "board_versions");
    assert!(matches!(boards, Some((_, n)) if *n > 0.0), "{tables:?}");
    drop_database(pool, database).await
}
