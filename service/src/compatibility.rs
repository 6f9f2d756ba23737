//! What this build needs of its dependencies' versions, checked at start:
//! an older server would fail in ways that look like outages (Redis before
//! 7 refuses `EXPIRE ... NX` in every pipeline, Postgres before 13 lacks
//! the snapshot functions the views' version guard reads), so it stops the
//! process at once with exit status 2 and says which version it found.

/// The oldest Postgres this build works with (`server_version_num`).
pub const MIN_POSTGRES: u32 = 130_000;
/// The oldest Redis this build works with (major version).
pub const MIN_REDIS_MAJOR: u32 = 7;

/// Stops the process: a dependency is too old to work with.
pub fn stop(message: &str) -> ! {
    tracing::error!("{message}");
    eprintln!("error: {message}");
    std::process::exit(2);
}

/// Checks Postgres's version once it answers; an error is an outage (to
/// retry), a version too old stops the process.
pub async fn require_postgres(pool: &sqlx::PgPool) -> sqlx::Result<()> {
    let version: String = sqlx::query_scalar("SHOW server_version_num")
        .fetch_one(pool)
        .await?;
    let number: u32 = version.trim().parse().unwrap_or(0);
    if number < MIN_POSTGRES {
        stop(&format!(
            "Postgres {} is too old: ratewire needs Postgres 13 or later",
            postgres_version_text(number)
        ));
    }
    Ok(())
}

/// `150020` as `15.20`.
fn postgres_version_text(number: u32) -> String {
    format!("{}.{}", number / 10_000, number % 10_000)
}

/// Checks a Redis `INFO server` reply's version: `Err` with the message to
/// stop with when it is too old or cannot be read.
pub fn redis_version_ok(info: &str) -> Result<(), String> {
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(str::trim);
    let major = version
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(major) if major >= MIN_REDIS_MAJOR => Ok(()),
        _ => Err(format!(
            "Redis {} is too old: ratewire needs Redis {MIN_REDIS_MAJOR} or later",
            version.unwrap_or("(version unknown)")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_versions_are_read_from_info() {
        assert!(redis_version_ok("# Server\r\nredis_version:7.0.15\r\n").is_ok());
        assert!(redis_version_ok("redis_version:8.2.1").is_ok());
        let old = redis_version_ok("redis_version:6.2.14\r\n").unwrap_err();
        assert_eq!(
            old,
            "Redis 6.2.14 is too old: ratewire needs Redis 7 or later"
        );
        assert!(redis_version_ok("nothing").is_err());
        assert_eq!(postgres_version_text(150_020), "15.20");
    }
}
