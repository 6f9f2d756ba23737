//! Reading the model as known at an instant, against Postgres: the same
//! store reads, in a snapshot begun with `begin_known_at`, see the rows in
//! force then (a board known later is absent, a correction made later is
//! not applied, a bank registered later is absent and one deactivated
//! later is active), and an instant is final once every partition's fold
//! has passed it.

use chrono::{DateTime, Duration, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::store;
use ratewire_service::testing::TestDatabase;
use rust_decimal::Decimal;
use sqlx::PgPool;

struct Database {
    pool: PgPool,
    _database: TestDatabase,
}

fn t(minutes: i64) -> DateTime<Utc> {
    "2026-11-23T08:00:00Z".parse::<DateTime<Utc>>().unwrap() + Duration::minutes(minutes)
}

impl Database {
    async fn fresh() -> anyhow::Result<Self> {
        let database = TestDatabase::create("known_at_reads").await?;
        let pool = ratewire_readmodel::db::pool(&database.url(), "readmodel", 4)?;
        ratewire_readmodel::db::migrate(&pool, "readmodel").await?;
        ratewire_readmodel::board_months::one_for_all(&pool).await?;
        Ok(Self {
            pool,
            _database: database,
        })
    }

    /// A version of bank `id`, known over `[from, to)`.
    async fn bank(
        &self,
        id: i64,
        active: bool,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO bank_versions (id, code, name, image_url, active, registered_at,
                                        updated_at, known_from, known_to)
             VALUES ($1, $2, $2, '', $3, $4, $4, $4, $5)",
        )
        .bind(id)
        .bind(format!("B{id}"))
        .bind(active)
        .bind(from)
        .bind(to)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A version of bank `bank`'s board of `as_of` quoting USD at
    /// `buying`, known over `[from, to)`.
    async fn board(
        &self,
        bank: i64,
        as_of: DateTime<Utc>,
        buying: i64,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO board_versions (bank_id, as_of, event_id, currencies, known_from, known_to,
                                         cash_buying, cash_selling, transactional_buying,
                                         transactional_selling)
             VALUES ($1, $2, $3, '{USD}', $4, $5, ARRAY[$6::numeric], ARRAY[$6 + 5],
                     '{NULL}', '{NULL}')",
        )
        .bind(bank)
        .bind(as_of)
        .bind(uuid::Uuid::new_v4())
        .bind(from)
        .bind(to)
        .bind(Decimal::from(buying))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Bank `bank`'s latest as-of, `as_of` from `from` on (the fold keeps
    /// this history beside the boards).
    async fn latest(
        &self,
        bank: i64,
        as_of: DateTime<Utc>,
        from: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO bank_latest_versions (bank_id, as_of, known_from) VALUES ($1, $2, $3)",
        )
        .bind(bank)
        .bind(as_of)
        .bind(from)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// What `/rates` is made of, as known at `at`: each active bank and
    /// its board's USD buying rate.
    async fn rates_at(&self, at: DateTime<Utc>) -> anyhow::Result<Vec<(i64, Option<Decimal>)>> {
        let mut tx = store::begin_known_at(&self.pool, at).await?;
        let views = store::active_bank_views_in(&mut tx).await?;
        tx.rollback().await?;
        Ok(views
            .iter()
            .map(|v| (v.bank.id.get(), v.rates.first().map(|r| r.cash_buying)))
            .collect())
    }
}

#[tokio::test]
async fn each_read_sees_the_model_as_known_at_its_instant() -> anyhow::Result<()> {
    let db = Database::fresh().await?;
    // Bank 1 from minute 0; bank 2 from minute 20, deactivated at 40.
    db.bank(1, true, t(0), None).await?;
    db.bank(2, true, t(20), Some(t(40))).await?;
    db.bank(2, false, t(40), None).await?;
    // Bank 1's board of 08:05, known at 10, corrected at 30.
    db.board(1, t(5), 150, t(10), Some(t(30))).await?;
    db.board(1, t(5), 151, t(30), None).await?;
    db.board(2, t(21), 160, t(22), None).await?;
    db.latest(1, t(5), t(10)).await?;
    db.latest(2, t(21), t(22)).await?;

    let d = Decimal::from;
    assert_eq!(db.rates_at(t(-1)).await?, [], "before anything");
    let year_zero = "0000-01-01T00:00:00Z".parse()?;
    assert_eq!(
        db.rates_at(year_zero).await?,
        [],
        "RFC 3339's first instant"
    );
    for instant in [year_zero, t(7) + Duration::milliseconds(123)] {
        let mut tx = store::begin_known_at(&db.pool, instant).await?;
        let read: DateTime<Utc> = sqlx::query_scalar("SELECT ratewire_known_at()")
            .fetch_one(&mut *tx)
            .await?;
        assert_eq!(read, instant, "the instant as the views read it");
    }
    assert_eq!(
        db.rates_at(t(5)).await?,
        [(1, None)],
        "registered, no board"
    );
    assert_eq!(
        db.rates_at(t(10)).await?,
        [(1, Some(d(150)))],
        "known at 10"
    );
    assert_eq!(
        db.rates_at(t(25)).await?,
        [(1, Some(d(150))), (2, Some(d(160)))],
        "bank 2 registered, the correction not made yet"
    );
    assert_eq!(
        db.rates_at(t(35)).await?,
        [(1, Some(d(151))), (2, Some(d(160)))],
        "corrected"
    );
    assert_eq!(
        db.rates_at(t(45)).await?,
        [(1, Some(d(151)))],
        "bank 2 left"
    );
    // Without the setting, and after such a transaction on the same pool,
    // reads see the present.
    let now = store::active_bank_views(&db.pool).await?;
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].rates[0].cash_buying, d(151));

    // History as known then: the record of 08:05 before its correction.
    let usd = CurrencyCode::parse("USD")?;
    let mut tx = store::begin_known_at(&db.pool, t(25)).await?;
    let bank = BankId::new(1)?;
    let record = store::history(&mut *tx, bank, usd, t(60)).await?;
    assert_eq!(record.map(|r| r.cash_buying), Some(d(150)));
    assert!(store::bank(&mut *tx, BankId::new(2)?).await?.is_some());
    tx.rollback().await?;
    Ok(())
}

#[tokio::test]
async fn an_instant_is_final_once_every_partition_has_passed_it() -> anyhow::Result<()> {
    let db = Database::fresh().await?;
    let is_final = |at| {
        let pool = db.pool.clone();
        async move {
            let mut tx = store::begin_known_at(&pool, at).await?;
            let answer = store::known_at_final(&mut *tx, at).await?;
            tx.rollback().await?;
            anyhow::Ok(answer)
        }
    };
    assert!(!is_final(t(0)).await?, "no partition yet");
    for (partition, known_at, settled_at) in [(0, Some(t(10)), None), (1, None, Some(t(5)))] {
        sqlx::query(
            "INSERT INTO consumer_offsets (topic, partition, next_offset, known_at, settled_at)
             VALUES ('boards', $1, 1, $2, $3)",
        )
        .bind(partition)
        .bind(known_at)
        .bind(settled_at)
        .execute(&db.pool)
        .await?;
    }
    assert!(is_final(t(4)).await?);
    assert!(is_final(t(5)).await?, "partition 1 settled at 5");
    assert!(!is_final(t(6)).await?, "partition 1 may still get one");
    Ok(())
}
