//! `deploy/bench storage`: Postgres bytes per board on three feeds, each
//! published through ingest and folded by the projector on a stack of its
//! own, beside the same boards copied in the two layouts before them: every
//! value on its board's row (read-model migration 12) and one row per rate
//! (migration 11 and before, the "today").
//!
//! The sizes do not vary from run to run (the same boards, the same pages),
//! so each feed is measured once. The copies go in in the order the fold
//! wrote the boards, so their indexes grow as the fold's did.

use std::time::{Duration, Instant};

use anyhow::bail;
use sqlx::PgPool;

use super::procs::{self, Procs};
use super::report::{fixed, replace_section, row};
use super::{say, Machine, Settings};
use crate::feed::market::MOVE_CHANCE;

/// Boards per feed: 50 banks, 200 each.
const BOARDS: u64 = 10_000;

/// The scratch schema of the copies.
const COPIES: &str = "bench_storage";

/// A feed: its name on the page and the chance that a currency's quotes
/// move from one board of a bank to the next.
struct Feed {
    name: &'static str,
    moves: f64,
}

const FEEDS: [Feed; 3] = [
    Feed {
        name: "every value changes on every board",
        moves: 1.0,
    },
    Feed {
        name: "the demo's mix: each currency repriced with chance 1/10 per board",
        moves: MOVE_CHANCE,
    },
    Feed {
        name: "every board repeats its bank's previous one",
        moves: 0.0,
    },
];

/// What one feed cost.
struct Measured {
    boards: i64,
    /// Values on the feed's boards, and those stored (not read from a base).
    values: i64,
    stored_values: i64,
    /// Bytes the raw history (its months and bases) grew by.
    stored: i64,
    /// The same boards with every value on their row (migration 12).
    full: i64,
    /// The same boards with one row per rate (migration 11).
    rows: i64,
}

impl Measured {
    fn per_board(&self, bytes: i64) -> f64 {
        bytes as f64 / self.boards.max(1) as f64
    }
}

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let mut procs = Procs::new(settings, &[]).await?;
    procs.start_stack().await?;
    let pool = procs::database(procs::DATABASE).await?;
    let mut measured = Vec::new();
    let mut next_feed = Instant::now();
    for feed in &FEEDS {
        // A feed's boards are a millisecond apart from ten minutes before
        // its start: a feed started within BOARDS ms of the one before
        // would publish boards behind that one's newest, which are stored
        // in full as boards behind a bank's latest are.
        tokio::time::sleep_until(next_feed.into()).await;
        next_feed = Instant::now() + Duration::from_millis(BOARDS + 2_000);
        say(format!(
            "feed: {} ({BOARDS} boards of 30 currencies)",
            feed.name
        ));
        measured.push(measure(&procs, &pool, feed).await?);
    }
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {COPIES} CASCADE"))
        .execute(&pool)
        .await?;
    replace_section(&settings.page(), &section(&measured))
}

/// Publishes `feed`, waits for the fold, and sizes what it added.
async fn measure(procs: &Procs, pool: &PgPool, feed: &Feed) -> anyhow::Result<Measured> {
    let (before_boards, before_bytes, mark): (i64, i64, Option<chrono::DateTime<chrono::Utc>>) =
        sqlx::query_as(&format!(
            "SELECT count(*), ({}), max(known_from) FROM readmodel.board_versions",
            raw_history_bytes("readmodel")
        ))
        .fetch_one(pool)
        .await?;
    let accepted = procs.boards(BOARDS, feed.moves)?.number("accepted") as i64;
    wait_folded(pool, before_boards + accepted).await?;
    let (boards, values, stored_values, after_bytes): (i64, i64, i64, i64) =
        sqlx::query_as(&format!(
            "SELECT count(*), sum(cardinality(currencies))::bigint,
                sum(cardinality(array_remove(cash_buying, NULL)))::bigint, ({})
         FROM readmodel.board_versions WHERE known_from > $1 OR $1 IS NULL",
            raw_history_bytes("readmodel")
        ))
        .bind(mark)
        .fetch_one(pool)
        .await?;
    let (full, rows) = copies(pool, mark).await?;
    Ok(Measured {
        boards,
        values,
        stored_values,
        stored: after_bytes - before_bytes,
        full,
        rows,
    })
}

/// A query of the bytes the raw history takes in `schema`: every month
/// of `board_versions` (the partitioned table itself holds none) and the
/// bases, with their TOAST and indexes.
pub fn raw_history_bytes(schema: &str) -> String {
    format!(
        "SELECT (SELECT COALESCE(sum(pg_total_relation_size(relid)), 0)
                 FROM pg_partition_tree('{schema}.board_versions'))::bigint
                + pg_total_relation_size('{schema}.board_bases')"
    )
}

/// Polls until the read model holds `boards` board versions.
async fn wait_folded(pool: &PgPool, boards: i64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    while Instant::now() < deadline {
        let folded: i64 = sqlx::query_scalar("SELECT count(*) FROM readmodel.board_versions")
            .fetch_one(pool)
            .await?;
        if folded >= boards {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the projector did not fold {boards} boards within 10 minutes")
}

/// The boards known after `mark` copied into the two earlier layouts:
/// their sizes in bytes (full rows, rows per rate).
async fn copies(
    pool: &PgPool,
    mark: Option<chrono::DateTime<chrono::Utc>>,
) -> anyhow::Result<(i64, i64)> {
    let mut conn = pool.acquire().await?;
    // A value read from the base, for one field of the board `b` (base `s`).
    let field = |name: &str| {
        format!(
            "ARRAY(SELECT CASE WHEN q.cb IS NULL THEN s.{name}[array_position(s.currencies, q.c)]
                               ELSE q.v END
                   FROM unnest(b.currencies, b.cash_buying, b.{name}) WITH ORDINALITY
                        AS q (c, cb, v, n)
                   ORDER BY q.n)"
        )
    };
    let statements = [
        format!("DROP SCHEMA IF EXISTS {COPIES} CASCADE"),
        format!("CREATE SCHEMA {COPIES}"),
        format!("CREATE TABLE {COPIES}.on_row (LIKE readmodel.board_versions INCLUDING ALL)"),
        format!("ALTER TABLE {COPIES}.on_row DROP COLUMN base_id"),
        format!("CREATE TABLE {COPIES}.boards (LIKE readmodel.board_versions INCLUDING ALL)"),
        format!(
            "ALTER TABLE {COPIES}.boards DROP COLUMN base_id, DROP COLUMN cash_buying,
             DROP COLUMN cash_selling, DROP COLUMN transactional_buying,
             DROP COLUMN transactional_selling"
        ),
        format!(
            "CREATE TABLE {COPIES}.rates (
                bank_id               BIGINT      NOT NULL,
                currency              CHAR(3)     NOT NULL,
                as_of                 TIMESTAMPTZ NOT NULL,
                cash_buying           NUMERIC     NOT NULL,
                cash_selling          NUMERIC     NOT NULL,
                transactional_buying  NUMERIC,
                transactional_selling NUMERIC,
                known_from            TIMESTAMPTZ NOT NULL,
                known_to              TIMESTAMPTZ)"
        ),
        format!("CREATE INDEX ON {COPIES}.rates (bank_id, currency, as_of)"),
        format!(
            "INSERT INTO {COPIES}.on_row
             SELECT b.bank_id, b.as_of, b.event_id, b.currencies, b.known_from, b.known_to,
                    b.closed_by, b.received_at, b.log_partition, b.log_offset, b.source,
                    b.reason, b.widest_spread, b.largest_move, {}, {}, {}, {}
             FROM readmodel.board_versions b
             LEFT JOIN LATERAL (SELECT * FROM readmodel.board_bases x
                                WHERE x.event_id = b.base_id) s ON true
             WHERE b.known_from > $1 OR $1 IS NULL ORDER BY b.known_from, b.log_partition, b.log_offset",
            field("cash_buying"),
            field("cash_selling"),
            field("transactional_buying"),
            field("transactional_selling"),
        ),
        format!(
            "INSERT INTO {COPIES}.boards
             SELECT bank_id, as_of, event_id, currencies, known_from, known_to, closed_by,
                    received_at, log_partition, log_offset, source, reason, widest_spread,
                    largest_move
             FROM {COPIES}.on_row ORDER BY known_from, log_partition, log_offset"
        ),
        format!(
            "INSERT INTO {COPIES}.rates
             SELECT b.bank_id, q.currency, b.as_of, q.cash_buying, q.cash_selling,
                    q.transactional_buying, q.transactional_selling, b.known_from, b.known_to
             FROM {COPIES}.on_row b
             CROSS JOIN LATERAL unnest(currencies, cash_buying, cash_selling,
                                       transactional_buying, transactional_selling)
                 AS q (currency, cash_buying, cash_selling, transactional_buying,
                       transactional_selling)
             ORDER BY b.known_from, b.log_partition, b.log_offset"
        ),
    ];
    for statement in &statements {
        let query = sqlx::query(statement);
        let query = match statement.contains("$1") {
            true => query.bind(mark),
            false => query,
        };
        query.execute(&mut *conn).await?;
    }
    let size = |table: &str| format!("SELECT pg_total_relation_size('{COPIES}.{table}')");
    let full: i64 = sqlx::query_scalar(&size("on_row"))
        .fetch_one(&mut *conn)
        .await?;
    let boards: i64 = sqlx::query_scalar(&size("boards"))
        .fetch_one(&mut *conn)
        .await?;
    let rates: i64 = sqlx::query_scalar(&size("rates"))
        .fetch_one(&mut *conn)
        .await?;
    Ok((full, boards + rates))
}

fn section(measured: &[Measured]) -> String {
    let mut lines = vec![
        "## Storage per board (issue 62)".to_owned(),
        String::new(),
        format!(
            "Written by {}. Each feed is {BOARDS} boards of 30 currencies from 50 banks, \
             published through ingest and folded by the projector; the bytes are what the \
             raw history grew by: every month of `board_versions` and the copies of bases in \
             `board_bases` (read-model migration 14; `pg_total_relation_size`: heap, TOAST, \
             indexes). \
             Beside them, in the same run, the same boards copied in fold order into the two \
             layouts before: every value on the board's row (read-model migration 12), and one \
             row per rate (migration 11, the layout the issue's 5.1 KB a board was measured \
             on). Sizes do not vary from run to run, so each feed is measured once.",
            Machine::here().run_by("deploy/bench storage")
        ),
        String::new(),
        "| feed | boards | values stored | bytes per board | all values on the row (12) | one row per rate (11) | against one row per rate |".to_owned(),
        "|---|---|---|---|---|---|---|".to_owned(),
    ];
    for (feed, m) in FEEDS.iter().zip(measured) {
        lines.push(row(&[
            feed.name.to_owned(),
            m.boards.to_string(),
            format!(
                "{}%",
                fixed(100.0 * m.stored_values as f64 / m.values.max(1) as f64, 1)
            ),
            fixed(m.per_board(m.stored), 0),
            fixed(m.per_board(m.full), 0),
            fixed(m.per_board(m.rows), 0),
            fixed(m.stored as f64 / m.rows.max(1) as f64, 2),
        ]));
    }
    lines.push(String::new());
    lines.push(
        "Targets (issue 62): a board that repeats its bank's previous values costs at most 1/5 \
         of one row per rate (last row: at most 0.20), and a feed whose every value changes \
         costs no more than every value on the row (first row: bytes per board within 5% of \
         the migration-12 copy)."
            .to_owned(),
    );
    lines.join("\n")
}
