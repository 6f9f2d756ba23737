//! Values in force at instants, as /rates/series reads them, against
//! Postgres: a bank scanned once and a busy bank probed per instant give
//! what "the last record strictly before each instant" says, and the best
//! across active banks follows best-rates' rule.

use chrono::{DateTime, Duration, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::quality::OutlierRule;
use ratewire_readmodel::store::{best_at, records_at, Best};
use ratewire_readmodel::views::{Field, HistoryRecord};
use ratewire_service::testing::TestDatabase;
use rust_decimal::Decimal;
use sqlx::PgPool;

/// A read model of the test's own, in a database dropped with it.
struct Database {
    pool: PgPool,
    _database: TestDatabase,
}

impl Database {
    async fn fresh() -> anyhow::Result<Self> {
        let database = TestDatabase::create("series_reads").await?;
        let pool = ratewire_readmodel::db::pool(&database.url(), "readmodel", 4)?;
        ratewire_readmodel::db::migrate(&pool, "readmodel").await?;
        ratewire_readmodel::board_months::one_for_all(&pool).await?;
        Ok(Self {
            pool,
            _database: database,
        })
    }

    async fn bank(&self, id: i64, active: bool) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO bank_versions (id, code, name, image_url, active, registered_at,
                                        updated_at, known_from)
             VALUES ($1, $2, $2, '', $3, now(), now(), '-infinity')",
        )
        .bind(id)
        .bind(format!("B{id}"))
        .bind(active)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn publish(&self, bank: i64, at: DateTime<Utc>, buying: i64) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO board_versions (bank_id, as_of, event_id, currencies, known_from,
                                         cash_buying, cash_selling, transactional_buying,
                                         transactional_selling)
             VALUES ($1, $2, $3, '{USD}', '-infinity', ARRAY[$4::numeric], ARRAY[$4 + 5],
                     '{NULL}', '{NULL}')",
        )
        .bind(bank)
        .bind(at)
        .bind(uuid::Uuid::new_v4())
        .bind(Decimal::from(buying))
        .execute(&self.pool)
        .await?;
        // The bank's latest as-of, as the fold keeps it.
        sqlx::query(
            "WITH closed AS (
                 UPDATE bank_latest_versions SET known_to = clock_timestamp()
                 WHERE bank_id = $1 AND known_to IS NULL
             )
             INSERT INTO bank_latest_versions (bank_id, as_of, known_from)
             SELECT $1, GREATEST($2, (SELECT max(as_of) FROM bank_latest_versions
                                      WHERE bank_id = $1)), clock_timestamp()",
        )
        .bind(bank)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

fn usd() -> CurrencyCode {
    CurrencyCode::parse("USD").expect("a code")
}

fn bank(id: i64) -> BankId {
    BankId::new(id).expect("a bank id")
}

fn buying(records: Vec<(DateTime<Utc>, Option<HistoryRecord>)>) -> Vec<Option<Decimal>> {
    records
        .into_iter()
        .map(|(_, r)| r.map(|r| r.cash_buying))
        .collect()
}

#[tokio::test]
async fn each_instant_shows_the_record_in_force_whether_scanned_or_probed() -> anyhow::Result<()> {
    let db = Database::fresh().await?;
    let day0 = DateTime::from_timestamp(1_700_006_400, 0).expect("a time");
    let day = |d: i64| day0 + Duration::days(d);
    db.bank(1, true).await?;
    db.bank(2, true).await?;
    db.bank(3, false).await?;
    // Bank 1 publishes once a day at 09:00: few records per instant, scanned.
    for d in 0..10 {
        db.publish(1, day(d) + Duration::hours(9), 100 + d).await?;
    }
    // Bank 2 publishes every hour of days 3 to 5: more than two records
    // per instant, probed.
    for h in 0..72 {
        db.publish(2, day(3) + Duration::hours(h), 100 + h).await?;
    }
    // Bank 3 would be best but is not active.
    db.publish(3, day(0), 1_000).await?;

    let instants: Vec<DateTime<Utc>> = (0..12).map(day).collect();
    // At midnight of day d, bank 1's board of day d - 1 is in force.
    let expected_1: Vec<Option<Decimal>> = (0..12)
        .map(|d: i64| (d >= 1).then(|| Decimal::from(100 + (d - 1).min(9))))
        .collect();
    assert_eq!(
        buying(records_at(&db.pool, bank(1), usd(), &instants).await?),
        expected_1
    );
    // Bank 2's last hour before midnight.
    let expected_2: Vec<Option<Decimal>> = (0..12)
        .map(|d: i64| (d >= 4).then(|| Decimal::from(100 + (24 * (d - 3) - 1).min(71))))
        .collect();
    assert_eq!(
        buying(records_at(&db.pool, bank(2), usd(), &instants).await?),
        expected_2
    );
    let unknown = records_at(&db.pool, bank(9), usd(), &instants).await?;
    assert!(unknown.iter().all(|(_, r)| r.is_none()));

    // The best buying among active banks, inactive bank 3 never.
    let best = best_at(
        &db.pool,
        usd(),
        Field::CashBuying,
        &instants,
        OutlierRule::default(),
    )
    .await?;
    let winners: Vec<Option<(i64, Decimal)>> = best
        .iter()
        .map(|(_, b)| b.map(|(bank, value, _)| (bank.get(), value)))
        .collect();
    let expected: Vec<Option<(i64, Decimal)>> = (0..12)
        .map(|d| {
            let one = expected_1[d].map(|v| (1, v));
            let two = expected_2[d].map(|v| (2, v));
            match (one, two) {
                (Some(a), Some(b)) => Some(if b.1 > a.1 { b } else { a }),
                (a, b) => a.or(b),
            }
        })
        .collect();
    assert_eq!(winners, expected);
    // The lowest selling at day 4's midnight: bank 1's 103 + 5.
    let selling = best_at(
        &db.pool,
        usd(),
        Field::CashSelling,
        &instants,
        OutlierRule::default(),
    )
    .await?;
    assert_eq!(
        selling[4].1.map(|(b, v, _)| (b.get(), v)),
        Some((1, Decimal::from(108)))
    );
    // A transactional rate nobody quotes: no best.
    let none = best_at(
        &db.pool,
        usd(),
        Field::TransactionalBuying,
        &instants,
        OutlierRule::default(),
    )
    .await?;
    assert!(none.iter().all(|(_, b)| b.is_none()));
    Ok(())
}

#[tokio::test]
async fn equal_values_go_to_the_earlier_record_then_the_lower_bank() -> anyhow::Result<()> {
    let db = Database::fresh().await?;
    let t0 = DateTime::from_timestamp(1_700_006_400, 0).expect("a time");
    for id in [1, 2, 3] {
        db.bank(id, true).await?;
    }
    db.publish(3, t0, 150).await?;
    db.publish(2, t0 + Duration::hours(1), 150).await?;
    db.publish(1, t0 + Duration::hours(1), 150).await?;
    let instants = [t0 + Duration::minutes(90), t0 + Duration::hours(3)];
    let winner = |best: Vec<(DateTime<Utc>, Best)>| {
        best.iter()
            .map(|(_, b)| b.map(|(bank, _, _)| bank.get()))
            .collect::<Vec<_>>()
    };
    let best = best_at(
        &db.pool,
        usd(),
        Field::CashBuying,
        &instants,
        OutlierRule::default(),
    )
    .await?;
    assert_eq!(winner(best), [Some(3), Some(3)]);
    sqlx::query("UPDATE bank_versions SET active = false WHERE id = 3")
        .execute(&db.pool)
        .await?;
    let best = best_at(
        &db.pool,
        usd(),
        Field::CashBuying,
        &instants,
        OutlierRule::default(),
    )
    .await?;
    assert_eq!(winner(best), [Some(1), Some(1)]);
    Ok(())
}

#[tokio::test]
async fn a_tenfold_typo_is_never_the_best_of_its_instant_until_it_is_confirmed(
) -> anyhow::Result<()> {
    let db = Database::fresh().await?;
    let t0 = DateTime::from_timestamp(1_700_006_400, 0).expect("a time");
    for id in [1, 2, 3] {
        db.bank(id, true).await?;
        db.publish(id, t0 - Duration::hours(1), 150 + id).await?;
        db.publish(id, t0, 150 + id).await?;
    }
    // Bank 3 types 1550 for 155 an hour later, and confirms it an hour
    // after that.
    db.publish(3, t0 + Duration::hours(1), 1550).await?;
    db.publish(3, t0 + Duration::hours(2), 1550).await?;
    let instants = [
        t0 + Duration::minutes(30),
        t0 + Duration::minutes(90),
        t0 + Duration::minutes(150),
    ];
    let best = best_at(
        &db.pool,
        usd(),
        Field::CashBuying,
        &instants,
        OutlierRule::default(),
    )
    .await?;
    let winners: Vec<Option<(i64, Decimal)>> = best
        .iter()
        .map(|(_, b)| b.map(|(bank, value, _)| (bank.get(), value)))
        .collect();
    assert_eq!(
        winners,
        [
            Some((3, Decimal::from(153))),
            Some((2, Decimal::from(152))),
            Some((3, Decimal::from(1550))),
        ]
    );
    let kept = OutlierRule {
        in_best: true,
        ..OutlierRule::default()
    };
    let best = best_at(&db.pool, usd(), Field::CashBuying, &instants, kept).await?;
    assert_eq!(best[1].1.map(|(bank, _, _)| bank.get()), Some(3));
    Ok(())
}
