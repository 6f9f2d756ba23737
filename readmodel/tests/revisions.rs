//! The revision log and a board's provenance, read from bitemporal rows
//! written here by hand as migration 0008 lays them out: a board corrected
//! and its correction retracted give two revisions in known-at order,
//! paged by the revising event, and each board's status follows.

use chrono::{DateTime, Utc};
use ratewire_proto::BankId;
use ratewire_readmodel::revisions::store::{self, Filter};
use ratewire_readmodel::revisions::{Kind, Status};
use ratewire_service::testing::TestDatabase;
use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

struct Database {
    pool: PgPool,
    _database: TestDatabase,
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

/// A board version: its bank, as-of, event, interval, closer and rates
/// (currency, cash buying).
struct Version<'a> {
    bank: i64,
    as_of: &'a str,
    event: Uuid,
    known_from: Option<&'a str>,
    known_to: Option<&'a str>,
    closed_by: Option<Uuid>,
    reason: Option<&'a str>,
    rates: &'a [(&'a str, &'a str)],
}

impl Database {
    async fn fresh() -> anyhow::Result<Self> {
        let database = TestDatabase::create("revisions").await?;
        let pool = ratewire_readmodel::db::pool(&database.url(), "readmodel", 4)?;
        ratewire_readmodel::db::migrate(&pool, "readmodel").await?;
        ratewire_readmodel::board_months::one_for_all(&pool).await?;
        sqlx::query(
            "INSERT INTO bank_versions (id, code, name, image_url, active, registered_at, updated_at, known_from)
             VALUES (1, 'B1', 'Bank 1', '', true, now(), now(), '-infinity')",
        )
        .execute(&pool)
        .await?;
        sqlx::query(
            "INSERT INTO consumer_offsets (topic, partition, next_offset) VALUES ('ratewire.events', 0, 10)",
        )
        .execute(&pool)
        .await?;
        Ok(Self {
            pool,
            _database: database,
        })
    }

    async fn version(&self, v: Version<'_>) -> anyhow::Result<()> {
        let currencies: Vec<&str> = v.rates.iter().map(|(c, _)| *c).collect();
        let buying: Vec<Decimal> = v.rates.iter().map(|(_, b)| dec(b)).collect();
        let known_from = v.known_from.unwrap_or("-infinity");
        sqlx::query(
            "INSERT INTO board_versions (bank_id, as_of, event_id, currencies, known_from, known_to,
                 closed_by, received_at, log_partition, log_offset, source, reason, cash_buying,
                 cash_selling, transactional_buying, transactional_selling)
             VALUES ($1, $2, $3, $4::bpchar[], $5::timestamptz, $6, $7,
                 CASE WHEN $8 THEN $2 END, CASE WHEN $8 THEN 0 END, CASE WHEN $8 THEN 5 END,
                 CASE WHEN $8 THEN '{\"method\":\"api\",\"url\":\"https://bank.example/r\"}'::jsonb END, $9,
                 $10::numeric[], ARRAY(SELECT b + 3 FROM unnest($10::numeric[]) b),
                 array_fill(NULL::numeric, ARRAY[cardinality($4)]),
                 array_fill(NULL::numeric, ARRAY[cardinality($4)]))",
        )
        .bind(v.bank)
        .bind(at(v.as_of))
        .bind(v.event)
        .bind(&currencies)
        .bind(known_from)
        .bind(v.known_to.map(at))
        .bind(v.closed_by)
        .bind(v.known_from.is_some())
        .bind(v.reason)
        .bind(&buying)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

/// Board a, corrected by b (USD changed, EUR gone), b retracted by r; c a
/// later board in force; d an earlier one from before provenance was kept.
struct Story {
    db: Database,
    a: Uuid,
    b: Uuid,
    r: Uuid,
    c: Uuid,
    d: Uuid,
}

async fn story() -> anyhow::Result<Story> {
    let db = Database::fresh().await?;
    let [a, b, r, c, d] = [1u128, 2, 3, 4, 5].map(Uuid::from_u128);
    let noon = "2026-11-20T12:00:00Z";
    db.version(Version {
        bank: 1,
        as_of: noon,
        event: a,
        known_from: Some("2026-11-20T12:00:01Z"),
        known_to: Some("2026-11-20T13:00:00Z"),
        closed_by: Some(b),
        reason: None,
        rates: &[("USD", "155.10"), ("EUR", "170")],
    })
    .await?;
    db.version(Version {
        bank: 1,
        as_of: noon,
        event: b,
        known_from: Some("2026-11-20T13:00:00Z"),
        known_to: Some("2026-11-20T14:00:00Z"),
        closed_by: Some(r),
        reason: Some("USD was mistyped"),
        rates: &[("USD", "155.60")],
    })
    .await?;
    sqlx::query(
        "INSERT INTO retracted_boards (event_id, bank_id, retracted_by, reason, retracted_at, known_at)
         VALUES ($1, 1, $2, 'not ours', now(), '2026-11-20T14:00:00Z')",
    )
    .bind(b)
    .bind(r)
    .execute(&db.pool)
    .await?;
    db.version(Version {
        bank: 1,
        as_of: "2026-11-20T15:00:00Z",
        event: c,
        known_from: Some("2026-11-20T15:00:01Z"),
        known_to: None,
        closed_by: None,
        reason: None,
        rates: &[("USD", "156")],
    })
    .await?;
    db.version(Version {
        bank: 1,
        as_of: "2026-11-19T12:00:00Z",
        event: d,
        known_from: None,
        known_to: None,
        closed_by: None,
        reason: None,
        rates: &[("USD", "154")],
    })
    .await?;
    Ok(Story { db, a, b, r, c, d })
}

#[tokio::test]
async fn a_correction_then_a_retraction_are_logged_in_known_at_order_and_paged_by_event(
) -> anyhow::Result<()> {
    let Story { db, a, b, r, .. } = story().await?;
    let all = store::page(&db.pool, Filter::default(), 1_000).await?;
    assert_eq!(all.next, None);
    let revisions: Vec<_> = all
        .revisions
        .into_iter()
        .map(|r| r.into_revision())
        .collect();
    assert_eq!(revisions.len(), 2);
    let (correction, retraction) = (&revisions[0], &revisions[1]);
    assert_eq!(
        (
            correction.event_id,
            correction.kind,
            correction.revised_event_id
        ),
        (b, Kind::Correction, a)
    );
    assert_eq!(correction.known_at, at("2026-11-20T13:00:00Z"));
    assert_eq!(correction.reason.as_deref(), Some("USD was mistyped"));
    let changed: Vec<(&str, &str, Option<Decimal>, Option<Decimal>)> = correction
        .changes
        .iter()
        .map(|c| (c.currency.as_str(), c.field.key(), c.before, c.after))
        .collect();
    assert_eq!(
        changed,
        [
            ("EUR", "cashBuying", Some(dec("170")), None),
            ("EUR", "cashSelling", Some(dec("173")), None),
            (
                "USD",
                "cashBuying",
                Some(dec("155.10")),
                Some(dec("155.60"))
            ),
            (
                "USD",
                "cashSelling",
                Some(dec("158.10")),
                Some(dec("158.60"))
            ),
        ]
    );
    assert_eq!(
        (
            retraction.event_id,
            retraction.kind,
            retraction.revised_event_id
        ),
        (r, Kind::Retraction, b)
    );
    assert_eq!(retraction.reason.as_deref(), Some("not ours"));
    assert!(retraction.changes.iter().all(|c| c.after.is_none()));
    assert_eq!(retraction.changes.len(), 2);

    let first = store::page(&db.pool, Filter::default(), 1).await?;
    assert_eq!(first.revisions.len(), 1);
    let cursor = first.next.expect("a second page");
    assert_eq!(
        store::cursor(&db.pool, b).await?,
        Some(cursor),
        "the next page starts after the last revision shown"
    );
    let second = store::page(
        &db.pool,
        Filter {
            after: Some(cursor),
            ..Filter::default()
        },
        1,
    )
    .await?;
    assert_eq!(second.revisions[0].event_id, r);
    assert_eq!(second.next, None);
    assert_eq!(store::cursor(&db.pool, Uuid::from_u128(99)).await?, None);

    let known_from_half_past = store::page(
        &db.pool,
        Filter {
            from: Some(at("2026-11-20T13:30:00Z")),
            to: Some(at("2026-11-20T14:00:00.001Z")),
            ..Filter::default()
        },
        1_000,
    )
    .await?;
    assert_eq!(known_from_half_past.revisions.len(), 1);
    assert_eq!(known_from_half_past.revisions[0].event_id, r);
    let other_bank = Filter {
        bank: Some(BankId::new(2)?),
        ..Filter::default()
    };
    assert!(store::page(&db.pool, other_bank, 10)
        .await?
        .revisions
        .is_empty());
    assert!(store::bank_known(&db.pool, BankId::new(1)?).await?);
    assert!(!store::bank_known(&db.pool, BankId::new(2)?).await?);
    Ok(())
}

#[tokio::test]
async fn each_board_shows_its_provenance_and_what_became_of_it() -> anyhow::Result<()> {
    let Story { db, a, b, r, c, d } = story().await?;
    let corrected = store::board(&db.pool, a, Decimal::from(20))
        .await?
        .expect("board a");
    assert_eq!(corrected.status, Status::Corrected);
    assert_eq!(corrected.rates.len(), 2, "as published: EUR and USD");
    assert_eq!(corrected.rates[0].currency.as_str(), "EUR");
    assert_eq!(corrected.known_at, Some(at("2026-11-20T12:00:01Z")));
    let log = corrected.log.as_ref().expect("a log position");
    assert_eq!(
        (log.topic.as_str(), log.partition, log.offset),
        ("ratewire.events", 0, 5)
    );
    assert_eq!(
        corrected.source.as_ref().and_then(|s| s.url()),
        Some("https://bank.example/r")
    );
    assert_eq!(corrected.revisions.len(), 1);
    assert_eq!(corrected.revisions[0].event_id, b);

    let retracted = store::board(&db.pool, b, Decimal::from(20))
        .await?
        .expect("board b");
    assert_eq!(retracted.status, Status::Retracted);
    assert_eq!(retracted.reason.as_deref(), Some("USD was mistyped"));
    assert_eq!(retracted.revisions[0].event_id, r);

    let latest = store::board(&db.pool, c, Decimal::from(20))
        .await?
        .expect("board c");
    assert_eq!(latest.status, Status::InForce);
    assert!(latest.revisions.is_empty());

    let older = store::board(&db.pool, d, Decimal::from(20))
        .await?
        .expect("board d");
    assert_eq!(older.status, Status::Superseded);
    assert_eq!(
        (older.known_at, older.received_at, older.log, older.source),
        (None, None, None, None),
        "folded before provenance was kept"
    );
    assert!(
        store::board(&db.pool, Uuid::from_u128(99), Decimal::from(20))
            .await?
            .is_none()
    );

    let bank = BankId::new(1)?;
    let at_noon =
        |at: &str| store::board_at(&db.pool, bank, at.parse().unwrap(), Decimal::from(20));
    let noon = at_noon("2026-11-20T12:00:00Z")
        .await?
        .expect("noon's board");
    assert_eq!(
        (noon.event_id, noon.status),
        (b, Status::Retracted),
        "none in force: the last published"
    );
    let later = at_noon("2026-11-20T15:00:00Z")
        .await?
        .expect("the later board");
    assert_eq!(later.event_id, c);
    assert!(at_noon("2026-11-20T15:00:00.001Z").await?.is_none());
    Ok(())
}
