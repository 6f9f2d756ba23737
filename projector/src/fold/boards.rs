//! The fast path for runs of consecutive `BoardPublished` events: a handful
//! of set-based statements for the whole run instead of several round trips
//! per event. It gives exactly the result of applying the events one by one
//! in log order (the fold's reference test and the e2e replay comparisons
//! hold it to that); anything unusual (an unknown bank, a retracted board, a
//! database error) makes the caller roll the batch back and apply it again
//! one event at a time, where dead-lettering happens.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, BoardPublished};
use rust_decimal::Decimal;
use sqlx::PgConnection;
use uuid::Uuid;

use super::event::{currencies_first_quoted, CLEAR_FOR_BOARDS};
use super::{BatchOutcome, Incoming};

/// One board event of a run, decoded (its envelope's fields and board).
pub struct RunEvent<'a> {
    pub event_id: Uuid,
    pub bank_id: BankId,
    pub occurred_at: DateTime<Utc>,
    pub board: &'a BoardPublished,
    pub message: &'a Incoming,
}

/// Why the fast path gave up (the caller then takes the slow one).
#[derive(Debug)]
pub enum Fallback {
    /// Something only the per-event path handles (it dead-letters).
    Unusual,
    Database(sqlx::Error),
}

impl From<sqlx::Error> for Fallback {
    fn from(e: sqlx::Error) -> Self {
        Fallback::Database(e)
    }
}

/// Applies the run; on `Err` the caller must roll back what it did.
pub async fn apply_run(
    db: &mut PgConnection,
    run: &[RunEvent<'_>],
    outcome: &mut BatchOutcome,
) -> Result<(), Fallback> {
    // Repeated event ids within the run: the first counts, as one by one.
    let mut seen = HashSet::new();
    let firsts: Vec<&RunEvent<'_>> = run.iter().filter(|e| seen.insert(e.event_id)).collect();
    let ids: Vec<Uuid> = firsts.iter().map(|e| e.event_id).collect();
    let partitions: Vec<i32> = firsts.iter().map(|e| e.message.partition).collect();
    let offsets: Vec<i64> = firsts.iter().map(|e| e.message.offset).collect();
    let banks: Vec<i64> = firsts
        .iter()
        .map(|e| e.bank_id.get())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    // One round trip for what the run needs to know: which ids are new, and
    // of those the ones retracted before they were applied (they stay
    // withdrawn: see migration 0005); whether every bank is known (else the
    // caller starts again one by one); each bank's latest as-of; and what
    // the banks quoted before, which may change its place in best rates.
    // The banks are those of the whole run, repeated events' too: one
    // statement, not a second round trip for the new ones' banks (a
    // repeated event's bank is known, and touching its currencies again
    // only recomputes them). Only index probes: each bank's latest board is
    // the first entry of its range of the boards' key, which holds what it
    // quoted.
    let RunFacts {
        fresh,
        retracted,
        known,
        latest_banks,
        latest_times,
        before,
    } = sqlx::query_as(
        r#"WITH new AS (
               INSERT INTO applied_events (event_id, partition, "offset")
               SELECT * FROM UNNEST($1::uuid[], $2::int[], $3::bigint[])
               ON CONFLICT DO NOTHING RETURNING event_id
           ),
           incoming AS (SELECT DISTINCT bank_id FROM UNNEST($4::bigint[]) AS i (bank_id)),
           latest AS MATERIALIZED (
               SELECT l.bank_id, l.as_of, l.currencies FROM incoming i
               CROSS JOIN LATERAL (SELECT bank_id, as_of, currencies FROM boards b
                                   WHERE b.bank_id = i.bank_id
                                   ORDER BY as_of DESC LIMIT 1) l
           )
           SELECT ARRAY(SELECT event_id FROM new) AS fresh,
                  EXISTS (SELECT 1 FROM new n JOIN retracted_boards r ON r.event_id = n.event_id) AS retracted,
                  (SELECT count(*) FROM incoming i WHERE EXISTS (SELECT 1 FROM banks WHERE id = i.bank_id)) AS known,
                  ARRAY(SELECT bank_id FROM latest) AS latest_banks,
                  ARRAY(SELECT as_of FROM latest) AS latest_times,
                  ARRAY(SELECT DISTINCT unnest(currencies)::text FROM latest) AS before"#,
    )
    .bind(&ids)
    .bind(&partitions)
    .bind(&offsets)
    .bind(&banks)
    .fetch_one(&mut *db)
    .await?;
    if retracted || known != banks.len() as i64 {
        return Err(Fallback::Unusual);
    }
    let new: HashSet<Uuid> = fresh.into_iter().collect();
    let events: Vec<&RunEvent<'_>> = firsts
        .into_iter()
        .filter(|e| new.contains(&e.event_id))
        .collect();
    outcome.skipped += run.len() - events.len();
    if events.is_empty() {
        return Ok(());
    }

    // A board re-published for the same as-of replaces the earlier one: the
    // last of the run wins, and any stored one goes.
    let mut kept: BTreeMap<(i64, DateTime<Utc>), &RunEvent<'_>> = BTreeMap::new();
    for event in &events {
        kept.insert((event.bank_id.get(), event.board.as_of()), event);
    }
    let board_banks: Vec<i64> = kept.keys().map(|(b, _)| *b).collect();
    let board_times: Vec<DateTime<Utc>> = kept.keys().map(|(_, t)| *t).collect();
    let board_ids: Vec<Uuid> = kept.values().map(|e| e.event_id).collect();
    // Each board's currencies, comma-joined (a run's boards may quote
    // different numbers of them, which an array of arrays cannot hold).
    let board_currencies: Vec<String> = kept
        .values()
        .map(|e| {
            e.board
                .rates()
                .iter()
                .map(|r| r.currency().to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();

    outcome.currencies.extend(
        before
            .iter()
            .filter_map(|c| c.parse::<ratewire_proto::CurrencyCode>().ok()),
    );

    // Boards at or before their bank's latest (a backfill, a re-published
    // as-of) replace or precede stored history; live boards, newer than
    // anything stored, need no room made.
    let latest: BTreeMap<i64, DateTime<Utc>> = latest_banks.into_iter().zip(latest_times).collect();
    let (rewrite_banks, rewrite_times): (Vec<i64>, Vec<DateTime<Utc>>) = kept
        .keys()
        .filter(|(bank, as_of)| latest.get(bank).is_some_and(|l| as_of <= l))
        .copied()
        .unzip();
    if !rewrite_banks.is_empty() {
        sqlx::query(&format!("{CLEAR_FOR_BOARDS} SELECT 1"))
            .bind(&rewrite_banks)
            .bind(&rewrite_times)
            .execute(&mut *db)
            .await?;
    }

    // A currency is first quoted by the earliest board that names it,
    // replaced or not (see `event::currencies_first_quoted`).
    let mut first_quoted: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
    for event in &events {
        let as_of = event.board.as_of();
        for rate in event.board.rates() {
            first_quoted
                .entry(rate.currency().to_string())
                .and_modify(|first| *first = (*first).min(as_of))
                .or_insert(as_of);
        }
    }
    let names: Vec<String> = first_quoted
        .keys()
        .map(|code| {
            code.parse::<ratewire_proto::CurrencyCode>()
                .map(|c| c.name())
                .unwrap_or_default()
        })
        .collect();
    let codes: Vec<String> = first_quoted.keys().cloned().collect();
    let firsts: Vec<DateTime<Utc>> = first_quoted.values().copied().collect();

    // In the order of the rates' primary key (bank, currency, as-of): a
    // bank's boards of a run then insert each currency's rows one after
    // another into the same index leaf, instead of visiting every currency's
    // leaf once per board.
    let mut ordered: Vec<(i64, ratewire_proto::CurrencyCode, DateTime<Utc>, &_)> = kept
        .iter()
        .flat_map(|((bank, as_of), event)| {
            event
                .board
                .rates()
                .iter()
                .map(move |rate| (*bank, rate.currency(), *as_of, rate))
        })
        .collect();
    ordered.sort_unstable_by_key(|(bank, currency, as_of, _)| (*bank, *currency, *as_of));
    let mut rows = RateRows::default();
    for (bank, currency, as_of, rate) in ordered {
        rows.bank.push(bank);
        rows.as_of.push(as_of);
        rows.currency.push(currency.to_string());
        rows.cash_buying.push(rate.cash_buying());
        rows.cash_selling.push(rate.cash_selling());
        rows.tx_buying.push(rate.transactional_buying());
        rows.tx_selling.push(rate.transactional_selling());
    }
    // The boards, new currencies and rates in one round trip.
    sqlx::query(&RUN_INSERT)
        .bind(&board_banks)
        .bind(&board_times)
        .bind(&board_ids)
        .bind(&board_currencies)
        .bind(&codes)
        .bind(&names)
        .bind(&firsts)
        .bind(&rows.bank)
        .bind(&rows.as_of)
        .bind(&rows.currency)
        .bind(&rows.cash_buying)
        .bind(&rows.cash_selling)
        .bind(&rows.tx_buying)
        .bind(&rows.tx_selling)
        .execute(&mut *db)
        .await?;

    for event in &events {
        outcome.applied += 1;
        outcome.banks.insert(event.bank_id);
        outcome.occurred.push(event.occurred_at);
        outcome
            .currencies
            .extend(event.board.rates().iter().map(|r| r.currency()));
    }
    Ok(())
}

/// What a run's first statement learns (see [`apply_run`]).
#[derive(sqlx::FromRow)]
struct RunFacts {
    /// The run's event ids not applied before.
    fresh: Vec<Uuid>,
    /// Whether any of those was retracted before it was applied.
    retracted: bool,
    /// How many of the run's banks are registered.
    known: i64,
    /// Each bank's latest stored board, as (bank, as-of) pairs.
    latest_banks: Vec<i64>,
    latest_times: Vec<DateTime<Utc>>,
    /// The currencies on those boards.
    before: Vec<String>,
}

/// The boards, their currencies and rates of a run, in one statement.
static RUN_INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH new_boards AS (
             INSERT INTO boards (bank_id, as_of, event_id, currencies)
             SELECT b, t, id, string_to_array(c, ',')::char(3)[]
             FROM UNNEST($1::bigint[], $2::timestamptz[], $3::uuid[], $4::text[]) AS n (b, t, id, c)
         ), new_currencies AS ({})
         INSERT INTO rates (bank_id, as_of, currency, cash_buying, cash_selling,
                            transactional_buying, transactional_selling)
         SELECT * FROM UNNEST($8::bigint[], $9::timestamptz[], $10::text[], $11::numeric[],
                              $12::numeric[], $13::numeric[], $14::numeric[])",
        currencies_first_quoted(5)
    )
});

#[derive(Default)]
struct RateRows {
    bank: Vec<i64>,
    as_of: Vec<DateTime<Utc>>,
    currency: Vec<String>,
    cash_buying: Vec<Decimal>,
    cash_selling: Vec<Decimal>,
    tx_buying: Vec<Option<Decimal>>,
    tx_selling: Vec<Option<Decimal>>,
}
