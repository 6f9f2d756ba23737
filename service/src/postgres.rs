//! Postgres connections: each process works in its own schema, reached
//! through `search_path`, so that each keeps its own migration history.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

/// A lazily connecting pool: the process starts even while Postgres is down
/// and reports it on /readyz instead of crashing. Waits at most
/// `acquire_timeout` for a connection, so an outage turns into errors, not
/// hung requests.
pub fn pool(
    url: &str,
    search_path: &str,
    max_connections: u32,
    acquire_timeout: Duration,
) -> sqlx::Result<PgPool> {
    pool_with(
        url,
        &[("search_path", search_path)],
        max_connections,
        acquire_timeout,
    )
}

/// [`pool`] with other settings of each session (`search_path` among them),
/// sent when connecting rather than as statements.
pub fn pool_with(
    url: &str,
    settings: &[(&str, &str)],
    max_connections: u32,
    acquire_timeout: Duration,
) -> sqlx::Result<PgPool> {
    let options = PgConnectOptions::from_str(url)?.options(settings.iter().copied());
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .connect_lazy_with(options))
}

/// Creates `schema` if needed; `schema` has been checked to be a plain
/// identifier (see `settings::parse_schema`).
pub async fn create_schema(pool: &PgPool, schema: &str) -> sqlx::Result<()> {
    // Two instances starting together may race on CREATE SCHEMA; the loser's
    // unique violation means the schema exists, which is all we want.
    match sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .execute(pool)
        .await
    {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates `schema` if needed and applies `migrator` in it (the pool's
/// `search_path` is that schema, so each process keeps its own migration
/// history).
pub async fn migrate(
    pool: &PgPool,
    schema: &str,
    migrator: &sqlx::migrate::Migrator,
) -> Result<(), sqlx::migrate::MigrateError> {
    create_schema(pool, schema)
        .await
        .map_err(sqlx::migrate::MigrateError::Execute)?;
    migrator.run(pool).await
}

/// Whether Postgres answers within a second (for /readyz).
pub async fn ping(pool: &PgPool) -> bool {
    let ping = sqlx::query("SELECT 1").execute(pool);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ping).await,
        Ok(Ok(_))
    )
}

/// Whether `e` says Postgres cannot serve now, not that a query is wrong:
/// unreachable, shutting down or starting, or a standby that is not yet
/// (or no longer) the primary, as during a failover. Callers answer 503
/// and retry; anything else is a bug worth a 500.
pub fn unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => true,
        sqlx::Error::Database(e) => e.code().is_some_and(|code| unavailable_state(&code)),
        _ => false,
    }
}

/// SQLSTATEs of a server that cannot serve now: connection exceptions
/// (class 08), a read-only transaction (25006: a standby), operator
/// intervention (57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot
/// connect now) and too many connections (53300).
fn unavailable_state(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "25006" | "57P01" | "57P02" | "57P03" | "53300")
}

#[cfg(test)]
mod tests {
    use super::unavailable_state;

    #[test]
    fn a_standby_or_a_server_going_away_is_unavailable_but_a_bad_query_is_not() {
        for code in ["08006", "08001", "25006", "57P01", "57P03", "53300"] {
            assert!(unavailable_state(code), "{code}");
        }
        for code in ["23505", "42P01", "40001", "22003"] {
            assert!(!unavailable_state(code), "{code}");
        }
    }
}
