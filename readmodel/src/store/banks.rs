//! Banks and their current boards.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use ratewire_proto::BankId;
use sqlx::{PgConnection, PgExecutor, Row};

use super::{
    bank_from_row, rate_from_row, Version, BANK_COLUMNS, BANK_FIELDS, LATEST_AS_OF_LISTED,
    LATEST_AS_OF_PARAM, PREVIOUS_JOIN, RATE_COLUMNS, SNAPSHOT_VERSION,
};
use crate::error::Result;
use crate::views::{BankInfo, BankView, RateView};

/// One bank, active or not, with the time of its latest board.
pub async fn bank<'e>(
    db: impl PgExecutor<'e>,
    id: BankId,
) -> Result<Option<(BankInfo, Option<DateTime<Utc>>)>> {
    let row = sqlx::query(&format!(
        "SELECT {BANK_COLUMNS} FROM banks b WHERE b.id = $1"
    ))
    .bind(id.get())
    .fetch_optional(db)
    .await?;
    row.as_ref().map(bank_from_row).transpose()
}

/// Every bank id, active or not, in id order.
pub async fn bank_ids<'e>(db: impl PgExecutor<'e>) -> Result<Vec<BankId>> {
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM banks ORDER BY id")
        .fetch_all(db)
        .await?;
    Ok(ids
        .into_iter()
        .filter_map(|id| BankId::new(id).ok())
        .collect())
}

/// The bank's latest board, each currency with its previous value.
pub async fn latest_board<'e>(db: impl PgExecutor<'e>, id: BankId) -> Result<Vec<RateView>> {
    let rows = sqlx::query(&format!(
        "WITH latest AS (
             SELECT as_of, currencies FROM boards
             WHERE bank_id = $1 AND as_of = {LATEST_AS_OF_PARAM}
         )
         SELECT {RATE_COLUMNS}
         FROM latest l
         CROSS JOIN LATERAL (
             SELECT * FROM rates r
             WHERE r.bank_id = $1 AND r.currency = ANY (l.currencies) AND r.as_of = l.as_of
             OFFSET 0
         ) r
         {PREVIOUS_JOIN}
         ORDER BY r.currency"
    ))
    .bind(id.get())
    .fetch_all(db)
    .await?;
    rows.iter().map(rate_from_row).collect()
}

/// Everything a bank's views are made of; `None` for an unknown bank.
pub async fn bank_view<'e>(db: impl PgExecutor<'e>, id: BankId) -> Result<Option<BankView>> {
    Ok(bank_views(db, &[id])
        .await?
        .pop()
        .and_then(|(_, view)| view))
}

/// The views of `ids`, in the order given (`None` for an unknown bank):
/// two statements in one snapshot however many banks, so a batch that
/// touched fifty banks costs what one did.
pub async fn bank_views<'e>(
    db: impl PgExecutor<'e>,
    ids: &[BankId],
) -> Result<Vec<(BankId, Option<BankView>)>> {
    Ok(bank_views_at(db, ids).await?.1)
}

/// [`bank_views`], with the version of the snapshot they were read in.
///
/// One statement reads in one snapshot, so each board matches its bank row
/// and the version is that snapshot's: a transaction of its own (begin,
/// version, banks, boards, commit) was five round trips on the way of every
/// board to its views, each a wait on a busy machine.
pub async fn bank_views_at<'e>(
    db: impl PgExecutor<'e>,
    ids: &[BankId],
) -> Result<(Option<Version>, Vec<(BankId, Option<BankView>)>)> {
    if ids.is_empty() {
        return Ok((None, Vec::new()));
    }
    let raw: Vec<i64> = ids.iter().map(|id| id.get()).collect();
    // The snapshot's row stands alone when no bank is known.
    let rows = sqlx::query(&format!(
        "WITH snapshot AS MATERIALIZED ({SNAPSHOT_VERSION}),
         latest AS (
             SELECT w.bank_id, l.as_of, l.currencies
             FROM unnest($1::bigint[]) AS w(bank_id)
             LEFT JOIN LATERAL (SELECT as_of, currencies FROM boards
                                WHERE bank_id = w.bank_id
                                  AND as_of = {LATEST_AS_OF_LISTED}) l ON true
         )
         SELECT snapshot.*, v.*
         FROM snapshot
         LEFT JOIN LATERAL (
             SELECT {BANK_FIELDS}, l.as_of AS last_rates_updated_at, {RATE_COLUMNS}
             FROM latest l
             JOIN banks b ON b.id = l.bank_id
             LEFT JOIN LATERAL (
                 SELECT * FROM rates r
                 WHERE r.bank_id = l.bank_id AND r.currency = ANY (l.currencies)
                   AND r.as_of = l.as_of
                 OFFSET 0
             ) r ON true
             {PREVIOUS_JOIN}
         ) v ON true
         ORDER BY v.id, v.currency"
    ))
    .bind(&raw)
    .fetch_all(db)
    .await?;
    let version = match rows.first() {
        Some(row) => Version::from_row(row)?,
        None => return Ok((None, Vec::new())),
    };
    let mut banks: HashMap<i64, BankView> = HashMap::with_capacity(ids.len());
    for row in &rows {
        let Some(id) = row.try_get::<Option<i64>, _>("id")? else {
            continue;
        };
        let view = match banks.entry(id) {
            Entry::Occupied(held) => held.into_mut(),
            Entry::Vacant(new) => {
                let (bank, last_rates_updated_at) = bank_from_row(row)?;
                new.insert(BankView {
                    bank,
                    last_rates_updated_at,
                    rates: Vec::new(),
                })
            }
        };
        if row.try_get::<Option<String>, _>("currency")?.is_some() {
            view.rates.push(rate_from_row(row)?);
        }
    }
    let views = ids
        .iter()
        .map(|id| (*id, banks.remove(&id.get())))
        .collect();
    Ok((Some(version), views))
}

/// The ids of every active bank, in id order.
pub async fn active_bank_ids<'e>(db: impl PgExecutor<'e>) -> Result<Vec<BankId>> {
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM banks WHERE active ORDER BY id")
        .fetch_all(db)
        .await?;
    Ok(ids
        .into_iter()
        .filter_map(|id| BankId::new(id).ok())
        .collect())
}

/// Views of every active bank, in id order.
pub async fn active_bank_views(pool: &sqlx::PgPool) -> Result<Vec<BankView>> {
    active_bank_views_in(&mut *pool.acquire().await?).await
}

/// [`active_bank_views`] on one connection (in a transaction's snapshot).
pub async fn active_bank_views_in(db: &mut PgConnection) -> Result<Vec<BankView>> {
    let ids = active_bank_ids(&mut *db).await?;
    Ok(bank_views(&mut *db, &ids)
        .await?
        .into_iter()
        .filter_map(|(_, view)| view)
        .filter(|view| view.bank.active)
        .collect())
}
