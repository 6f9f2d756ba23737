//! "The read models equal a fold of the log": `ratewire-projector verify`
//! (a replay of the whole topic into a fresh schema, compared table by
//! table and view by view with the live generation) and `compare`, run as
//! an operator runs them, and the generations' names and Redis prefixes.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use crate::Stack;

/// Rows per table of the compared generation, for tests to check that
/// something was compared at all.
pub type RowCounts = BTreeMap<String, i64>;

/// What `ratewire-projector verify` and `compare` print.
#[derive(Debug, serde::Deserialize)]
struct Report {
    compared: String,
    against: String,
    rows: RowCounts,
    differences: Vec<String>,
}

impl Stack {
    /// The schema readers use now.
    pub async fn active_generation(&self) -> Result<String> {
        let pool = sqlx::PgPool::connect(&format!("{}/{}", self.postgres, self.database)).await?;
        let active: Option<String> =
            sqlx::query_scalar("SELECT schema_name FROM ratewire.read_model")
                .fetch_optional(&pool)
                .await
                .unwrap_or(None);
        pool.close().await;
        Ok(active.unwrap_or_else(|| "readmodel".into()))
    }

    /// The Redis prefix of `schema`'s views: the schema with the read
    /// model's identity (the cluster's system identifier and the control
    /// row's epoch), as the processes form it.
    pub async fn views_prefix_of(&self, schema: &str) -> Result<String> {
        let pool = sqlx::PgPool::connect(&format!("{}/{}", self.postgres, self.database)).await?;
        let (epoch, system): (String, String) = sqlx::query_as(
            "SELECT epoch, (SELECT system_identifier::text FROM pg_control_system())
             FROM ratewire.read_model",
        )
        .fetch_one(&pool)
        .await
        .context("the control row (no projector started yet?)")?;
        pool.close().await;
        Ok(format!(
            "{}{{{schema}.{system}.{epoch}}}:",
            self.redis_prefix
        ))
    }

    /// The Redis prefix of the active generation's views.
    pub async fn views_prefix(&self) -> Result<String> {
        self.views_prefix_of(&self.active_generation().await?).await
    }

    /// Runs `ratewire-projector replay` with `args` to its end (the whole
    /// topic into a fresh schema, and, unless `--no-switch`, the switch to
    /// it); fails with what it said unless it succeeded.
    pub async fn replay(&self, args: &[&str]) -> Result<()> {
        let mut all = vec!["replay"];
        all.extend_from_slice(args);
        let output = self.run("ratewire-projector", &all, &[]).await?;
        if !output.status.success() {
            bail!("replay failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(())
    }

    /// Runs `ratewire-projector verify`: a replay of the whole topic into a
    /// check schema (without switching), compared table by table and view
    /// by view with the active generation, then dropped. Fails, naming the
    /// differences, unless they are equal. Call when the stream has been
    /// applied.
    pub async fn assert_fold_matches_replay(&self) -> Result<RowCounts> {
        self.comparison(&["verify"]).await
    }

    /// Runs `ratewire-projector compare a b`: fails, naming the
    /// differences, unless the two generations' tables hold the same rows
    /// and their Redis views are the same.
    pub async fn compare_schemas(&self, a: &str, b: &str) -> Result<RowCounts> {
        self.comparison(&["compare", a, b]).await
    }

    /// Runs a projector command that prints a report, and returns the
    /// compared generation's rows if it found no difference.
    async fn comparison(&self, args: &[&str]) -> Result<RowCounts> {
        let output = self.run("ratewire-projector", args, &[]).await?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let report: Report = match serde_json::from_str(stdout.trim()) {
            Ok(report) => report,
            Err(_) => bail!("{} failed ({}): {stderr}", args[0], output.status),
        };
        if !report.differences.is_empty() {
            bail!(
                "{} and {} differ: {}",
                report.compared,
                report.against,
                report.differences.join("; ")
            );
        }
        if !output.status.success() {
            bail!("{} failed ({}): {stderr}", args[0], output.status);
        }
        Ok(report.rows)
    }
}
