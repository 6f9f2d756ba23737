//! A run of the core's changes written to Postgres as versions, in sets:
//! the stored rows the run revises are closed first (one statement, only
//! when a bank changes or a board or reference day is replaced or
//! withdrawn), then every new version goes in one statement. Nothing is
//! deleted or changed but a closed row's end (readmodel migration 0008).

use std::sync::LazyLock;

use chrono::{DateTime, NaiveDate, Utc};
use ratewire_readmodel::board_months::{self, Month};
use rust_decimal::Decimal;
use sqlx::types::Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::columns::{BankColumns, RetractionColumns};
use super::core::{Net, Stamp};
use super::model::Quote;

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// The months of the raw history could not be held or made.
    #[error(transparent)]
    Months(#[from] ratewire_readmodel::Error),
    /// This many of the events were applied meanwhile by another fold.
    #[error("{0} of the batch's events were applied meanwhile by another fold")]
    Raced(usize),
}

impl From<WriteError> for crate::error::Error {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Database(e) => crate::error::Error::Postgres(e),
            WriteError::Months(e) => e.into(),
            WriteError::Raced(n) => crate::error::Error::AppliedMeanwhile(n),
        }
    }
}

/// Writes `net` in the transaction `db`.
pub async fn write(db: &mut PgConnection, net: &Net) -> Result<(), WriteError> {
    if net.is_empty() {
        return Ok(());
    }
    let times: Vec<DateTime<Utc>> = net.boards.iter().map(|v| v.row.as_of).collect();
    board_months::hold(db, &times).await?;
    close(db, net).await?;
    insert(db, net).await?;
    keep_bases(db, net).await?;
    Ok(())
}

/// Copies into `board_bases` each base the run's boards are stored
/// against that is not there yet (once per bank and month): readers find
/// a base there by its id (readmodel migration 0014). A base is in its
/// board's month, so the probe reads one month.
async fn keep_bases(db: &mut PgConnection, net: &Net) -> sqlx::Result<()> {
    let mut bases = std::collections::BTreeMap::new();
    for version in &net.boards {
        if let Some(base) = version.row.stored.base() {
            bases.insert(base, Month::of(version.row.as_of));
        }
    }
    if bases.is_empty() {
        return Ok(());
    }
    let (ids, months): (Vec<Uuid>, Vec<Month>) = bases.into_iter().unzip();
    let starts: Vec<DateTime<Utc>> = months.iter().map(|m| m.starts()).collect();
    let ends: Vec<DateTime<Utc>> = months.iter().map(|m| m.ends()).collect();
    sqlx::query(
        "INSERT INTO board_bases (event_id, as_of, currencies, cash_buying, cash_selling,
                                  transactional_buying, transactional_selling)
         SELECT x.event_id, x.as_of, x.currencies, x.cash_buying, x.cash_selling,
                x.transactional_buying, x.transactional_selling
         FROM UNNEST($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS k (id, starts, ends)
         CROSS JOIN LATERAL (SELECT * FROM board_versions x
                             WHERE x.event_id = k.id AND x.as_of >= k.starts
                               AND x.as_of < k.ends AND x.base_id IS NULL
                             LIMIT 1) x
         WHERE NOT EXISTS (SELECT 1 FROM board_bases b WHERE b.event_id = k.id)
         ON CONFLICT (event_id) DO NOTHING",
    )
    .bind(&ids)
    .bind(&starts)
    .bind(&ends)
    .execute(db)
    .await?;
    Ok(())
}

/// Closes the stored versions `net` revises: banks changed, boards (their
/// rates are part of them) replaced or withdrawn, reference days (with theirs)
/// published again, and each bank's latest board moved on. Only the parts
/// with something to close are sent: a live board closes one row of
/// `bank_latest_versions`, and a statement of every part cost more to
/// plan than to run.
async fn close(db: &mut PgConnection, net: &Net) -> sqlx::Result<()> {
    let (banks, bank_ends): (Vec<i64>, Vec<DateTime<Utc>>) =
        net.closed_banks.iter().map(|(b, t)| (b.get(), *t)).unzip();
    let mut boards = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((bank, as_of), stamp) in &net.closed_boards {
        boards.0.push(bank.get());
        boards.1.push(*as_of);
        boards.2.push(stamp.known_at);
        boards.3.push(stamp.event_id);
    }
    let mut days = (Vec::new(), Vec::new(), Vec::new());
    for ((source, date), end) in &net.closed_days {
        days.0.push(source.clone());
        days.1.push(*date);
        days.2.push(*end);
    }
    let (latest, latest_ends): (Vec<i64>, Vec<DateTime<Utc>>) =
        net.closed_latest.iter().map(|(b, t)| (b.get(), *t)).unzip();
    let parts: Vec<Close> = [
        (!banks.is_empty(), Close::Banks),
        (!latest.is_empty(), Close::Latest),
        (!boards.0.is_empty(), Close::Boards),
        (!days.0.is_empty(), Close::Days),
    ]
    .into_iter()
    .filter_map(|(any, part)| any.then_some(part))
    .collect();
    let Some(sql) = close_statement(&parts) else {
        return Ok(());
    };
    // Bound in the parts' order, as the statement numbers them.
    let mut query = sqlx::query(&sql);
    for part in &parts {
        query = match part {
            Close::Banks => query.bind(&banks).bind(&bank_ends),
            Close::Latest => query.bind(&latest).bind(&latest_ends),
            Close::Boards => query
                .bind(&boards.0)
                .bind(&boards.1)
                .bind(&boards.2)
                .bind(&boards.3),
            Close::Days => query.bind(&days.0).bind(&days.1).bind(&days.2),
        };
    }
    query.execute(db).await?;
    Ok(())
}

/// What a run may close, each a part of [`close_statement`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    Banks,
    Latest,
    Boards,
    Days,
}

/// The statement closing `parts`, their parameters numbered in that order;
/// `None` when there are none. Each open version is found by a probe of
/// its key and closed by row address (a join against the unnested keys
/// became a scan of every row once Postgres stopped planning each
/// execution of the prepared statement; OFFSET 0 keeps the probes from
/// becoming a join).
/// A board's row address is only unique within its month's
/// partition, so a board is matched by its as-of too.
fn close_statement(parts: &[Close]) -> Option<String> {
    let mut next = 0;
    let mut param = || {
        next += 1;
        next
    };
    let ctes: Vec<String> = parts
        .iter()
        .map(|part| match part {
            Close::Banks => format!(
                "bank_rows AS (
                    SELECT b.ctid AS row, k.known_to
                    FROM UNNEST(${}::bigint[], ${}::timestamptz[]) AS k (id, known_to)
                    CROSS JOIN LATERAL (SELECT ctid FROM bank_versions b
                                        WHERE b.id = k.id AND b.known_to IS NULL OFFSET 0) b
                ), old_banks AS (
                    UPDATE bank_versions t SET known_to = r.known_to
                    FROM bank_rows r WHERE t.ctid = r.row
                )",
                param(),
                param()
            ),
            Close::Latest => format!(
                "latest_rows AS (
                    SELECT l.ctid AS row, k.known_to
                    FROM UNNEST(${}::bigint[], ${}::timestamptz[]) AS k (bank_id, known_to)
                    CROSS JOIN LATERAL (SELECT ctid FROM bank_latest_versions l
                                        WHERE l.bank_id = k.bank_id AND l.known_to IS NULL
                                        ORDER BY known_from DESC LIMIT 1) l
                ), old_latest AS (
                    UPDATE bank_latest_versions t SET known_to = r.known_to
                    FROM latest_rows r WHERE t.ctid = r.row
                )",
                param(),
                param()
            ),
            Close::Boards => format!(
                "board_rows AS (
                    SELECT b.ctid AS row, k.as_of, k.known_to, k.closed_by
                    FROM UNNEST(${}::bigint[], ${}::timestamptz[], ${}::timestamptz[], ${}::uuid[])
                         AS k (bank_id, as_of, known_to, closed_by)
                    CROSS JOIN LATERAL (SELECT ctid FROM board_versions b
                                        WHERE b.bank_id = k.bank_id AND b.as_of = k.as_of
                                          AND b.known_to IS NULL OFFSET 0) b
                ), old_boards AS (
                    UPDATE board_versions t SET known_to = r.known_to, closed_by = r.closed_by
                    FROM board_rows r WHERE t.as_of = r.as_of AND t.ctid = r.row
                )",
                param(),
                param(),
                param(),
                param()
            ),
            Close::Days => format!(
                "day_rows AS (
                    SELECT d.ctid AS row, k.known_to
                    FROM UNNEST(${}::text[], ${}::date[], ${}::timestamptz[]) AS k (source, date, known_to)
                    CROSS JOIN LATERAL (SELECT ctid FROM reference_board_versions d
                                        WHERE d.source = k.source AND d.date = k.date
                                          AND d.known_to IS NULL OFFSET 0) d
                ), old_days AS (
                    UPDATE reference_board_versions t SET known_to = r.known_to
                    FROM day_rows r WHERE t.ctid = r.row
                    RETURNING t.source, t.date, t.known_to
                ), day_rate_rows AS (
                    SELECT r.ctid AS row, o.known_to FROM old_days o
                    CROSS JOIN LATERAL (SELECT ctid FROM reference_rate_versions r
                                        WHERE r.source = o.source AND r.date = o.date
                                          AND r.known_to IS NULL OFFSET 0) r
                ), old_day_rates AS (
                    UPDATE reference_rate_versions t SET known_to = r.known_to
                    FROM day_rate_rows r WHERE t.ctid = r.row
                )",
                param(),
                param(),
                param()
            ),
        })
        .collect();
    // Data-modifying parts of a WITH run to completion whether read or not.
    (!ctes.is_empty()).then(|| format!("WITH {} SELECT 1", ctes.join(", ")))
}

/// Values comma-joined as they print (decimals exactly), an absent one as
/// nothing (read back as NULL): one text per board, since boards quote
/// different numbers of currencies, which an array of arrays cannot hold.
fn joined<T: std::fmt::Display>(values: impl Iterator<Item = Option<T>>) -> String {
    use std::fmt::Write;
    let mut text = String::new();
    for (i, value) in values.enumerate() {
        if i > 0 {
            text.push(',');
        }
        if let Some(value) = value {
            let _ = write!(text, "{value}");
        }
    }
    text
}

/// The end of a version the run closed itself, and what closed it.
fn ends(closed: Option<Stamp>) -> (Option<DateTime<Utc>>, Option<Uuid>) {
    closed.map_or((None, None), |s| (Some(s.known_at), Some(s.event_id)))
}

/// Inserts every version `net` makes, in one statement.
async fn insert(db: &mut PgConnection, net: &Net) -> Result<(), WriteError> {
    let mut rows = Rows::default();
    for (id, at) in &net.applied {
        rows.applied_ids.push(*id);
        rows.applied_partitions.push(at.partition);
        rows.applied_offsets.push(at.offset);
    }
    for version in &net.banks {
        let (id, bank) = &version.row;
        rows.banks.push(*id, bank);
        rows.bank_from.push(version.known_from);
        rows.bank_to.push(ends(version.closed).0);
    }
    rows.rewritten = net.rewritten.iter().map(|b| b.get()).collect();
    for version in &net.latest {
        let (bank, as_of) = version.row;
        rows.latest_banks.push(bank.get());
        rows.latest_times.push(as_of);
        rows.latest_from.push(version.known_from);
        rows.latest_to.push(ends(version.closed).0);
    }
    for version in &net.boards {
        let row = &version.row;
        let (known_to, closed_by) = ends(version.closed);
        rows.board_banks.push(row.bank.get());
        rows.board_times.push(row.as_of);
        rows.board_ids.push(row.board.event_id);
        rows.board_currencies
            .push(joined(row.board.currencies().map(Some)));
        rows.board_from.push(version.known_from);
        rows.board_to.push(known_to);
        rows.board_closed_by.push(closed_by);
        rows.board_received.push(row.published.received_at);
        rows.board_partitions.push(row.published.at.partition);
        rows.board_offsets.push(row.published.at.offset);
        rows.board_sources
            .push(row.published.source.clone().map(Json));
        rows.board_reasons.push(row.published.reason.clone());
        rows.board_widest.push(row.screen.widest_spread);
        rows.board_moves.push(row.screen.largest_move);
        // Each field's values in the board's currencies' order (slices of
        // one long array would cost Postgres a walk from its start for
        // every board); a value read from the base is left out.
        rows.board_bases.push(row.stored.base());
        let stored: Vec<Option<&Quote>> = row
            .board
            .quotes
            .iter()
            .map(|q| (!row.stored.repeats(q.currency)).then_some(q))
            .collect();
        let field =
            |value: fn(&Quote) -> Option<Decimal>| joined(stored.iter().map(|q| q.and_then(value)));
        rows.cash_buying.push(field(|q| Some(q.cash_buying)));
        rows.cash_selling.push(field(|q| Some(q.cash_selling)));
        rows.transactional_buying
            .push(field(|q| q.transactional_buying));
        rows.transactional_selling
            .push(field(|q| q.transactional_selling));
    }
    for (code, (first, known_from)) in &net.first_quoted {
        rows.currency_codes.push(code.as_str().to_owned());
        rows.currency_names.push(code.name());
        rows.currency_firsts.push(*first);
        rows.currency_known.push(*known_from);
    }
    for (board, (retraction, known_at)) in &net.retracted {
        rows.retracted.push(*board, retraction);
        rows.retracted_known.push(*known_at);
    }
    for version in &net.reference {
        let ((source, date), day) = &version.row;
        let known_to = ends(version.closed).0;
        rows.day_sources.push(source.clone());
        rows.day_dates.push(*date);
        rows.day_ids.push(day.event_id);
        rows.day_published.push(day.published_at);
        rows.day_from.push(version.known_from);
        rows.day_to.push(known_to);
        for quote in &day.quotes {
            rows.reference_sources.push(source.clone());
            rows.reference_dates.push(*date);
            rows.reference_currencies
                .push(quote.currency.as_str().to_owned());
            rows.reference_buying.push(quote.buying);
            rows.reference_selling.push(quote.selling);
            rows.reference_averages.push(quote.weighted_average);
            rows.reference_from.push(version.known_from);
            rows.reference_to.push(known_to);
        }
    }
    let inserted: i64 = sqlx::query_scalar(&INSERT)
        .bind(&rows.applied_ids)
        .bind(&rows.applied_partitions)
        .bind(&rows.applied_offsets)
        .bind(&rows.banks.bank_ids)
        .bind(&rows.banks.bank_codes)
        .bind(&rows.banks.bank_names)
        .bind(&rows.banks.bank_images)
        .bind(&rows.banks.bank_links)
        .bind(&rows.banks.bank_active)
        .bind(&rows.banks.bank_registered)
        .bind(&rows.banks.bank_updated)
        .bind(&rows.bank_from)
        .bind(&rows.bank_to)
        .bind(&rows.rewritten)
        .bind(&rows.board_banks)
        .bind(&rows.board_times)
        .bind(&rows.board_ids)
        .bind(&rows.board_currencies)
        .bind(&rows.board_from)
        .bind(&rows.board_to)
        .bind(&rows.board_closed_by)
        .bind(&rows.board_received)
        .bind(&rows.board_partitions)
        .bind(&rows.board_offsets)
        .bind(&rows.board_sources)
        .bind(&rows.board_reasons)
        .bind(&rows.currency_codes)
        .bind(&rows.currency_names)
        .bind(&rows.currency_firsts)
        .bind(&rows.currency_known)
        .bind(&rows.cash_buying)
        .bind(&rows.cash_selling)
        .bind(&rows.transactional_buying)
        .bind(&rows.transactional_selling)
        .bind(&rows.retracted.retracted_ids)
        .bind(&rows.retracted.retracted_banks)
        .bind(&rows.retracted.retracted_by)
        .bind(&rows.retracted.retracted_reasons)
        .bind(&rows.retracted.retracted_at)
        .bind(&rows.retracted_known)
        .bind(&rows.day_sources)
        .bind(&rows.day_dates)
        .bind(&rows.day_ids)
        .bind(&rows.day_published)
        .bind(&rows.day_from)
        .bind(&rows.day_to)
        .bind(&rows.reference_sources)
        .bind(&rows.reference_dates)
        .bind(&rows.reference_currencies)
        .bind(&rows.reference_buying)
        .bind(&rows.reference_selling)
        .bind(&rows.reference_averages)
        .bind(&rows.reference_from)
        .bind(&rows.reference_to)
        .bind(&rows.latest_banks)
        .bind(&rows.latest_times)
        .bind(&rows.latest_from)
        .bind(&rows.latest_to)
        .bind(&rows.banks.bank_schedules)
        .bind(&rows.board_widest)
        .bind(&rows.board_moves)
        .bind(&rows.board_bases)
        .fetch_one(db)
        .await?;
    let expected = rows.applied_ids.len();
    if (inserted as usize) < expected {
        return Err(WriteError::Raced(expected - inserted as usize));
    }
    Ok(())
}

/// The rows of [`insert`], as columns.
#[derive(Default)]
struct Rows {
    applied_ids: Vec<Uuid>,
    applied_partitions: Vec<i32>,
    applied_offsets: Vec<i64>,
    banks: BankColumns,
    bank_from: Vec<DateTime<Utc>>,
    bank_to: Vec<Option<DateTime<Utc>>>,
    rewritten: Vec<i64>,
    board_banks: Vec<i64>,
    board_times: Vec<DateTime<Utc>>,
    board_ids: Vec<Uuid>,
    board_currencies: Vec<String>,
    board_from: Vec<DateTime<Utc>>,
    board_to: Vec<Option<DateTime<Utc>>>,
    board_closed_by: Vec<Option<Uuid>>,
    board_received: Vec<DateTime<Utc>>,
    board_partitions: Vec<i32>,
    board_offsets: Vec<i64>,
    board_sources: Vec<Option<Json<ratewire_proto::Source>>>,
    board_reasons: Vec<Option<String>>,
    board_widest: Vec<Option<Decimal>>,
    board_moves: Vec<Option<Decimal>>,
    board_bases: Vec<Option<Uuid>>,
    currency_codes: Vec<String>,
    currency_names: Vec<String>,
    currency_firsts: Vec<DateTime<Utc>>,
    currency_known: Vec<DateTime<Utc>>,
    cash_buying: Vec<String>,
    cash_selling: Vec<String>,
    transactional_buying: Vec<String>,
    transactional_selling: Vec<String>,
    retracted: RetractionColumns,
    retracted_known: Vec<DateTime<Utc>>,
    day_sources: Vec<String>,
    day_dates: Vec<NaiveDate>,
    day_ids: Vec<Uuid>,
    day_published: Vec<DateTime<Utc>>,
    day_from: Vec<DateTime<Utc>>,
    day_to: Vec<Option<DateTime<Utc>>>,
    reference_sources: Vec<String>,
    reference_dates: Vec<NaiveDate>,
    reference_currencies: Vec<String>,
    reference_buying: Vec<Decimal>,
    reference_selling: Vec<Decimal>,
    reference_averages: Vec<Decimal>,
    reference_from: Vec<DateTime<Utc>>,
    reference_to: Vec<Option<DateTime<Utc>>>,
    latest_banks: Vec<i64>,
    latest_times: Vec<Option<DateTime<Utc>>>,
    latest_from: Vec<DateTime<Utc>>,
    latest_to: Vec<Option<DateTime<Utc>>>,
}

/// Versions are inserted whole (their rows as the core made them, with
/// their known-from and, when the run closed them itself, known-to), and
/// banks' history revisions move when their history was rewritten. A
/// currency already known from an earlier board (and as early) is left
/// out before the insert, so that folds of other partitions side by side
/// never wait on each other's rows here; the earliest first quote and
/// known-at time win whichever commits first.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    "WITH applied AS (
         INSERT INTO applied_events (event_id, partition, \"offset\")
         SELECT * FROM UNNEST($1::uuid[], $2::int[], $3::bigint[])
         ON CONFLICT DO NOTHING RETURNING 1
     ), bank AS (
         INSERT INTO bank_versions (id, code, name, image_url, social_links, active,
                                    registered_at, updated_at, known_from, known_to, schedule)
         SELECT * FROM UNNEST($4::bigint[], $5::text[], $6::text[], $7::text[], $8::jsonb[],
                              $9::bool[], $10::timestamptz[], $11::timestamptz[],
                              $12::timestamptz[], $13::timestamptz[], $59::jsonb[])
     ), rewritten AS (
         INSERT INTO bank_history_revs (bank_id, history_rev)
         SELECT b, 1 FROM UNNEST($14::bigint[]) AS b
         ON CONFLICT (bank_id) DO UPDATE SET history_rev = bank_history_revs.history_rev + 1
     ), board AS (
         INSERT INTO board_versions (bank_id, as_of, event_id, currencies, known_from, known_to,
                                     closed_by, received_at, log_partition, log_offset, source,
                                     reason, widest_spread, largest_move, cash_buying,
                                     cash_selling, transactional_buying, transactional_selling,
                                     base_id)
         SELECT b, t, id, string_to_array(c, ',')::char(3)[], f, k, cb, rc, p, o, s, r, w, m,
                string_to_array(v1, ',', '')::numeric[], string_to_array(v2, ',', '')::numeric[],
                string_to_array(v3, ',', '')::numeric[], string_to_array(v4, ',', '')::numeric[],
                base
         FROM UNNEST($15::bigint[], $16::timestamptz[], $17::uuid[], $18::text[],
                     $19::timestamptz[], $20::timestamptz[], $21::uuid[], $22::timestamptz[],
                     $23::int[], $24::bigint[], $25::jsonb[], $26::text[], $60::numeric[],
                     $61::numeric[], $31::text[], $32::text[], $33::text[], $34::text[],
                     $62::uuid[])
              AS n (b, t, id, c, f, k, cb, rc, p, o, s, r, w, m, v1, v2, v3, v4, base)
     ), currency AS (
         INSERT INTO currencies_known (code, name, first_quoted_at, known_from)
         SELECT c.code, c.name, c.first, c.known
         FROM UNNEST($27::text[], $28::text[], $29::timestamptz[], $30::timestamptz[])
              AS c (code, name, first, known)
         WHERE NOT EXISTS (SELECT 1 FROM currencies_known k
                           WHERE k.code = c.code::char(3) AND k.first_quoted_at <= c.first
                             AND k.known_from <= c.known)
         ON CONFLICT (code) DO UPDATE
         SET first_quoted_at = LEAST(currencies_known.first_quoted_at, EXCLUDED.first_quoted_at),
             known_from = LEAST(currencies_known.known_from, EXCLUDED.known_from)
     ), retracted AS (
         INSERT INTO retracted_boards (event_id, bank_id, retracted_by, reason, retracted_at,
                                       known_at)
         SELECT * FROM UNNEST($35::uuid[], $36::bigint[], $37::uuid[], $38::text[],
                              $39::timestamptz[], $40::timestamptz[])
         ON CONFLICT (event_id) DO NOTHING
     ), day AS (
         INSERT INTO reference_board_versions (source, date, event_id, published_at, known_from,
                                               known_to)
         SELECT * FROM UNNEST($41::text[], $42::date[], $43::uuid[], $44::timestamptz[],
                              $45::timestamptz[], $46::timestamptz[])
     ), reference AS (
         INSERT INTO reference_rate_versions (source, date, currency, buying, selling,
                                              weighted_average, known_from, known_to)
         SELECT * FROM UNNEST($47::text[], $48::date[], $49::text[], $50::numeric[],
                              $51::numeric[], $52::numeric[], $53::timestamptz[],
                              $54::timestamptz[])
     ), latest AS (
         INSERT INTO bank_latest_versions (bank_id, as_of, known_from, known_to)
         SELECT * FROM UNNEST($55::bigint[], $56::timestamptz[], $57::timestamptz[],
                              $58::timestamptz[])
     )
     SELECT count(*) FROM applied"
        .to_owned()
});
