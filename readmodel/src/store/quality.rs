//! The rows a quality report is made of, read in one snapshot of the model
//! as known at the report's end (live, or `asKnownAt`), then judged in
//! Rust ([`crate::quality`]: slots, spreads, the report and its score).
//!
//! Five statements for any number of banks, each one row per bank version,
//! board or retraction, never per rate: the banks' versions (their
//! schedules as they changed), the boards received in the window, the
//! retractions, and the boards in force over the window (from the one in
//! force at its start), each with its screen ([`Screen`]). Then the rates
//! of only the boards the screens let through: those whose spread may be
//! over the cap, and those with a value that may be an outlier, judged
//! exactly as a board's provenance shows them ([`outliers_at`]).

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use ratewire_proto::{BankId, Schedule};
use rust_decimal::Decimal;
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::known_at::{fold_positions, is_final, FoldPosition};
use super::outliers::{history_record, outliers_at};
use crate::error::Result;
use crate::quality::report::{Report, Tally};
use crate::quality::slots::{judge, Judged};
use crate::quality::spread::{breaches, Pair, Quote};
use crate::quality::Screen;
use crate::views::HistoryRecord;

/// What every report of one request shares.
#[derive(Debug, Clone, Copy)]
pub struct ReportsAsked {
    /// The window's length in days, and its end (now, or `asKnownAt`).
    pub days: u32,
    pub at: DateTime<Utc>,
    pub zone: Tz,
    pub spread_cap: Decimal,
    pub outlier_percent: Decimal,
}

impl ReportsAsked {
    fn from(&self) -> DateTime<Utc> {
        self.at - Duration::days(i64::from(self.days))
    }
}

/// The outlying values of boards judged final, by event and outlier
/// percent, kept across reports by their caller: a board's outliers are
/// judged as known when it was published, which no later event can change
/// once every partition's fold has passed that instant.
#[derive(Clone)]
pub struct JudgedBoards(moka::sync::Cache<(Uuid, Decimal), u64>);

impl Default for JudgedBoards {
    fn default() -> Self {
        // A few dozen bytes each.
        Self(moka::sync::Cache::new(200_000))
    }
}

/// Whose reports are asked for.
#[derive(Debug, Clone, Copy)]
pub enum ReportsOf {
    /// One bank's, active or not (none when it was not known then).
    Bank(BankId),
    /// Every bank's active at the window's end.
    Active,
}

/// One version of a bank, as the reports need it.
struct BankVersion {
    active: bool,
    schedule: Option<Schedule>,
    known_from: DateTime<Utc>,
}

/// A board in force: its as-of and the widest spread of its pairs.
struct BoardInForce {
    as_of: DateTime<Utc>,
    screen: Screen,
}

/// A bank version's row: id, active, schedule, known from.
type VersionRow = (i64, bool, Option<Json<Schedule>>, DateTime<Utc>);

/// A board received in the window.
struct Received {
    event_id: Uuid,
    received: DateTime<Utc>,
    known_from: DateTime<Utc>,
    corrects: bool,
    screen: Screen,
}

/// The banks active now, by id.
pub async fn active_banks(pool: &PgPool) -> Result<Vec<BankId>> {
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM banks WHERE active ORDER BY id")
        .fetch_all(pool)
        .await?;
    ids.into_iter()
        .map(|id| BankId::new(id).map_err(|e| sqlx::Error::Decode(Box::new(e)).into()))
        .collect()
}

/// The reports `of` asks for, as known at `asked.at`, by bank id. `db` is
/// a snapshot of the model as known at `asked.at`; `pool` is where the
/// outliers are judged, each as known when its board was published.
pub async fn quality_reports(
    db: &mut PgConnection,
    pool: &PgPool,
    of: ReportsOf,
    asked: ReportsAsked,
    kept: &JudgedBoards,
) -> Result<Vec<Report>> {
    let (from, at) = (asked.from(), asked.at);
    let one = match of {
        ReportsOf::Bank(bank) => Some(vec![bank.get()]),
        ReportsOf::Active => None,
    };
    let versions = bank_versions(db, one.as_deref(), at).await?;
    let mut ids: Vec<i64> = versions
        .iter()
        .filter(|(_, v)| one.is_some() || v.last().is_some_and(|v| v.active))
        .map(|(id, _)| *id)
        .collect();
    ids.sort_unstable();
    let mut received = received(db, &ids, from, at).await?;
    let retractions: HashMap<i64, i64> = sqlx::query_as(
        "SELECT bank_id, count(*) FROM retracted_boards
         WHERE bank_id = ANY ($1) AND known_at >= $2 AND known_at <= $3
         GROUP BY bank_id",
    )
    .bind(&ids)
    .bind(from)
    .bind(at)
    .fetch_all(&mut *db)
    .await?
    .into_iter()
    .collect();
    let in_force = in_force(db, &ids, from, at).await?;
    let wide = wide_rates(db, &in_force, asked.spread_cap).await?;
    let percent = asked.outlier_percent;
    let unjudged: Vec<Uuid> = received
        .values()
        .flatten()
        .filter(|b| b.screen.may_outlie(percent))
        .filter(|b| !kept.0.contains_key(&(b.event_id, percent)))
        .map(|b| b.event_id)
        .collect();
    let mut judged = Judging {
        rates: published_rates(db, &unjudged).await?,
        positions: match unjudged.is_empty() {
            true => Vec::new(),
            false => fold_positions(&mut *db).await?,
        },
        kept,
        percent,
    };
    let mut reports = Vec::with_capacity(ids.len());
    for id in ids {
        // Judging a bank is a few milliseconds of work without a wait:
        // between banks the other requests of this worker go first.
        tokio::task::yield_now().await;
        // The fold only ever stores ids that came in a valid BankId.
        let bank = BankId::new(id).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        let versions = versions.get(&id).map(Vec::as_slice).unwrap_or_default();
        let boards = received.remove(&id).unwrap_or_default();
        let in_force = in_force.get(&id).map(Vec::as_slice).unwrap_or_default();
        let times: Vec<DateTime<Utc>> = {
            let mut times: Vec<_> = boards.iter().map(|b| b.received).collect();
            times.sort_unstable();
            times
        };
        let slots = judge_versions(versions, asked.zone, from, at, &times);
        let (outliers, boards_with_outliers) = outliers(pool, bank, &boards, &mut judged).await?;
        let tally = Tally {
            boards: boards.len() as u64,
            corrections: boards.iter().filter(|b| b.corrects).count() as u64,
            retractions: retractions.get(&id).copied().unwrap_or(0) as u64,
            outliers,
            boards_with_outliers,
            last_board_at: in_force.last().map(|b| b.as_of),
        };
        // A board the screen clears has no pair over the cap: it closes
        // every breach open before it, as a board quoting none would.
        let quoted: Vec<(DateTime<Utc>, Vec<Quote>)> = in_force
            .iter()
            .map(|board| {
                let rates = wide.get(&(id, board.as_of)).map(Vec::as_slice);
                let quotes = rates.unwrap_or_default().iter().flat_map(pairs).collect();
                (board.as_of, quotes)
            })
            .collect();
        let found = breaches(
            quoted
                .iter()
                .map(|(as_of, quotes)| (*as_of, quotes.as_slice())),
            asked.spread_cap,
        )
        .into_iter()
        .filter(|b| b.to.is_none_or(|to| to > from))
        .collect();
        let schedule = versions.last().and_then(|v| v.schedule.clone());
        reports.push(Report::new(
            bank,
            asked.days,
            (from, at),
            schedule,
            slots,
            tally,
            found,
        ));
    }
    Ok(reports)
}

/// The pairs `rate` quotes: cash, and transactional when it has both values.
fn pairs(rate: &HistoryRecord) -> impl Iterator<Item = Quote> + '_ {
    let transactional = rate.transactional_buying.zip(rate.transactional_selling);
    [
        Some((Pair::Cash, (rate.cash_buying, rate.cash_selling))),
        transactional.map(|t| (Pair::Transactional, t)),
    ]
    .into_iter()
    .flatten()
    .map(|(pair, (buying, selling))| Quote {
        currency: rate.currency,
        pair,
        buying,
        selling,
    })
}

/// The versions known at `at` of each bank in `ids` (every bank when
/// `None`), oldest first.
async fn bank_versions(
    db: &mut PgConnection,
    ids: Option<&[i64]>,
    at: DateTime<Utc>,
) -> Result<HashMap<i64, Vec<BankVersion>>> {
    let rows: Vec<VersionRow> = sqlx::query_as(
        "SELECT id, active, schedule, known_from FROM bank_versions
         WHERE ($1::bigint[] IS NULL OR id = ANY ($1)) AND known_from <= $2
         ORDER BY id, known_from",
    )
    .bind(ids)
    .bind(at)
    .fetch_all(db)
    .await?;
    let mut versions: HashMap<i64, Vec<BankVersion>> = HashMap::new();
    for (id, active, schedule, known_from) in rows {
        versions.entry(id).or_default().push(BankVersion {
            active,
            schedule: schedule.map(|s| s.0),
            known_from,
        });
    }
    Ok(versions)
}

/// The slots of `[from, at)` judged against `received`, each stretch under
/// the schedule then in force for an active bank (consecutive versions
/// with the same schedule are one stretch, so that no slot is cut in two
/// by, say, a new name).
fn judge_versions(
    versions: &[BankVersion],
    zone: Tz,
    from: DateTime<Utc>,
    at: DateTime<Utc>,
    received: &[DateTime<Utc>],
) -> Judged {
    let mut stretches: Vec<(DateTime<Utc>, Option<&Schedule>)> = Vec::new();
    for version in versions {
        let schedule = version.schedule.as_ref().filter(|_| version.active);
        if stretches.last().is_none_or(|(_, last)| *last != schedule) {
            stretches.push((version.known_from, schedule));
        }
    }
    let mut judged = Judged::default();
    for (i, (start, schedule)) in stretches.iter().enumerate() {
        let end = stretches.get(i + 1).map_or(at, |(next, _)| *next).min(at);
        if let Some(schedule) = schedule {
            judged.add(judge(schedule, zone, (*start).max(from), end, received));
        }
    }
    judged
}

/// The boards received (known) in `[from, at]`, by bank, in the order they
/// became known.
async fn received(
    db: &mut PgConnection,
    ids: &[i64],
    from: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Result<HashMap<i64, Vec<Received>>> {
    let rows = sqlx::query(
        "SELECT b.bank_id, b.event_id, b.known_from, b.largest_move,
                COALESCE(b.received_at, b.known_from) AS received,
                c.corrects IS NOT NULL AS corrects
         FROM board_versions b
         LEFT JOIN LATERAL (
             -- A probe of the board's key (as EXISTS, one hash of every board).
             SELECT true AS corrects FROM board_versions o
             WHERE o.bank_id = b.bank_id AND o.as_of = b.as_of AND o.closed_by = b.event_id
             LIMIT 1
         ) c ON true
         WHERE b.bank_id = ANY ($1) AND b.known_from >= $2 AND b.known_from <= $3
         ORDER BY b.bank_id, b.known_from, b.event_id",
    )
    .bind(ids)
    .bind(from)
    .bind(at)
    .fetch_all(db)
    .await?;
    let mut boards: HashMap<i64, Vec<Received>> = HashMap::new();
    for row in &rows {
        boards
            .entry(row.try_get("bank_id")?)
            .or_default()
            .push(Received {
                event_id: row.try_get("event_id")?,
                received: row.try_get("received")?,
                known_from: row.try_get("known_from")?,
                corrects: row.try_get("corrects")?,
                screen: Screen {
                    widest_spread: None,
                    largest_move: row.try_get("largest_move")?,
                },
            });
    }
    Ok(boards)
}

/// Each bank's boards in force (in the snapshot's view of the model) from
/// the one in force at `from` to the last by `at`, in as-of order.
async fn in_force(
    db: &mut PgConnection,
    ids: &[i64],
    from: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Result<HashMap<i64, Vec<BoardInForce>>> {
    let rows: Vec<(i64, DateTime<Utc>, Option<Decimal>)> = sqlx::query_as(
        "SELECT k.bank_id, b.as_of, b.widest_spread
         FROM UNNEST($1::bigint[]) AS k (bank_id)
         CROSS JOIN LATERAL (
             SELECT as_of, widest_spread FROM boards
             WHERE bank_id = k.bank_id AND as_of <= $3
               AND as_of >= COALESCE((SELECT max(p.as_of) FROM boards p
                                      WHERE p.bank_id = k.bank_id AND p.as_of < $2), $2)
         ) b
         ORDER BY k.bank_id, b.as_of",
    )
    .bind(ids)
    .bind(from)
    .bind(at)
    .fetch_all(db)
    .await?;
    let mut boards: HashMap<i64, Vec<BoardInForce>> = HashMap::new();
    for (bank, as_of, widest_spread) in rows {
        boards.entry(bank).or_default().push(BoardInForce {
            as_of,
            screen: Screen {
                widest_spread,
                largest_move: None,
            },
        });
    }
    Ok(boards)
}

/// The rates of the boards in force whose screen says a spread may be over
/// `cap`, by bank and as-of.
async fn wide_rates(
    db: &mut PgConnection,
    in_force: &HashMap<i64, Vec<BoardInForce>>,
    cap: Decimal,
) -> Result<HashMap<(i64, DateTime<Utc>), Vec<HistoryRecord>>> {
    let (banks, times): (Vec<i64>, Vec<DateTime<Utc>>) = in_force
        .iter()
        .flat_map(|(bank, boards)| boards.iter().map(move |b| (*bank, b)))
        .filter(|(_, board)| board.screen.may_breach(cap))
        .map(|(bank, board)| (bank, board.as_of))
        .unzip();
    if banks.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query(
        "SELECT k.bank_id, k.as_of, r.currency, r.cash_buying, r.cash_selling,
                r.transactional_buying, r.transactional_selling
         FROM UNNEST($1::bigint[], $2::timestamptz[]) AS k (bank_id, as_of)
         JOIN boards b ON b.bank_id = k.bank_id AND b.as_of = k.as_of
         CROSS JOIN LATERAL (
             SELECT * FROM rates r
             WHERE r.bank_id = k.bank_id AND r.currency = ANY (b.currencies) AND r.as_of = k.as_of
             OFFSET 0
         ) r
         ORDER BY k.bank_id, k.as_of, r.currency",
    )
    .bind(&banks)
    .bind(&times)
    .fetch_all(db)
    .await?;
    let mut rates: HashMap<(i64, DateTime<Utc>), Vec<HistoryRecord>> = HashMap::new();
    for row in &rows {
        let key = (row.try_get("bank_id")?, row.try_get("as_of")?);
        rates
            .entry(key)
            .or_default()
            .push(history_record(row, key.1)?);
    }
    Ok(rates)
}

/// The rates of the boards published as `events`, as published.
async fn published_rates(
    db: &mut PgConnection,
    events: &[Uuid],
) -> Result<HashMap<Uuid, Vec<HistoryRecord>>> {
    if events.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query(
        "SELECT b.event_id, b.as_of, r.currency, r.cash_buying, r.cash_selling,
                r.transactional_buying, r.transactional_selling
         FROM board_versions b
         JOIN rate_versions r
           ON r.bank_id = b.bank_id AND r.currency = ANY (b.currencies) AND r.as_of = b.as_of
          AND r.known_from = b.known_from AND r.known_to IS NOT DISTINCT FROM b.known_to
         WHERE b.event_id = ANY ($1)
         ORDER BY b.event_id, r.currency",
    )
    .bind(events)
    .fetch_all(db)
    .await?;
    let mut read: HashMap<Uuid, Vec<HistoryRecord>> = HashMap::new();
    for row in &rows {
        let record = history_record(row, row.try_get("as_of")?)?;
        read.entry(row.try_get("event_id")?)
            .or_default()
            .push(record);
    }
    Ok(read)
}

/// What judging a request's boards for outliers needs: the rates of the
/// boards not judged before, the folds' positions (which judgements are
/// final, and kept), and those kept.
struct Judging<'a> {
    rates: HashMap<Uuid, Vec<HistoryRecord>>,
    positions: Vec<FoldPosition>,
    kept: &'a JudgedBoards,
    percent: Decimal,
}

/// The outlying values of `boards` and the boards with any: each board
/// whose screen says a value may be an outlier is judged exactly, as
/// known when it was published (or its judgement kept from before).
async fn outliers(
    pool: &PgPool,
    bank: BankId,
    boards: &[Received],
    judging: &mut Judging<'_>,
) -> Result<(u64, u64)> {
    let (mut values, mut flagged) = (0, 0);
    for board in boards
        .iter()
        .filter(|b| b.screen.may_outlie(judging.percent))
    {
        let key = (board.event_id, judging.percent);
        let found = match judging.kept.0.get(&key) {
            Some(found) => found,
            None => {
                let rates = judging.rates.remove(&board.event_id).unwrap_or_default();
                let found = outliers_at(pool, bank, board.known_from, &rates, judging.percent)
                    .await?
                    .len() as u64;
                if is_final(&judging.positions, board.known_from) {
                    judging.kept.0.insert(key, found);
                }
                found
            }
        };
        values += found;
        flagged += u64::from(found > 0);
    }
    Ok((values, flagged))
}
