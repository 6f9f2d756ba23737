//! Noticing that Postgres went back in time (restored from a backup) while
//! Redis kept views written after that backup.
//!
//! Every so often a projector writes a fresh mark to Postgres and, once
//! committed, beside the views in Redis. Views carrying a mark Postgres
//! does not have were written after what Postgres holds: it is a restore
//! (or another database), and their versions mean nothing to it. Marks
//! are kept a week; views whose projectors were all down longer than that
//! are rebuilt once for nothing.
//!
//! A restore from a backup younger than the mark interval is caught by the
//! other check (see `RedisViews::ahead_of`): views carrying snapshot
//! positions Postgres has not reached.

use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::error::Result;
use crate::views::redis::RedisViews;

/// How often the views are checked and a mark is written (and at start).
const EVERY: Duration = Duration::from_secs(10);

pub struct RestoreMarks {
    table: String,
    last: Option<Instant>,
}

impl RestoreMarks {
    /// Marks in `{control}.view_marks` (a checked identifier).
    pub fn new(control: &str) -> Self {
        Self {
            table: format!("{control}.view_marks"),
            last: None,
        }
    }

    /// Creates the table if needed (the control schema exists by then).
    pub async fn prepare(&self, pool: &PgPool) -> Result<()> {
        let created = sqlx::query(&format!(
            "CREATE TABLE IF NOT EXISTS {} (
                 mark       UUID        PRIMARY KEY,
                 written_at TIMESTAMPTZ NOT NULL DEFAULT now()
             )",
            self.table
        ))
        .execute(pool)
        .await;
        match created {
            Ok(_) => Ok(()),
            // Two processes creating it at once: the loser finds it made.
            Err(sqlx::Error::Database(e))
                if matches!(e.code().as_deref(), Some("23505") | Some("42P07")) =>
            {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Whether Postgres has the mark the views carry (true when they carry
    /// none: nothing to tell).
    pub async fn postgres_has_views_mark(
        &self,
        pool: &PgPool,
        views: &mut RedisViews,
    ) -> Result<bool> {
        let Some(mark) = views.restore_mark().await? else {
            return Ok(true);
        };
        let Ok(mark) = uuid::Uuid::parse_str(&mark) else {
            return Ok(false);
        };
        Ok(sqlx::query_scalar(&format!(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE mark = $1)",
            self.table
        ))
        .bind(mark)
        .fetch_one(pool)
        .await?)
    }

    /// Whether a check and a new mark are due.
    pub fn due(&self) -> bool {
        self.last.is_none_or(|last| last.elapsed() >= EVERY)
    }

    /// Writes a new mark: to Postgres, then to the views.
    pub async fn write(&mut self, pool: &PgPool, views: &mut RedisViews) -> Result<()> {
        let mark = uuid::Uuid::new_v4();
        sqlx::query(&format!(
            "WITH old AS (DELETE FROM {0} WHERE written_at < now() - interval '7 days')
             INSERT INTO {0} (mark) VALUES ($1)",
            self.table
        ))
        .bind(mark)
        .execute(pool)
        .await?;
        views.set_restore_mark(&mark.to_string()).await?;
        self.last = Some(Instant::now());
        Ok(())
    }
}
