//! Read-model generations: which Postgres schema (and with it which Redis
//! views) readers use.
//!
//! A generation is named by its schema; its Redis views live under
//! `{RATEWIRE_REDIS_PREFIX}{{schema}}:` (the schema in braces: a hash tag). The active one is recorded in one row
//! of `{RATEWIRE_CONTROL_SCHEMA}.read_model`; until a replay switches it,
//! there is no row and `RATEWIRE_READ_SCHEMA` is active.
//!
//! Views are also tied to the Postgres that wrote them: their versions are
//! that cluster's snapshot positions, which mean nothing to another cluster
//! or to the same one restored from a backup. So a generation's identity
//! holds, beside its schema, the cluster's system identifier and an epoch
//! (a random id in the control row, made with the row: a fresh database
//! has a new one). The identity is in the views' Redis prefix, so views
//! another Postgres wrote are never read, nor compared with: they are as
//! good as absent, and the projectors rebuild them. A restore keeps both
//! the system identifier and the row; the projector notices it as views
//! newer than anything Postgres has seen (see `store::Version`) and rolls
//! the epoch.
//!
//! `ratewire-projector replay` builds a new generation from offset zero
//! while everything keeps serving the active one, then switches the row.
//! API instances and running projectors watch the row and follow within a
//! second: projectors carry on folding from the new schema's stored offsets,
//! so nothing between the replay's end and their switch is lost.

use sqlx::PgPool;

use crate::error::Result;

/// The active read model: its schema, and who wrote its views.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    pub schema: String,
    /// The Postgres cluster's system identifier and the control row's
    /// epoch (empty before any process prepared the control row).
    pub identity: String,
}

impl Generation {
    /// The Redis key prefix of the generation's views. Schema and identity
    /// are a hash tag: in a Redis Cluster every view of a generation is in
    /// one slot, so the scripts that write views can touch them together,
    /// and the elements of an all-banks list are read in one pipeline; the
    /// prefix stays in front, so a scan of it finds them.
    pub fn views_prefix(&self, redis_prefix: &str) -> String {
        format!("{redis_prefix}{{{}.{}}}:", self.schema, self.identity)
    }
}

/// A new epoch, in SQL: 12 random hex digits.
const NEW_EPOCH: &str = "left(md5(gen_random_uuid()::text), 12)";

/// Creates the control table and its row if needed; `control` is a checked
/// identifier, `default` the schema active until a replay switches.
pub async fn prepare(pool: &PgPool, control: &str, default: &str) -> Result<()> {
    ratewire_service::postgres::create_schema(pool, control).await?;
    // Each with whether it takes `default`.
    for (statement, with_default) in [
        (
            format!(
                "CREATE TABLE IF NOT EXISTS {control}.read_model (
                 singleton   BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
                 schema_name TEXT        NOT NULL,
                 switched_at TIMESTAMPTZ NOT NULL DEFAULT now()
             )"
            ),
            false,
        ),
        (
            format!("ALTER TABLE {control}.read_model ADD COLUMN IF NOT EXISTS epoch TEXT"),
            false,
        ),
        (
            format!(
                "INSERT INTO {control}.read_model (singleton, schema_name) VALUES (TRUE, $1)
             ON CONFLICT (singleton) DO NOTHING"
            ),
            true,
        ),
        // A row from before epochs gets one too.
        (
            format!("UPDATE {control}.read_model SET epoch = {NEW_EPOCH} WHERE epoch IS NULL"),
            false,
        ),
    ] {
        let query = sqlx::query(&statement);
        let query = if with_default {
            query.bind(default)
        } else {
            query
        };
        let done = query.execute(pool).await;
        match done {
            Ok(_) => {}
            // Two processes creating it at once: the loser finds it made.
            Err(sqlx::Error::Database(e))
                if matches!(e.code().as_deref(), Some("23505") | Some("42P07")) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The active generation: the control row's, else `default` with no
/// identity yet.
pub async fn active(pool: &PgPool, control: &str, default: &str) -> Result<Generation> {
    // One statement (it runs every second in every process); where the
    // role may not read the system identifier, the epoch alone tells
    // clusters apart, and a restore is noticed as one.
    let with_system = format!(
        "SELECT schema_name, epoch, (SELECT system_identifier::text FROM pg_control_system())
         FROM {control}.read_model"
    );
    let without = format!("SELECT schema_name, epoch, '0' FROM {control}.read_model");
    let mut row = read_row(pool, &with_system).await;
    if matches!(&row, Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42501")) {
        row = read_row(pool, &without).await;
    }
    let unprepared = || Generation {
        schema: default.to_owned(),
        identity: String::new(),
    };
    match row {
        Ok(Some((schema, Some(epoch), system))) => Ok(Generation {
            schema,
            identity: format!("{system}.{epoch}"),
        }),
        Ok(Some((schema, None, _))) => Ok(Generation {
            schema,
            identity: String::new(),
        }),
        Ok(None) => Ok(unprepared()),
        // No control table (or no epoch column) yet: nothing was prepared.
        Err(sqlx::Error::Database(e))
            if matches!(e.code().as_deref(), Some("42P01") | Some("42703")) =>
        {
            Ok(unprepared())
        }
        Err(e) => Err(e.into()),
    }
}

type ControlRow = (String, Option<String>, String);

async fn read_row(
    pool: &PgPool,
    query: &str,
) -> std::result::Result<Option<ControlRow>, sqlx::Error> {
    sqlx::query_as(query).fetch_optional(pool).await
}

/// Makes `schema` the active generation.
pub async fn switch(pool: &PgPool, control: &str, schema: &str) -> Result<()> {
    prepare(pool, control, schema).await?;
    sqlx::query(&format!(
        "UPDATE {control}.read_model SET schema_name = $1, switched_at = now()"
    ))
    .bind(schema)
    .execute(pool)
    .await?;
    Ok(())
}

/// Gives the active generation a new epoch: every view written before is
/// from then on another identity's, never read again.
pub async fn new_epoch(pool: &PgPool, control: &str) -> Result<()> {
    sqlx::query(&format!(
        "UPDATE {control}.read_model SET epoch = {NEW_EPOCH}, switched_at = now()"
    ))
    .execute(pool)
    .await?;
    Ok(())
}

/// True when `schema` exists and holds any table.
pub async fn schema_in_use(pool: &PgPool, schema: &str) -> Result<bool> {
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(schema)
    .fetch_one(pool)
    .await?;
    Ok(tables > 0)
}
