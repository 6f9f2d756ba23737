//! Postgres bytes per rate entry, after the bitemporal change (migration
//! 0008: every version kept, with its known-at interval) and before it.
//!
//! "Before" is measured, not estimated: the rows in force now (what the
//! tables before 0008 held: a correction replaced its board's rows, a
//! retraction deleted them) are copied into tables of the pre-0008 shape
//! in a scratch schema: `rates` keyed by (bank, currency, as-of), `boards`
//! keyed by (bank, as-of) with the index on the event id (migrations
//! 0001, 0002, 0005, 0006). The keys exist before the copy, and the rows
//! go in in the order the fold wrote them (by known-at), so the indexes
//! grow as the fold grew them instead of being built packed.

use sqlx::PgPool;

use crate::bench::storage::raw_history_bytes;

/// The scratch schema of the pre-0008 tables.
const BEFORE: &str = "bench_before_0008";

/// Sizes (`pg_total_relation_size`: heap, TOAST and indexes) in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Footprint {
    /// Rate entries in force (the same rows in both shapes).
    pub entries: i64,
    /// Rate rows kept after the change (closed versions included).
    pub rate_versions: i64,
    /// The boards with their rates (a board version holds them since
    /// read-model migration 0012).
    pub after_boards: i64,
    pub before_rates: i64,
    pub before_boards: i64,
}

impl Footprint {
    pub fn after(&self) -> i64 {
        self.after_boards
    }

    pub fn before(&self) -> i64 {
        self.before_rates + self.before_boards
    }

    /// Bytes per rate entry in force.
    pub fn per_entry(&self, bytes: i64) -> f64 {
        bytes as f64 / self.entries.max(1) as f64
    }

    /// After against before, in % (+ is larger).
    pub fn growth_pct(&self) -> f64 {
        100.0 * (self.after() as f64 / self.before().max(1) as f64 - 1.0)
    }
}

/// The read model's tables in `schema` now, and the same rows in force in
/// the pre-0008 shape.
pub async fn measure(pool: &PgPool, schema: &str) -> anyhow::Result<Footprint> {
    let mut conn = pool.acquire().await?;
    let size = |table: String| format!("SELECT pg_total_relation_size('{table}')");
    sqlx::query(&format!("ANALYZE {schema}.board_versions"))
        .execute(&mut *conn)
        .await?;
    let mut footprint = Footprint {
        entries: sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {schema}.rate_versions WHERE known_to IS NULL"
        ))
        .fetch_one(&mut *conn)
        .await?,
        rate_versions: sqlx::query_scalar(&format!("SELECT count(*) FROM {schema}.rate_versions"))
            .fetch_one(&mut *conn)
            .await?,
        after_boards: sqlx::query_scalar(&raw_history_bytes(schema))
            .fetch_one(&mut *conn)
            .await?,
        ..Footprint::default()
    };
    let statements = [
        format!("DROP SCHEMA IF EXISTS {BEFORE} CASCADE"),
        format!("CREATE SCHEMA {BEFORE}"),
        "SET work_mem = '256MB'".to_owned(),
        format!(
            "CREATE TABLE {BEFORE}.boards (
                bank_id    BIGINT      NOT NULL,
                as_of      TIMESTAMPTZ NOT NULL,
                event_id   UUID        NOT NULL,
                currencies CHAR(3)[]   NOT NULL,
                PRIMARY KEY (bank_id, as_of))"
        ),
        format!("CREATE INDEX boards_event_id ON {BEFORE}.boards (event_id)"),
        format!(
            "CREATE TABLE {BEFORE}.rates (
                bank_id               BIGINT      NOT NULL,
                currency              CHAR(3)     NOT NULL,
                as_of                 TIMESTAMPTZ NOT NULL,
                cash_buying           NUMERIC     NOT NULL,
                cash_selling          NUMERIC     NOT NULL,
                transactional_buying  NUMERIC,
                transactional_selling NUMERIC,
                PRIMARY KEY (bank_id, currency, as_of))"
        ),
        format!(
            "INSERT INTO {BEFORE}.boards
             SELECT bank_id, as_of, event_id, currencies FROM {schema}.board_versions
             WHERE known_to IS NULL ORDER BY known_from, log_partition, log_offset"
        ),
        format!(
            "INSERT INTO {BEFORE}.rates
             SELECT bank_id, currency, as_of, cash_buying, cash_selling,
                    transactional_buying, transactional_selling
             FROM {schema}.rate_versions
             WHERE known_to IS NULL ORDER BY known_from, bank_id, as_of, currency"
        ),
        format!("ANALYZE {BEFORE}.rates"),
    ];
    for statement in &statements {
        sqlx::query(statement).execute(&mut *conn).await?;
    }
    footprint.before_rates = sqlx::query_scalar(&size(format!("{BEFORE}.rates")))
        .fetch_one(&mut *conn)
        .await?;
    footprint.before_boards = sqlx::query_scalar(&size(format!("{BEFORE}.boards")))
        .fetch_one(&mut *conn)
        .await?;
    let copied: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {BEFORE}.rates"))
        .fetch_one(&mut *conn)
        .await?;
    anyhow::ensure!(
        copied == footprint.entries,
        "the pre-0008 copy holds {copied} rate entries, the model {}",
        footprint.entries
    );
    Ok(footprint)
}

/// Drops the scratch schema.
pub async fn drop_copy(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {BEFORE} CASCADE"))
        .execute(pool)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_compares_the_same_entries_in_both_shapes() {
        let f = Footprint {
            entries: 1000,
            rate_versions: 1030,
            after_boards: 130_000,
            before_rates: 90_000,
            before_boards: 10_000,
        };
        assert_eq!(f.per_entry(f.after()), 130.0);
        assert_eq!(f.per_entry(f.before()), 100.0);
        assert!((f.growth_pct() - 30.0).abs() < 1e-9);
    }
}
