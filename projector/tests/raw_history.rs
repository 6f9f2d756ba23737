//! The raw history by month: `RATEWIRE_RAW_HISTORY_RETENTION` drops whole
//! months past its horizon, but never a bank's latest board; a check
//! generation replayed from the whole log then drops what the live one
//! dropped, and the two compare equal.

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use ratewire_projector::fold::apply_batch;
use ratewire_projector::retention::{purge, RawHistory, RetentionPolicy};
use ratewire_projector::verify::compare_tables;
use ratewire_proto::{BankId, BankRegistered, Envelope, Event};
use ratewire_readmodel::board_months::{self, Month};
use ratewire_readmodel::db;

mod common;
use common::{board, dec, drop_database, entry, fresh_pool, messages};

const TOPIC: &str = "raw-history";

fn registered(bank: BankId, at: DateTime<Utc>) -> Envelope {
    Envelope::new(
        bank,
        at,
        Event::BankRegistered(BankRegistered {
            code: format!("B{}", bank.get()),
            name: format!("Bank {}", bank.get()),
            image_url: format!("https://i.test/b{}.png", bank.get()),
            social_links: vec![],
            schedule: None,
        }),
    )
}

/// `bank`'s board at `as_of`, USD at `buying`.
fn published(bank: BankId, as_of: DateTime<Utc>, buying: i64) -> Envelope {
    Envelope::new(
        bank,
        as_of,
        Event::BoardPublished(board(
            as_of,
            vec![entry("USD", dec(buying), dec(15_800), None)],
        )),
    )
}

#[tokio::test]
async fn retention_drops_whole_months_but_a_banks_latest_board() -> anyhow::Result<()> {
    let (live, database) = fresh_pool("rw_raw_history").await?;
    let now = Utc::now().trunc_subsecs(0);
    let this = Month::of(now);
    let day = chrono::Duration::days(1);
    let (one, two) = (BankId::new(1)?, BankId::new(2)?);
    // Bank 1: two boards four months back (the second stored against the
    // first), and one now. Bank 2: its latest board five months back.
    let log = messages(&[
        registered(one, now),
        registered(two, now),
        published(two, this.back(5).starts() + day, 15_500),
        published(one, this.back(4).starts() + day, 15_500),
        published(one, this.back(4).starts() + day * 2, 15_500),
        published(one, now, 15_600),
    ]);
    apply_batch(&live, TOPIC, &log, &[], None).await?;
    let bases: i64 = sqlx::query_scalar("SELECT count(*) FROM board_bases")
        .fetch_one(&live)
        .await?;
    assert_eq!(bases, 1, "the board four months back is a base");

    let policy = RetentionPolicy {
        applied_events: Duration::from_secs(86_400),
        resolved_dead_letters: Duration::from_secs(86_400),
        raw_history: RawHistory::Months(2),
    };
    let purged = purge(&live, policy).await?;
    assert_eq!(purged.months, [this.back(4).partition()]);

    let boards: Vec<(i64, DateTime<Utc>)> =
        sqlx::query_as("SELECT bank_id, as_of FROM boards ORDER BY bank_id, as_of")
            .fetch_all(&live)
            .await?;
    assert_eq!(boards, [(1, now), (2, this.back(5).starts() + day),]);
    let bases: i64 = sqlx::query_scalar("SELECT count(*) FROM board_bases")
        .fetch_one(&live)
        .await?;
    assert_eq!(bases, 0, "a dropped month's bases go with it");
    // The purge made this month and the next ahead of the fold.
    let months: Vec<String> = sqlx::query_scalar("SELECT partition FROM board_months ORDER BY 1")
        .fetch_all(&live)
        .await?;
    assert_eq!(
        months,
        [
            this.back(5).partition(),
            this.partition(),
            this.next().partition()
        ]
    );
    // Every month, made by the fold or by the purge, leaves the boards'
    // arrays of values out of its statistics (migration 15).
    let sampled: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, a.attname::text
         FROM board_months m
         JOIN pg_class c ON c.relname = m.partition
                        AND c.relnamespace = current_schema()::regnamespace
         JOIN pg_attribute a ON a.attrelid = c.oid
         WHERE a.attname IN ('cash_buying', 'cash_selling', 'transactional_buying',
                             'transactional_selling')
           AND a.attstattarget IS DISTINCT FROM 0",
    )
    .fetch_all(&live)
    .await?;
    assert!(sampled.is_empty(), "sampled for statistics: {sampled:?}");
    // Nothing is left to drop: a second purge changes nothing.
    assert!(purge(&live, policy).await?.months.is_empty());

    // A check generation replayed from the whole log drops the month the
    // live one dropped, and the two are equal.
    let replayed = db::writer_pool(&database.url(), "replayed", 2)?;
    db::migrate(&replayed, "replayed").await?;
    apply_batch(&replayed, TOPIC, &log, &[], None).await?;
    let dropped = board_months::drop_absent(&replayed, "readmodel").await?;
    assert_eq!(dropped.months, [this.back(4).partition()]);
    let (_, differences) = compare_tables(&live, "readmodel", "replayed").await?;
    assert!(differences.is_empty(), "{differences:?}");

    replayed.close().await;
    drop_database(live, database).await
}
