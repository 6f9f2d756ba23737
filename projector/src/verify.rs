//! `ratewire-projector verify` and `compare`: does a read model equal a
//! fold of the log?
//!
//! The read model is derived from the log alone, so a replay of the whole
//! log must hold the same rows and render the same views as the live
//! generation, whatever batches, restarts, redeliveries and scale-outs the
//! live fold went through. `verify` replays into a check generation (never
//! switched to), compares the active generation with it and drops it;
//! `compare` compares two generations that exist (after a replay that
//! switched, with the one it replaced). The e2e tests run both after the
//! faults they inject.

use std::collections::BTreeMap;

use ratewire_readmodel::generation::{self, Generation};
use ratewire_readmodel::redis::{connect, Connection, Keys};
use ratewire_readmodel::{board_months, db};
use serde::Serialize;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::replay::{replay, ReplaySettings};

/// Every read-model table and view, with its columns in a comparable form
/// (numbers as text, so 155.10 and 155.1 differ as they do when served)
/// and a filter. The views show the model as it is now; the version tables
/// behind them hold its whole bitemporal history, which a replay must
/// rebuild too.
pub const TABLES: [(&str, &str, &str); 18] = [
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

/// How many differing view keys a report names; the rest are counted.
const KEYS_NAMED: usize = 50;

#[derive(Debug, Clone, Default)]
pub struct VerifySettings {
    /// The check generation's schema; a fresh `verify_<8 hex>` when `None`.
    pub schema: Option<String>,
    /// Leave the check generation in place afterwards (to look into a
    /// difference, or to switch to it with a replay later).
    pub keep: bool,
}

/// What a comparison found: printed as one JSON object by the commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The generation compared (the active one, for `verify`).
    pub compared: String,
    /// The generation it was compared with (the check one, for `verify`).
    pub against: String,
    /// Rows per table of `compared`, to show that something was compared.
    pub rows: BTreeMap<String, i64>,
    /// Each table whose rows differ, and the views that differ; empty when
    /// the two are equal.
    pub differences: Vec<String>,
}

impl Report {
    pub fn equal(&self) -> bool {
        self.differences.is_empty()
    }
}

/// A fresh name for a check generation: `verify_` and 8 hex digits.
pub fn check_schema() -> String {
    format!("verify_{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// Replays the whole log into a check generation without switching to it,
/// compares the active generation with it, and drops it (its schema and
/// its Redis keys) unless `settings.keep`, also when the replay or the
/// comparison failed. Readers and projectors keep using the active
/// generation throughout.
pub async fn verify(
    config: &Config,
    settings: &VerifySettings,
    shutdown: &CancellationToken,
) -> Result<Report> {
    let schema = match &settings.schema {
        Some(schema) => checked(schema)?,
        None => check_schema(),
    };
    let read_model = &config.read_model;
    let control = db::pool(&config.common.database_url, &read_model.control_schema, 2)?;
    // Refused here, before anything is made, so that nothing an operator
    // named is dropped afterwards.
    let active = generation::active(
        &control,
        &read_model.control_schema,
        &read_model.read_schema,
    )
    .await?;
    if schema == active.schema || generation::schema_in_use(&control, &schema).await? {
        return Err(Error::Config(format!(
            "schema {schema} already holds a read model; verify replays into a fresh one (name another with --schema)"
        )));
    }
    info!(
        active = active.schema,
        check = schema,
        "verify: replaying the whole log into a check generation"
    );
    let replay_settings = ReplaySettings {
        schema: schema.clone(),
        switch: false,
    };
    let outcome = async {
        replay(config, &replay_settings, shutdown).await?;
        // Read again: the replay prepared the control row if there was none.
        let active = generation::active(
            &control,
            &read_model.control_schema,
            &read_model.read_schema,
        )
        .await?;
        // The active generation may have dropped months past the raw
        // history's retention that the replay made again.
        let check = db::writer_pool(&config.common.database_url, &schema, 2)?;
        let dropped = board_months::drop_absent(&check, &active.schema).await;
        check.close().await;
        dropped?;
        compare(config, &active.schema, &schema).await
    }
    .await;
    if settings.keep {
        info!(check = schema, "verify: check generation kept");
    } else if let Err(e) = drop_generation(config, &control, &schema).await {
        control.close().await;
        let found = match &outcome {
            Ok(report) if report.equal() => "found the generations equal".to_owned(),
            Ok(report) => format!("found differences ({})", report.differences.join("; ")),
            Err(e) => format!("failed ({e})"),
        };
        return Err(Error::Config(format!(
            "verify {found}, then could not drop the check generation {schema} (drop its schema and its Redis keys by hand): {e}"
        )));
    }
    control.close().await;
    outcome
}

/// Compares generation `a` with `b`: every table of [`TABLES`] as a
/// multiset of rows, and every Redis view. Nothing is written.
pub async fn compare(config: &Config, a: &str, b: &str) -> Result<Report> {
    let (a, b) = (checked(a)?, checked(b)?);
    let read_model = &config.read_model;
    let control = db::pool(&config.common.database_url, &read_model.control_schema, 2)?;
    for schema in [&a, &b] {
        if !generation::schema_in_use(&control, schema).await? {
            control.close().await;
            return Err(Error::Config(format!(
                "schema {schema} holds no read model"
            )));
        }
    }
    let compared = async {
        let (rows, mut differences) = compare_tables(&control, &a, &b).await?;
        // Every generation of one Postgres has its identity (as a replay
        // gives its new one the active one's).
        let active = generation::active(
            &control,
            &read_model.control_schema,
            &read_model.read_schema,
        )
        .await?;
        let prefix = |schema: &str| {
            Generation {
                schema: schema.to_owned(),
                identity: active.identity.clone(),
            }
            .views_prefix(&read_model.redis_prefix)
        };
        let mut redis = connect(&read_model.redis_url)?;
        let left = views_of(&mut redis, &prefix(&a)).await?;
        let right = views_of(&mut redis, &prefix(&b)).await?;
        differences.extend(view_differences(&a, &left, &right));
        Ok::<_, Error>(Report {
            compared: a.clone(),
            against: b.clone(),
            rows,
            differences,
        })
    }
    .await;
    control.close().await;
    let report = compared?;
    info!(
        compared = report.compared,
        against = report.against,
        differences = report.differences.len(),
        "read models compared"
    );
    Ok(report)
}

/// A schema named on the command line, checked as settings are (it is
/// written into SQL).
fn checked(schema: &str) -> Result<String> {
    ratewire_service::settings::parse_schema(schema).map_err(Error::Config)
}

/// Rows per table of `a`, and a line for each table whose rows differ
/// between `a` and `b` (counted both ways, duplicates too), all read in
/// one snapshot, so a live fold writing meanwhile does not tear the
/// comparison. `a` and `b` are checked identifiers.
pub async fn compare_tables(
    pool: &PgPool,
    a: &str,
    b: &str,
) -> Result<(BTreeMap<String, i64>, Vec<String>)> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let mut rows = BTreeMap::new();
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
        .fetch_one(&mut *tx)
        .await?;
        let count: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {a}.{table}"))
            .fetch_one(&mut *tx)
            .await?;
        rows.insert(table.to_owned(), count);
        if differing > 0 {
            differences.push(format!("{table}: {differing} rows differ ({count} in {a})"));
        }
    }
    tx.rollback().await?;
    Ok((rows, differences))
}

/// Each view under `prefix` (by key without the prefix) and its value:
/// strings as stored, sorted sets as `member,score,...`, other kinds by
/// their kind only; with the render time taken out (see
/// [`without_render_time`]). On a Redis Cluster every primary is scanned,
/// though a generation's views share one slot.
pub async fn views_of(redis: &mut Connection, prefix: &str) -> Result<BTreeMap<String, String>> {
    let mut keys: Vec<String> = redis
        .scan_match(&Keys::new(prefix).all_views())
        .await?
        .into_iter()
        // A prefix holding glob characters may match more.
        .filter(|key| key.starts_with(prefix))
        .collect();
    // A scan may name a key twice.
    keys.sort();
    keys.dedup();
    let mut views = BTreeMap::new();
    for chunk in keys.chunks(500) {
        let mut kinds = redis::pipe();
        for key in chunk {
            kinds.cmd("TYPE").arg(key);
        }
        let kinds: Vec<String> = kinds.query_async(redis).await?;
        // One read per key, in order: a string's value, a sorted set's
        // members and scores; other kinds only by their kind.
        let mut reads = redis::pipe();
        for (key, kind) in chunk.iter().zip(&kinds) {
            match kind.as_str() {
                "string" => reads.cmd("GET").arg(key),
                "zset" => reads
                    .cmd("ZRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES"),
                _ => reads.cmd("EXISTS").arg(key),
            };
        }
        let values: Vec<redis::Value> = reads.query_async(redis).await?;
        for ((key, kind), read) in chunk.iter().zip(kinds).zip(values) {
            let value = match (kind.as_str(), read) {
                ("string", redis::Value::BulkString(bytes)) => {
                    String::from_utf8_lossy(&bytes).into_owned()
                }
                ("zset", members) => redis::from_redis_value::<Vec<String>>(members)
                    .map_err(redis::RedisError::from)?
                    .join(","),
                // Deleted since the scan.
                ("string" | "none", _) => continue,
                (other, _) => format!("<{other}>"),
            };
            views.insert(key[prefix.len()..].to_owned(), without_render_time(value));
        }
    }
    Ok(views)
}

/// The views that differ between generations `a` (`left`) and `b`
/// (`right`), as report lines: none when equal, and one when `a` has no
/// views at all (there would be nothing to compare).
pub fn view_differences(
    a: &str,
    left: &BTreeMap<String, String>,
    right: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut differences = Vec::new();
    if left.is_empty() {
        differences.push(format!("{a} has no views"));
    }
    let mut keys: Vec<&String> = left
        .iter()
        .filter(|(key, value)| right.get(*key) != Some(value))
        .map(|(key, _)| key)
        .collect();
    keys.extend(right.keys().filter(|key| !left.contains_key(*key)));
    keys.sort();
    if !keys.is_empty() {
        let named = &keys[..keys.len().min(KEYS_NAMED)];
        let mut line = format!("views differ at {named:?}");
        if keys.len() > named.len() {
            line.push_str(&format!(" and {} more", keys.len() - named.len()));
        }
        differences.push(line);
    }
    differences
}

/// A view with its render time (`timestamp` beside `updatedAt`: "when this
/// view was computed") taken out, as two renders of one history differ
/// only there.
pub fn without_render_time(view: String) -> String {
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

/// Removes what a check generation left: its schema (every table, view and
/// function the migrations made is in it, their record too) and every Redis
/// key under its prefix (views, versions, the changes stream). A replay
/// that does not switch writes nothing else: the control row names the
/// active generation only, and the alerts' schema is shared by every
/// generation. Never drops the active generation.
async fn drop_generation(config: &Config, control: &PgPool, schema: &str) -> Result<()> {
    let read_model = &config.read_model;
    let active =
        generation::active(control, &read_model.control_schema, &read_model.read_schema).await?;
    if active.schema == schema {
        return Err(Error::Config(format!(
            "{schema} became the active generation meanwhile"
        )));
    }
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(control)
        .await?;
    let prefix = Generation {
        schema: schema.to_owned(),
        identity: active.identity,
    }
    .views_prefix(&read_model.redis_prefix);
    let mut redis = connect(&read_model.redis_url)?;
    let keys: Vec<String> = redis
        .scan_match(&format!("{prefix}*"))
        .await?
        .into_iter()
        .filter(|key| key.starts_with(&prefix))
        .collect();
    // One slot (the prefix is a hash tag), so one command may name many.
    for chunk in keys.chunks(1000) {
        redis::cmd("UNLINK")
            .arg(chunk)
            .query_async::<()>(&mut redis)
            .await?;
    }
    if keys.is_empty() {
        warn!(
            check = schema,
            "verify: the check generation had no Redis keys"
        );
    }
    info!(
        check = schema,
        redis_keys = keys.len(),
        "verify: check generation dropped"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_render_time_beside_updated_at_is_taken_out_and_nothing_else() {
        let view =
            r#"{"data":[{"updatedAt":"t1","timestamp":"r1","rate":"1.10"}],"timestamp":"keep"}"#;
        assert_eq!(
            without_render_time(view.into()),
            r#"{"data":[{"rate":"1.10","updatedAt":"t1"}],"timestamp":"keep"}"#
        );
        assert_eq!(without_render_time("1,2".into()), "1,2");
    }

    #[test]
    fn equal_views_differ_nowhere() {
        let left = views(&[("view:currencies", "[]"), ("view:built", "1")]);
        assert!(view_differences("a", &left, &left.clone()).is_empty());
    }

    #[test]
    fn views_that_differ_or_are_on_one_side_only_are_named() {
        let left = views(&[("view:best:USD", "1"), ("view:built", "1")]);
        let right = views(&[("view:best:USD", "2"), ("view:best:EUR", "3")]);
        assert_eq!(
            view_differences("a", &left, &right),
            [r#"views differ at ["view:best:EUR", "view:best:USD", "view:built"]"#]
        );
    }

    #[test]
    fn a_generation_without_views_is_a_difference_and_long_lists_are_cut() {
        let right: BTreeMap<String, String> = (0..60)
            .map(|i| (format!("view:best:{i:02}"), "x".to_owned()))
            .collect();
        let differences = view_differences("a", &BTreeMap::new(), &right);
        assert_eq!(differences[0], "a has no views");
        assert!(differences[1].starts_with(r#"views differ at ["view:best:00", "#));
        assert!(differences[1].ends_with(r#""view:best:49"] and 10 more"#));
    }

    #[test]
    fn check_schemas_are_fresh_plain_identifiers() {
        let (one, two) = (check_schema(), check_schema());
        assert_ne!(one, two);
        assert_eq!(one.len(), "verify_".len() + 8);
        assert!(checked(&one).is_ok());
        assert!(checked("a; DROP SCHEMA x").is_err());
    }
}
