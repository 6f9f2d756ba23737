//! The revision log's and a board's rows. Each read is one statement, or
//! one snapshot (a board, its rates and its revisions): the fold closing a
//! version meanwhile cannot show half of it.
//!
//! A version's rates are found as migration 0008 keeps them: the rate rows
//! of its bank, currencies and as-of that carry its interval.

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, Source};
use rust_decimal::Decimal;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder, Row};
use uuid::Uuid;

use super::{Board, Kind, LogPosition, RevisionRow, Status};
use crate::error::Result;
use crate::store::{begin_snapshot, history_record, outliers_at};

/// Where a page of the log starts: after this revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub known_at: DateTime<Utc>,
    pub event_id: Uuid,
}

/// Which revisions to read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter {
    pub bank: Option<BankId>,
    /// Known at or after.
    pub from: Option<DateTime<Utc>>,
    /// Known before.
    pub to: Option<DateTime<Utc>>,
    pub after: Option<Cursor>,
    /// Only the revisions of this board.
    pub revised: Option<Uuid>,
}

/// A page of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub revisions: Vec<RevisionRow>,
    /// Where the next page starts, when there is more.
    pub next: Option<Cursor>,
}

/// The closed versions the filter selects, each with the rates it had
/// and, for a correction, the rates of the version that replaced it: one
/// row per rate, side 0 the closed version's, side 1 the replacing one's.
/// Between the head and the tail: the filter's conditions, its order and
/// limit.
const REVISIONS_HEAD: &str = "
WITH page AS (
    SELECT bv.closed_by, bv.event_id, bv.bank_id, bv.as_of, bv.currencies,
           bv.known_from, bv.known_to,
           rb.event_id IS NOT NULL AS retracted, rb.reason AS retraction_reason,
           nv.event_id IS NOT NULL AS corrected, nv.reason AS correction_reason,
           nv.currencies AS next_currencies, nv.known_from AS next_known_from,
           nv.known_to AS next_known_to
    FROM board_versions bv
    LEFT JOIN retracted_boards rb
           ON rb.event_id = bv.event_id AND rb.retracted_by = bv.closed_by
    LEFT JOIN LATERAL (
        SELECT n.event_id, n.reason, n.currencies, n.known_from, n.known_to
        FROM board_versions n
        WHERE n.event_id = bv.closed_by AND n.bank_id = bv.bank_id AND n.as_of = bv.as_of
        ORDER BY n.known_from LIMIT 1
    ) nv ON true
    WHERE bv.closed_by IS NOT NULL";

const REVISIONS_TAIL: &str = "
)
SELECT p.closed_by, p.event_id, p.bank_id, p.as_of, p.known_to,
       p.retracted, p.retraction_reason, p.corrected, p.correction_reason,
       r.side, r.currency::text AS currency, r.cash_buying, r.cash_selling,
       r.transactional_buying, r.transactional_selling
FROM page p
LEFT JOIN LATERAL (
    SELECT 0 AS side, x.currency, x.cash_buying, x.cash_selling,
           x.transactional_buying, x.transactional_selling
    FROM rate_versions x
    WHERE x.bank_id = p.bank_id AND x.currency = ANY (p.currencies) AND x.as_of = p.as_of
      AND x.known_from = p.known_from AND x.known_to IS NOT DISTINCT FROM p.known_to
    UNION ALL
    SELECT 1, x.currency, x.cash_buying, x.cash_selling,
           x.transactional_buying, x.transactional_selling
    FROM rate_versions x
    WHERE p.corrected
      AND x.bank_id = p.bank_id AND x.currency = ANY (p.next_currencies) AND x.as_of = p.as_of
      AND x.known_from = p.next_known_from AND x.known_to IS NOT DISTINCT FROM p.next_known_to
) r ON true
ORDER BY p.known_to, p.closed_by, p.event_id, r.side, r.currency";

/// Revisions the filter selects, oldest known first (ties by revising
/// event id), at most `most`.
pub async fn page<'e>(db: impl PgExecutor<'e>, filter: Filter, most: usize) -> Result<Page> {
    let mut revisions = read(db, filter, most.saturating_add(1)).await?;
    let mut next = None;
    if revisions.len() > most {
        let left_out = revisions[most].event_id;
        revisions.truncate(most);
        // A page never ends inside one event's revisions (the cursor is
        // the event): they all go to the next page, unless they fill this
        // one.
        while revisions.len() > 1 && revisions.last().map(|r| r.event_id) == Some(left_out) {
            revisions.pop();
        }
        next = revisions.last().map(|r| Cursor {
            known_at: r.known_at,
            event_id: r.event_id,
        });
    }
    Ok(Page { revisions, next })
}

async fn read<'e>(
    db: impl PgExecutor<'e>,
    filter: Filter,
    limit: usize,
) -> Result<Vec<RevisionRow>> {
    // Only the conditions the filter has, so that each kind of read
    // (the whole log, a bank's, a board's) is planned for itself.
    let mut sql = QueryBuilder::<Postgres>::new(REVISIONS_HEAD);
    if let Some(bank) = filter.bank {
        sql.push(" AND bv.bank_id = ").push_bind(bank.get());
    }
    if let Some(from) = filter.from {
        sql.push(" AND bv.known_to >= ").push_bind(from);
    }
    if let Some(to) = filter.to {
        sql.push(" AND bv.known_to < ").push_bind(to);
    }
    if let Some(after) = filter.after {
        sql.push(" AND (bv.known_to, bv.closed_by) > (")
            .push_bind(after.known_at)
            .push(", ")
            .push_bind(after.event_id)
            .push(")");
    }
    if let Some(revised) = filter.revised {
        sql.push(" AND bv.event_id = ").push_bind(revised);
    }
    sql.push(" ORDER BY bv.known_to, bv.closed_by, bv.event_id LIMIT ")
        .push_bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .push(REVISIONS_TAIL);
    let rows = sql.build().fetch_all(db).await?;
    let mut revisions: Vec<RevisionRow> = Vec::new();
    for row in &rows {
        let event_id: Uuid = row.try_get("closed_by")?;
        let revised: Uuid = row.try_get("event_id")?;
        let same = revisions
            .last()
            .is_some_and(|r| r.event_id == event_id && r.revised_event_id == revised);
        if !same {
            revisions.push(revision_from_row(row)?);
        }
        let revision = revisions.last_mut().expect("pushed above");
        if let Some(side) = row.try_get::<Option<i32>, _>("side")? {
            let rate = history_record(row, revision.as_of)?;
            match side {
                0 => revision.before.push(rate),
                _ => revision.after.push(rate),
            }
        }
    }
    Ok(revisions)
}

/// A revision's own columns, its rates still to come.
fn revision_from_row(row: &PgRow) -> Result<RevisionRow> {
    let (kind, reason) = if row.try_get("retracted")? {
        (Kind::Retraction, row.try_get("retraction_reason")?)
    } else {
        // A version closed by neither a retraction nor a board of its
        // bank and as-of is not something the fold writes; it reads as a
        // correction with nothing after it rather than not at all.
        (Kind::Correction, row.try_get("correction_reason")?)
    };
    Ok(RevisionRow {
        event_id: row.try_get("closed_by")?,
        kind,
        revised_event_id: row.try_get("event_id")?,
        bank_id: bank_id(row.try_get("bank_id")?)?,
        as_of: row.try_get("as_of")?,
        known_at: row.try_get("known_to")?,
        reason,
        before: Vec::new(),
        after: Vec::new(),
    })
}

fn bank_id(id: i64) -> Result<BankId> {
    // The fold only ever stores ids that came in a valid BankId.
    Ok(BankId::new(id).map_err(|e| sqlx::Error::Decode(Box::new(e)))?)
}

/// When the revision by `event_id` became known: where a page after it
/// starts. `None` when no revision has that id.
pub async fn cursor<'e>(db: impl PgExecutor<'e>, event_id: Uuid) -> Result<Option<Cursor>> {
    let known_at: Option<DateTime<Utc>> = sqlx::query_scalar(
        "SELECT known_to FROM board_versions WHERE closed_by = $1 ORDER BY known_to LIMIT 1",
    )
    .bind(event_id)
    .fetch_optional(db)
    .await?;
    Ok(known_at.map(|known_at| Cursor { known_at, event_id }))
}

/// Whether `bank` was ever registered (a deactivated bank's revisions stay
/// readable, as its history does).
pub async fn bank_known<'e>(db: impl PgExecutor<'e>, bank: BankId) -> Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM bank_versions WHERE id = $1)")
            .bind(bank.get())
            .fetch_one(db)
            .await?,
    )
}

/// A board's first version (as published), its provenance, and the as-of
/// of its bank's latest board in force; the topic is the one the fold
/// reads that partition of. Times of boards folded before migration 0008
/// are `-infinity`, read as none.
const BOARD: &str = "
SELECT b.event_id, b.bank_id, b.as_of, b.received_at,
       CASE WHEN isfinite(b.known_from) THEN b.known_from END AS known_at,
       b.log_partition, b.log_offset,
       (SELECT c.topic FROM consumer_offsets c WHERE c.partition = b.log_partition
        ORDER BY c.topic LIMIT 1) AS topic,
       b.source, b.reason, b.closed_by,
       (SELECT max(l.as_of) FROM board_versions l
        WHERE l.bank_id = b.bank_id AND l.known_to IS NULL) AS latest_in_force
FROM board_versions b
WHERE b.event_id = $1
ORDER BY b.known_from
LIMIT 1";

/// The rates of a board's first version.
const BOARD_RATES: &str = "
SELECT r.currency::text AS currency, r.cash_buying, r.cash_selling,
       r.transactional_buying, r.transactional_selling
FROM (SELECT * FROM board_versions WHERE event_id = $1 ORDER BY known_from LIMIT 1) b
JOIN rate_versions r
  ON r.bank_id = b.bank_id AND r.currency = ANY (b.currencies) AND r.as_of = b.as_of
 AND r.known_from = b.known_from AND r.known_to IS NOT DISTINCT FROM b.known_to
ORDER BY r.currency";

/// The board published by `event_id`, with its rates, provenance, status,
/// revisions and the values that were outliers at `percent` when it was
/// published; `None` when no board has that id.
pub async fn board(pool: &PgPool, event_id: Uuid, percent: Decimal) -> Result<Option<Board>> {
    let mut tx = begin_snapshot(pool).await?;
    let board = board_in(&mut tx, event_id).await?;
    tx.commit().await?;
    with_outliers(pool, board, percent).await
}

/// The board `bank` published at `as_of` (to the millisecond, as every
/// read shows times): the one in force for that as-of, else (retracted)
/// the last one published for it; `None` when there is none.
pub async fn board_at(
    pool: &PgPool,
    bank: BankId,
    as_of: DateTime<Utc>,
    percent: Decimal,
) -> Result<Option<Board>> {
    let mut tx = begin_snapshot(pool).await?;
    let versions: Vec<(Uuid, bool)> = sqlx::query_as(
        "SELECT event_id, known_to IS NULL AS open FROM board_versions
         WHERE bank_id = $1 AND as_of >= $2 AND as_of < $2 + interval '1 millisecond'
         ORDER BY known_from, as_of",
    )
    .bind(bank.get())
    .bind(as_of)
    .fetch_all(&mut *tx)
    .await?;
    let chosen = versions
        .iter()
        .rfind(|(_, open)| *open)
        .or(versions.last())
        .map(|(event_id, _)| *event_id);
    let board = match chosen {
        Some(event_id) => board_in(&mut tx, event_id).await?,
        None => None,
    };
    tx.commit().await?;
    with_outliers(pool, board, percent).await
}

/// `board` with the values that were outliers at `percent` as known when
/// it was published. A board folded before known-at times were kept has
/// nothing to be judged at.
async fn with_outliers(
    pool: &PgPool,
    board: Option<Board>,
    percent: Decimal,
) -> Result<Option<Board>> {
    let Some(mut board) = board else {
        return Ok(None);
    };
    if let Some(at) = board.known_at {
        board.outliers = outliers_at(pool, board.bank_id, at, &board.rates, percent).await?;
    }
    Ok(Some(board))
}

async fn board_in(db: &mut PgConnection, event_id: Uuid) -> Result<Option<Board>> {
    let Some(row) = sqlx::query(BOARD)
        .bind(event_id)
        .fetch_optional(&mut *db)
        .await?
    else {
        return Ok(None);
    };
    let as_of: DateTime<Utc> = row.try_get("as_of")?;
    let rates = sqlx::query(BOARD_RATES)
        .bind(event_id)
        .fetch_all(&mut *db)
        .await?
        .iter()
        .map(|r| history_record(r, as_of))
        .collect::<Result<Vec<_>>>()?;
    let filter = Filter {
        revised: Some(event_id),
        ..Filter::default()
    };
    // A board is revised once, or a few times if the log says so.
    let revisions: Vec<_> = read(&mut *db, filter, 1_000)
        .await?
        .into_iter()
        .map(RevisionRow::into_revision)
        .collect();
    let log = match (
        row.try_get::<Option<String>, _>("topic")?,
        row.try_get::<Option<i32>, _>("log_partition")?,
        row.try_get::<Option<i64>, _>("log_offset")?,
    ) {
        (Some(topic), Some(partition), Some(offset)) => Some(LogPosition {
            topic,
            partition,
            offset,
        }),
        _ => None,
    };
    let source: Option<Json<Source>> = row.try_get("source")?;
    let closed_by: Option<Uuid> = row.try_get("closed_by")?;
    let latest_in_force: Option<DateTime<Utc>> = row.try_get("latest_in_force")?;
    let later_in_force = latest_in_force.is_some_and(|latest| latest > as_of);
    let status = Status::of(closed_by, &revisions, later_in_force);
    Ok(Some(Board {
        event_id,
        bank_id: bank_id(row.try_get("bank_id")?)?,
        as_of,
        rates,
        received_at: row.try_get("received_at")?,
        known_at: row.try_get("known_at")?,
        log,
        source: source.map(|s| s.0),
        reason: row.try_get("reason")?,
        status,
        revisions,
        outliers: Vec::new(),
    }))
}
