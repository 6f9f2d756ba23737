//! The history as if it had been published live: each board known 30 s
//! after its as-of, each correction two hours after its board's as-of,
//! each retraction three hours after it, banks and currencies known a day
//! before the first board.
//!
//! Loaded through the backfill in minutes, the year became known during
//! the load: every board's known-at time is a moment of the load, long
//! after its as-of, and an instant of the load sees a history cut at some
//! day of the year. A year published live has its known-at times beside
//! its as-of times: an instant anywhere in the year sees the year up to
//! then, with full 30-day series windows and the versions of every board
//! dated after it present but not yet known. The bench measures both: the
//! history as loaded (a backfill), then these times, written over the same
//! rows by the same rules the fold keeps (a rate row carries its board
//! version's interval; a closed version ends where the version closing it
//! begins).

use sqlx::PgPool;

/// Rewrites the known-at times of the read model in `schema`.
pub async fn as_if_published_live(pool: &PgPool, schema: &str) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await?;
    let statements = [
        "SET work_mem = '256MB'".to_owned(),
        // Each board version's new interval: the first version of a
        // board (bank, as-of) is the board, the next ones its corrections.
        format!(
            "CREATE TEMP TABLE shift AS
             SELECT bank_id, as_of, event_id, known_from AS old_from, known_to AS old_to,
                    as_of + CASE WHEN n = 1 THEN interval '30 seconds'
                                 ELSE (n - 1) * interval '2 hours' END AS new_from,
                    NULL::timestamptz AS new_to
             FROM (SELECT *, row_number() OVER (PARTITION BY bank_id, as_of ORDER BY known_from) AS n
                   FROM {schema}.board_versions) v"
        ),
        // Closed by the next version (a correction), or else retracted.
        "UPDATE shift s SET new_to = COALESCE(
             (SELECT n.new_from FROM shift n
              WHERE n.bank_id = s.bank_id AND n.as_of = s.as_of AND n.old_from = s.old_to),
             s.as_of + interval '3 hours')
         WHERE s.old_to IS NOT NULL"
            .to_owned(),
        "CREATE INDEX ON shift (bank_id, as_of, old_from)".to_owned(),
        "ANALYZE shift".to_owned(),
        format!(
            "UPDATE {schema}.board_versions b SET known_from = s.new_from, known_to = s.new_to
             FROM shift s WHERE s.event_id = b.event_id AND s.old_from = b.known_from"
        ),
        format!(
            "UPDATE {schema}.retracted_boards t SET known_at = s.new_to
             FROM shift s WHERE s.event_id = t.event_id"
        ),
        format!(
            "UPDATE {schema}.bank_versions SET known_from = (SELECT min(as_of) - interval '1 day' FROM shift)
             WHERE known_to IS NULL"
        ),
        format!(
            "UPDATE {schema}.currencies_known SET known_from = (SELECT min(as_of) - interval '1 day' FROM shift)"
        ),
        // Each bank's latest as-of moves with each board as it becomes
        // known (a correction keeps the as-of; a retraction came hours
        // after later boards).
        format!("DELETE FROM {schema}.bank_latest_versions"),
        format!(
            "INSERT INTO {schema}.bank_latest_versions (bank_id, as_of, known_from, known_to)
             SELECT bank_id, as_of, as_of + interval '30 seconds',
                    lead(as_of) OVER (PARTITION BY bank_id ORDER BY as_of) + interval '30 seconds'
             FROM (SELECT DISTINCT bank_id, as_of FROM shift) b"
        ),
        "DROP TABLE shift".to_owned(),
        format!("VACUUM ANALYZE {schema}.board_versions"),
    ];
    for statement in &statements {
        sqlx::query(statement).execute(&mut *conn).await?;
    }
    Ok(())
}
