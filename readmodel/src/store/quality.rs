//! The rows a quality report is made of, read in one snapshot of the model
//! as known at the report's end (live, or `asKnownAt`), then judged in
//! Rust ([`crate::quality`]: slots, spreads, the report and its score).
//!
//! Four statements for any number of banks: the banks' versions (their
//! schedules as they changed), the boards received in the window with
//! their rates, the retractions, and the boards in force over the window
//! (from the one in force at its start). Outliers are judged exactly as a
//! board's provenance shows them ([`outliers_at`]), but
//! only on the boards with a value that departs from the bank's value
//! before it: every outlier does, and few boards do.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use ratewire_proto::{BankId, Schedule};
use rust_decimal::Decimal;
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::outliers::{history_record, outliers_at};
use crate::error::Result;
use crate::quality::report::{Report, Tally};
use crate::quality::slots::{judge, Judged};
use crate::quality::spread::{breaches, Pair, Quote};
use crate::quality::References;
use crate::views::{Field, HistoryRecord};

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

/// One version of a bank, as the reports need it.
struct BankVersion {
    active: bool,
    schedule: Option<Schedule>,
    known_from: DateTime<Utc>,
}

/// A board in force: its as-of and rates.
type InForce = (DateTime<Utc>, Vec<HistoryRecord>);

/// A bank version's row: id, active, schedule, known from.
type VersionRow = (i64, bool, Option<Json<Schedule>>, DateTime<Utc>);

/// A board received in the window.
struct Received {
    event_id: Uuid,
    as_of: DateTime<Utc>,
    received: DateTime<Utc>,
    known_from: DateTime<Utc>,
    corrects: bool,
    /// Still in force at the report's end.
    open: bool,
    rates: Vec<HistoryRecord>,
}

/// The banks known at `asked.at` among `banks` (every bank when `None`),
/// with the last of their versions active or not.
pub async fn banks_known_at(
    db: &mut PgConnection,
    banks: Option<&[BankId]>,
    at: DateTime<Utc>,
) -> Result<Vec<(BankId, bool)>> {
    let ids: Option<Vec<i64>> = banks.map(|b| b.iter().map(|id| id.get()).collect());
    let rows: Vec<(i64, bool)> = sqlx::query_as(
        "SELECT DISTINCT ON (id) id, active FROM bank_versions
         WHERE ($1::bigint[] IS NULL OR id = ANY ($1)) AND known_from <= $2
         ORDER BY id, known_from DESC",
    )
    .bind(ids)
    .bind(at)
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|(id, active)| {
            // The fold only ever stores ids that came in a valid BankId.
            let id = BankId::new(id).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            Ok((id, active))
        })
        .collect()
}

/// The reports of `banks` (known at `asked.at`), in the order given. `db`
/// is a snapshot of the model as known at `asked.at`; `pool` is where the
/// outliers are judged, each as known when its board was published.
pub async fn quality_reports(
    db: &mut PgConnection,
    pool: &PgPool,
    banks: &[BankId],
    asked: ReportsAsked,
) -> Result<Vec<Report>> {
    let ids: Vec<i64> = banks.iter().map(|id| id.get()).collect();
    let (from, at) = (asked.from(), asked.at);
    let versions = bank_versions(db, &ids, at).await?;
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
    with_rates(db, &mut received, &in_force).await?;
    let mut reports = Vec::with_capacity(banks.len());
    for bank in banks {
        let versions = versions
            .get(&bank.get())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let boards = received.remove(&bank.get()).unwrap_or_default();
        let in_force = in_force
            .get(&bank.get())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let times: Vec<DateTime<Utc>> = {
            let mut times: Vec<_> = boards.iter().map(|b| b.received).collect();
            times.sort_unstable();
            times
        };
        let slots = judge_versions(versions, asked.zone, from, at, &times);
        // The board in force at the window's start, if any, is what the
        // first board received in it departs from.
        let before = in_force.first().filter(|(as_of, _)| *as_of < from);
        let (outliers, boards_with_outliers) =
            outliers(pool, *bank, &boards, before, asked).await?;
        let tally = Tally {
            boards: boards.len() as u64,
            corrections: boards.iter().filter(|b| b.corrects).count() as u64,
            retractions: retractions.get(&bank.get()).copied().unwrap_or(0) as u64,
            outliers,
            boards_with_outliers,
            last_board_at: in_force.last().map(|(as_of, _)| *as_of),
        };
        let quoted: Vec<(DateTime<Utc>, Vec<Quote>)> = in_force
            .iter()
            .map(|(as_of, rates)| (*as_of, rates.iter().flat_map(pairs).collect()))
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
            *bank,
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

/// Each bank's versions known at `at`, oldest first.
async fn bank_versions(
    db: &mut PgConnection,
    ids: &[i64],
    at: DateTime<Utc>,
) -> Result<HashMap<i64, Vec<BankVersion>>> {
    let rows: Vec<VersionRow> = sqlx::query_as(
        "SELECT id, active, schedule, known_from FROM bank_versions
         WHERE id = ANY ($1) AND known_from <= $2
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
/// became known (their rates still to come: [`with_rates`]).
async fn received(
    db: &mut PgConnection,
    ids: &[i64],
    from: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Result<HashMap<i64, Vec<Received>>> {
    let rows = sqlx::query(
        "SELECT b.bank_id, b.event_id, b.as_of, b.known_from,
                COALESCE(b.received_at, b.known_from) AS received,
                (b.known_to IS NULL OR b.known_to > $3) AS open,
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
                as_of: row.try_get("as_of")?,
                received: row.try_get("received")?,
                known_from: row.try_get("known_from")?,
                corrects: row.try_get("corrects")?,
                open: row.try_get("open")?,
                rates: Vec::new(),
            });
    }
    Ok(boards)
}

/// Gives each board received its rates as published: a board still in
/// force has them among the boards in force (read once for the breaches);
/// the others (revised since, or older than the window's boards in force)
/// are read by their event.
async fn with_rates(
    db: &mut PgConnection,
    received: &mut HashMap<i64, Vec<Received>>,
    in_force: &HashMap<i64, Vec<InForce>>,
) -> Result<()> {
    let mut missing = Vec::new();
    for (bank, boards) in received.iter_mut() {
        let forced = in_force.get(bank).map(Vec::as_slice).unwrap_or_default();
        for board in boards.iter_mut() {
            let found = forced
                .binary_search_by_key(&board.as_of, |(as_of, _)| *as_of)
                .ok()
                .filter(|_| board.open);
            match found {
                Some(i) => board.rates = forced[i].1.clone(),
                None => missing.push(board.event_id),
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
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
    .bind(&missing)
    .fetch_all(db)
    .await?;
    let mut read: HashMap<Uuid, Vec<HistoryRecord>> = HashMap::new();
    for row in &rows {
        let record = history_record(row, row.try_get("as_of")?)?;
        read.entry(row.try_get("event_id")?)
            .or_default()
            .push(record);
    }
    for board in received.values_mut().flatten() {
        if let Some(rates) = read.remove(&board.event_id) {
            board.rates = rates;
        }
    }
    Ok(())
}

/// Each bank's boards in force (in the snapshot's view of the model) from
/// the one in force at `from` to the last by `at`, in as-of order.
async fn in_force(
    db: &mut PgConnection,
    ids: &[i64],
    from: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Result<HashMap<i64, Vec<InForce>>> {
    let rows = sqlx::query(
        "SELECT k.bank_id, b.as_of, r.currency, r.cash_buying, r.cash_selling,
                r.transactional_buying, r.transactional_selling
         FROM UNNEST($1::bigint[]) AS k (bank_id)
         CROSS JOIN LATERAL (
             SELECT as_of, currencies FROM boards
             WHERE bank_id = k.bank_id AND as_of <= $3
               AND as_of >= COALESCE((SELECT max(p.as_of) FROM boards p
                                      WHERE p.bank_id = k.bank_id AND p.as_of < $2), $2)
         ) b
         LEFT JOIN LATERAL (
             SELECT * FROM rates r
             WHERE r.bank_id = k.bank_id AND r.currency = ANY (b.currencies) AND r.as_of = b.as_of
             OFFSET 0
         ) r ON true
         ORDER BY k.bank_id, b.as_of, r.currency",
    )
    .bind(ids)
    .bind(from)
    .bind(at)
    .fetch_all(db)
    .await?;
    let mut boards: HashMap<i64, Vec<InForce>> = HashMap::new();
    for row in &rows {
        let bank: i64 = row.try_get("bank_id")?;
        let as_of: DateTime<Utc> = row.try_get("as_of")?;
        let list = boards.entry(bank).or_default();
        if list.last().is_none_or(|(last, _)| *last != as_of) {
            list.push((as_of, Vec::new()));
        }
        if row.try_get::<Option<String>, _>("currency")?.is_some() {
            let board = list.last_mut().expect("pushed above");
            board.1.push(history_record(row, as_of)?);
        }
    }
    Ok(boards)
}

/// The outlying values of `boards` and the boards with any: each board
/// with a value that departs from the bank's value before it (on `before`,
/// then on each board in the order they became known), or that has none,
/// is judged exactly.
async fn outliers(
    pool: &PgPool,
    bank: BankId,
    boards: &[Received],
    before: Option<&InForce>,
    asked: ReportsAsked,
) -> Result<(u64, u64)> {
    let mut last: BTreeMap<(ratewire_proto::CurrencyCode, Field), Decimal> = BTreeMap::new();
    let remember = |rates: &[HistoryRecord], last: &mut BTreeMap<_, _>| {
        for rate in rates {
            for field in Field::ALL {
                if let Some(value) = field.of_record(rate) {
                    last.insert((rate.currency, field), value);
                }
            }
        }
    };
    if let Some((_, rates)) = before {
        remember(rates, &mut last);
    }
    let (mut values, mut flagged) = (0, 0);
    for board in boards {
        let departs = board.rates.iter().any(|rate| {
            Field::ALL.iter().any(|field| {
                field.of_record(rate).is_some_and(|value| {
                    let previous = last.get(&(rate.currency, *field)).copied();
                    previous.is_none()
                        || References::of(previous, &[]).flag(value, asked.outlier_percent)
                })
            })
        });
        if departs {
            let found = outliers_at(
                pool,
                bank,
                board.known_from,
                &board.rates,
                asked.outlier_percent,
            )
            .await?;
            values += found.len() as u64;
            flagged += u64::from(!found.is_empty());
        }
        remember(&board.rates, &mut last);
    }
    Ok((values, flagged))
}
