//! The raw history's months (readmodel migration 0014): `board_versions`
//! is partitioned by UTC month of `as_of`, each partition listed in
//! `board_months`.
//! - The fold [`hold`]s the months a write touches, making any that is
//!   missing, so that a purge cannot drop a month under it.
//! - [`prepare`] makes this month and the next ahead of the boards, so
//!   that the live fold seldom makes one.
//! - [`drop_before`] drops whole months, for
//!   `RATEWIRE_RAW_HISTORY_RETENTION`.
//!
//! Months are made as a table of their own, then attached: attaching
//! takes a lock that readers and writers of the other months never wait
//! on, where `CREATE TABLE ... PARTITION OF` would stop every reader of
//! the raw history until the fold committed.

use std::collections::BTreeSet;
use std::fmt;

use chrono::{DateTime, Datelike, Months, NaiveDate, TimeZone, Utc};
use sqlx::{PgConnection, PgPool};

use crate::error::Result;

/// One UTC month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Month(NaiveDate);

impl Month {
    /// The month `at` falls in.
    pub fn of(at: DateTime<Utc>) -> Self {
        let date = at.date_naive();
        Self(date.with_day(1).unwrap_or(date))
    }

    /// Its first instant.
    pub fn starts(self) -> DateTime<Utc> {
        Utc.from_utc_datetime(&self.0.and_time(chrono::NaiveTime::MIN))
    }

    /// The first instant of the month after it.
    pub fn ends(self) -> DateTime<Utc> {
        self.next().starts()
    }

    /// The month after it.
    pub fn next(self) -> Self {
        Self(self.0.checked_add_months(Months::new(1)).unwrap_or(self.0))
    }

    /// The month `months` before it.
    pub fn back(self, months: u32) -> Self {
        Self(
            self.0
                .checked_sub_months(Months::new(months))
                .unwrap_or(self.0),
        )
    }

    /// The name of its partition.
    pub fn partition(self) -> String {
        format!("board_versions_{:04}_{:02}", self.0.year(), self.0.month())
    }
}

impl fmt::Display for Month {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}", self.0.year(), self.0.month())
    }
}

/// A board's arrays of values: returned, never filtered on, so not
/// sampled for statistics.
const VALUES: [&str; 4] = [
    "cash_buying",
    "cash_selling",
    "transactional_buying",
    "transactional_selling",
];

/// Serialises the making of months across folds and purges; the lock is
/// the transaction's, so it goes with its commit.
const MAKING_MONTHS: i64 = 0x7261_7465_6d6f_6e74;

/// Holds, for the transaction `db`, the month of each of `times`, making
/// the missing ones; whether it made any. Call before writing the boards.
pub async fn hold(db: &mut PgConnection, times: &[DateTime<Utc>]) -> Result<bool> {
    let months: BTreeSet<Month> = times.iter().copied().map(Month::of).collect();
    if months.is_empty() {
        return Ok(false);
    }
    let starts: Vec<DateTime<Utc>> = months.iter().map(|m| m.starts()).collect();
    if held(db, &starts).await? == starts.len() {
        return Ok(false);
    }
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MAKING_MONTHS)
        .execute(&mut *db)
        .await?;
    let mut made = false;
    for month in months {
        made |= make(db, month).await?;
    }
    held(db, &starts).await?;
    Ok(made)
}

/// Locks the rows of the months starting at `starts` that exist, and
/// counts them.
async fn held(db: &mut PgConnection, starts: &[DateTime<Utc>]) -> Result<usize> {
    let rows: Vec<DateTime<Utc>> = sqlx::query_scalar(
        "SELECT m.starts FROM UNNEST($1::timestamptz[]) AS k (at)
         JOIN board_months m ON m.starts <= k.at AND k.at < m.ends
         FOR KEY SHARE OF m",
    )
    .bind(starts)
    .fetch_all(&mut *db)
    .await?;
    Ok(rows.len())
}

/// Makes `month`'s partition unless a month covers it; whether it did.
/// Under the advisory lock.
async fn make(db: &mut PgConnection, month: Month) -> Result<bool> {
    let covered: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM board_months WHERE starts <= $1 AND $1 < ends)",
    )
    .bind(month.starts())
    .fetch_one(&mut *db)
    .await?;
    if covered {
        return Ok(false);
    }
    let name = month.partition();
    // The names and times are ours (a month's digits), not a client's.
    let statements = [
        format!(
            "CREATE TABLE \"{name}\" (LIKE board_versions INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        ),
        // `LIKE` copies no statistics targets (migration 15).
        format!(
            "ALTER TABLE \"{name}\" {}",
            VALUES.map(|c| format!("ALTER COLUMN {c} SET STATISTICS 0")).join(", ")
        ),
        format!(
            "ALTER TABLE board_versions ATTACH PARTITION \"{name}\" FOR VALUES FROM ('{}') TO ('{}')",
            month.starts().to_rfc3339(),
            month.ends().to_rfc3339(),
        ),
    ];
    for statement in &statements {
        sqlx::query(statement)
            .persistent(false)
            .execute(&mut *db)
            .await?;
    }
    sqlx::query("INSERT INTO board_months (starts, ends, partition) VALUES ($1, $2, $3)")
        .bind(month.starts())
        .bind(month.ends())
        .bind(&name)
        .execute(&mut *db)
        .await?;
    tracing::info!(%month, partition = %name, "raw history month made");
    Ok(true)
}

/// Makes the month of `now` and the next. When it made one, or the
/// partitioned table was never analysed, it refreshes the planner's
/// statistics of the whole history: autovacuum analyses each month, never
/// the partitioned table the readers' plans are costed on. Not on every
/// run, as Postgres 15 analyses every month again with it.
pub async fn prepare(pool: &PgPool, now: DateTime<Utc>) -> Result<()> {
    let month = Month::of(now);
    let mut tx = pool.begin().await?;
    let made = hold(&mut tx, &[month.starts(), month.next().starts()]).await?;
    tx.commit().await?;
    let never: bool = sqlx::query_scalar(
        "SELECT reltuples < 0 FROM pg_class WHERE oid = 'board_versions'::regclass",
    )
    .fetch_one(pool)
    .await?;
    if made || never {
        sqlx::query("ANALYZE board_versions").execute(pool).await?;
    }
    Ok(())
}

/// What [`drop_before`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// The months dropped.
    pub months: Vec<String>,
    /// Months kept past the horizon, because a bank's latest board is in
    /// them, or because a fold or a reader held them.
    pub kept: Vec<String>,
}

/// A month as `board_months` lists it: its range and its partition.
type Listed = (DateTime<Utc>, DateTime<Utc>, String);

/// Drops every month ending at or before `horizon`, with its bases, but a
/// month holding a bank's latest board (a bank that stopped publishing
/// still has one). One that cannot be dropped now is left to the next run.
pub async fn drop_before(pool: &PgPool, horizon: Month) -> Result<Dropped> {
    let months: Vec<Listed> = sqlx::query_as(
        "SELECT starts, ends, partition FROM board_months WHERE ends <= $1 ORDER BY starts",
    )
    .bind(horizon.starts())
    .fetch_all(pool)
    .await?;
    drop_each(pool, months, true).await
}

/// Drops each month of this generation that the generation in `schema`
/// no longer has: a check generation, replayed from the whole log, then
/// holds what the one it is compared with holds.
pub async fn drop_absent(pool: &PgPool, schema: &str) -> Result<Dropped> {
    // `schema` is a generation's, checked as settings are.
    let months: Vec<Listed> = sqlx::query_as(&format!(
        "SELECT starts, ends, partition FROM board_months c
         WHERE NOT EXISTS (SELECT 1 FROM {schema}.board_months k
                           WHERE k.starts <= c.starts AND c.ends <= k.ends)
         ORDER BY starts"
    ))
    .fetch_all(pool)
    .await?;
    drop_each(pool, months, false).await
}

/// Drops `months`, each in a transaction of its own that waits at most a
/// second for the fold and the readers (a drop holds the readers of the
/// raw history while it waits); unless `keep_latest` is false, a month
/// holding a bank's latest board is kept.
async fn drop_each(pool: &PgPool, months: Vec<Listed>, keep_latest: bool) -> Result<Dropped> {
    let mut dropped = Dropped::default();
    for (starts, ends, partition) in months {
        let mut tx = pool.begin().await?;
        sqlx::query("SET LOCAL lock_timeout = '1s'")
            .execute(&mut *tx)
            .await?;
        let latest = keep_latest
            && sqlx::query_scalar::<_, bool>(
                "SELECT EXISTS (SELECT 1 FROM bank_latest_versions
                                WHERE known_to IS NULL AND as_of >= $1 AND as_of < $2)",
            )
            .bind(starts)
            .bind(ends)
            .fetch_one(&mut *tx)
            .await?;
        if latest {
            dropped.kept.push(partition);
            continue;
        }
        let outcome = async {
            sqlx::query("DELETE FROM board_months WHERE starts = $1")
                .bind(starts)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM board_bases WHERE as_of >= $1 AND as_of < $2")
                .bind(starts)
                .bind(ends)
                .execute(&mut *tx)
                .await?;
            // The name is one `board_months` lists, made by `make` or the
            // migration.
            sqlx::query(&format!("DROP TABLE \"{partition}\""))
                .persistent(false)
                .execute(&mut *tx)
                .await?;
            sqlx::Result::Ok(())
        }
        .await;
        match outcome {
            Ok(()) => {
                tx.commit().await?;
                tracing::info!(%partition, "raw history month dropped");
                dropped.months.push(partition);
            }
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(LOCK_NOT_AVAILABLE) => {
                tracing::warn!(%partition, "raw history month busy; dropped on a later run");
                dropped.kept.push(partition);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(dropped)
}

/// Postgres's code for a lock not taken within `lock_timeout`.
const LOCK_NOT_AVAILABLE: &str = "55P03";

/// Makes one partition for every time, for fixtures that write boards of
/// any month without the fold.
pub async fn one_for_all(pool: &PgPool) -> Result<()> {
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS board_versions_all
             (LIKE board_versions INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
         ALTER TABLE board_versions ATTACH PARTITION board_versions_all
             FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
         INSERT INTO board_months (starts, ends, partition)
             VALUES ('-infinity', 'infinity', 'board_versions_all');",
    )
    .execute(pool)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn a_month_runs_from_its_first_instant_to_the_next_months() {
        let month = Month::of(at("2026-12-31T23:59:59.999Z"));
        assert_eq!(month.starts(), at("2026-12-01T00:00:00Z"));
        assert_eq!(month.ends(), at("2027-01-01T00:00:00Z"));
        assert_eq!(month.partition(), "board_versions_2026_12");
        assert_eq!(month.to_string(), "2026-12");
    }

    #[test]
    fn months_back_cross_years() {
        let month = Month::of(at("2026-02-10T08:00:00Z"));
        assert_eq!(month.back(3).to_string(), "2025-11");
        assert_eq!(month.back(0), month);
    }
}
