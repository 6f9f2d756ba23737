//! "The read models equal a fold of the log": a replay of the whole topic
//! into a fresh schema, compared table by table and view by view with the
//! live generation.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use crate::Stack;

/// Every read-model table and view, with its columns in a comparable form
/// (numbers as text, so 155.10 and 155.1 differ as they do when served).
/// The views show the model as it is now; the version tables behind them
/// hold its whole bitemporal history, which a replay must rebuild too.
const TABLES: [(&str, &str, &str); 18] = [
    (
        "banks",
        "id, code, name, image_url, social_links::text, active, registered_at, updated_at",
        "",
    ),
    ("currencies", "code, name, first_quoted_at", ""),
    ("boards", "bank_id, as_of, event_id", ""),
    (
        "rates",
        "bank_id, currency, as_of, cash_buying::text, cash_selling::text, \
         transactional_buying::text, transactional_selling::text",
        "",
    ),
    ("applied_events", r#"event_id, partition, "offset""#, ""),
    (
        "consumer_offsets",
        "topic, partition, next_offset, known_at",
        // Partitions never written to get a row when first seen settled.
        "WHERE next_offset > 0",
    ),
    (
        "dead_letters",
        r#"topic, partition, "offset", event_id, rule, error, message_key, message_time"#,
        "",
    ),
    (
        "retracted_boards",
        "event_id, bank_id, retracted_by, reason, retracted_at, known_at",
        "",
    ),
    (
        "reference_boards",
        "source, date, event_id, published_at",
        "",
    ),
    (
        "reference_rates",
        "source, date, currency, buying::text, selling::text, weighted_average::text",
        "",
    ),
    (
        "bank_versions",
        "id, code, name, image_url, social_links::text, active, registered_at, updated_at, \
         known_from, known_to",
        "",
    ),
    (
        "board_versions",
        "bank_id, as_of, event_id, currencies, known_from, known_to, closed_by, received_at, \
         log_partition, log_offset, source::text, reason",
        "",
    ),
    (
        "rate_versions",
        "bank_id, currency, as_of, cash_buying::text, cash_selling::text, \
         transactional_buying::text, transactional_selling::text, known_from, known_to",
        "",
    ),
    (
        "currencies_known",
        "code, name, first_quoted_at, known_from",
        "",
    ),
    (
        "bank_latest_versions",
        "bank_id, as_of, known_from, known_to",
        "",
    ),
    (
        "reference_board_versions",
        "source, date, event_id, published_at, known_from, known_to",
        "",
    ),
    (
        "reference_rate_versions",
        "source, date, currency, buying::text, selling::text, weighted_average::text, \
         known_from, known_to",
        "",
    ),
    // How often a history was rewritten depends on how the events fell
    // into batches; whether it ever was does not.
    ("bank_history_revs", "bank_id", "WHERE history_rev > 0"),
];

/// Rows per table of the compared generation, for tests to check that
/// something was compared at all.
pub type RowCounts = BTreeMap<&'static str, i64>;

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

    /// Replays the whole topic into a fresh schema (without switching) and
    /// fails, naming the differences, unless every table and view of the
    /// active generation equals it. Call when the stream has been applied.
    pub async fn assert_fold_matches_replay(&self) -> Result<RowCounts> {
        let check = format!(
            "fold_check_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        self.replay(&["--schema", &check, "--no-switch"]).await?;
        let live = self.active_generation().await?;
        let counts = self.compare_schemas(&live, &check).await?;
        self.compare_views(&live, &check).await?;
        Ok(counts)
    }

    /// Fails unless the two generations' tables hold the same rows.
    pub async fn compare_schemas(&self, a: &str, b: &str) -> Result<RowCounts> {
        let pool = sqlx::PgPool::connect(&format!("{}/{}", self.postgres, self.database)).await?;
        let mut counts = RowCounts::new();
        let mut differences = Vec::new();
        for (table, columns, filter) in TABLES {
            let from = |schema: &str| format!("{columns} FROM {schema}.{table} {filter}");
            let (left, right) = (from(a), from(b));
            let differing: i64 = sqlx::query_scalar(&format!(
                "SELECT count(*) FROM (
                     (SELECT {left} EXCEPT ALL SELECT {right})
                     UNION ALL
                     (SELECT {right} EXCEPT ALL SELECT {left})
                 ) d"
            ))
            .fetch_one(&pool)
            .await
            .with_context(|| format!("comparing {table}"))?;
            let rows: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {a}.{table}"))
                .fetch_one(&pool)
                .await?;
            counts.insert(table, rows);
            if differing > 0 {
                differences.push(format!("{table}: {differing} rows differ ({rows} in {a})"));
            }
        }
        pool.close().await;
        if !differences.is_empty() {
            bail!("{a} and {b} differ: {}", differences.join("; "));
        }
        Ok(counts)
    }

    /// Fails unless the two generations' Redis views are the same bytes.
    pub async fn compare_views(&self, a: &str, b: &str) -> Result<()> {
        let (left, right) = (self.views_of(a).await?, self.views_of(b).await?);
        if left.is_empty() {
            bail!("generation {a} has no views");
        }
        let mut differences: Vec<String> = left
            .iter()
            .filter(|(key, value)| right.get(*key) != Some(value))
            .map(|(key, _)| key.clone())
            .collect();
        differences.extend(right.keys().filter(|k| !left.contains_key(*k)).cloned());
        if !differences.is_empty() {
            bail!("views of {a} and {b} differ at {differences:?}");
        }
        Ok(())
    }

    /// Each view of a generation (by key without its prefix) and its value.
    async fn views_of(&self, schema: &str) -> Result<BTreeMap<String, String>> {
        let client = redis::Client::open(self.redis_url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let prefix = self.views_prefix_of(schema).await?;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}view:*"))
            .query_async(&mut conn)
            .await?;
        let mut views = BTreeMap::new();
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut conn).await?;
            let value = match kind.as_str() {
                "string" => redis::cmd("GET").arg(&key).query_async(&mut conn).await?,
                "zset" => {
                    let members: Vec<String> = redis::cmd("ZRANGE")
                        .arg(&key)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES")
                        .query_async(&mut conn)
                        .await?;
                    members.join(",")
                }
                other => format!("<{other}>"),
            };
            views.insert(key[prefix.len()..].to_owned(), without_render_time(value));
        }
        Ok(views)
    }
}

/// A view with its render time (`timestamp` beside `updatedAt`: "when this
/// view was computed") taken out, as two renders of one history differ
/// only there.
fn without_render_time(view: String) -> String {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                if map.contains_key("updatedAt") {
                    map.remove("timestamp");
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    match serde_json::from_str::<serde_json::Value>(&view) {
        Ok(mut value) => {
            strip(&mut value);
            value.to_string()
        }
        Err(_) => view,
    }
}
