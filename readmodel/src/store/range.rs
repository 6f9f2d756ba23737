//! A bank's values of one currency over a range (every published board,
//! or the value in force at given instants), and the best value across
//! active banks at given instants: what /api/v1/rates/series reads.
//!
//! "In force at an instant" is /history's rule: the last record published
//! strictly before it. A bank is read in one range scan and carried
//! forward when it published a few records per instant or fewer, else
//! probed once per instant on the rates' key (see [`in_force_at`]): either
//! way a five-year daily series costs at most ~1,800 index steps per bank.

use std::cmp::Ordering;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use rust_decimal::Decimal;
use sqlx::{PgConnection, PgExecutor, PgPool, Row};

use crate::error::Result;
use crate::quality::{OutlierRule, Quoted};
use crate::views::{Field, HistoryRecord};

/// Records per instant up to which a bank is scanned rather than probed.
const SCAN_PER_INSTANT: usize = 2;

const RECORD_COLUMNS: &str =
    "as_of, cash_buying, cash_selling, transactional_buying, transactional_selling";

fn record(code: CurrencyCode, row: &sqlx::postgres::PgRow) -> Result<HistoryRecord> {
    Ok(HistoryRecord {
        currency: code,
        as_of: row.try_get("as_of")?,
        cash_buying: row.try_get("cash_buying")?,
        cash_selling: row.try_get("cash_selling")?,
        transactional_buying: row.try_get("transactional_buying")?,
        transactional_selling: row.try_get("transactional_selling")?,
    })
}

/// The first `limit` records of `bank` and `code` published in
/// `[from, to)`, oldest first.
pub async fn records_between<'e>(
    db: impl PgExecutor<'e>,
    bank: BankId,
    code: CurrencyCode,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: usize,
) -> Result<Vec<HistoryRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {RECORD_COLUMNS} FROM rates_of($2::bpchar)
         WHERE bank_id = $1 AND as_of >= $3 AND as_of < $4
         ORDER BY as_of LIMIT $5"
    ))
    .bind(bank.get())
    .bind(code.as_str())
    .bind(from)
    .bind(to)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(db)
    .await?;
    rows.iter().map(|row| record(code, row)).collect()
}

/// The record of `bank` and `code` in force at each of `instants` (`None`
/// before its first), in the order given.
pub async fn records_at(
    pool: &PgPool,
    bank: BankId,
    code: CurrencyCode,
    instants: &[DateTime<Utc>],
) -> Result<Vec<(DateTime<Utc>, Option<HistoryRecord>)>> {
    records_at_in(&mut *pool.acquire().await?, bank, code, instants).await
}

/// [`records_at`] on one connection (in a transaction's snapshot).
pub async fn records_at_in(
    db: &mut PgConnection,
    bank: BankId,
    code: CurrencyCode,
    instants: &[DateTime<Utc>],
) -> Result<Vec<(DateTime<Utc>, Option<HistoryRecord>)>> {
    let mut in_force = in_force_at(db, &[bank], code, instants).await?;
    let records = in_force
        .remove(&bank)
        .unwrap_or_else(|| vec![None; instants.len()]);
    Ok(instants
        .iter()
        .copied()
        .zip(records.into_iter().map(|r| r.map(|(record, _)| record)))
        .collect())
}

/// The best bank at an instant: the bank, its value and when it published
/// it.
pub type Best = Option<(BankId, Decimal, DateTime<Utc>)>;

/// The best value of `field` across the banks active now, for `code`, in
/// force at each of `instants`: the bank, its value and when it published
/// it (best-rates' rule: highest buying, lowest selling, ties to the
/// earlier record, then the lower bank id; the values `rule` flags as
/// outliers there and then, each against the bank's record before it and
/// the other banks' in force, left out). `None` where no bank had one.
pub async fn best_at(
    pool: &PgPool,
    code: CurrencyCode,
    field: Field,
    instants: &[DateTime<Utc>],
    rule: OutlierRule,
) -> Result<Vec<(DateTime<Utc>, Best)>> {
    best_at_in(&mut *pool.acquire().await?, code, field, instants, rule).await
}

/// [`best_at`] on one connection (in a transaction's snapshot).
pub async fn best_at_in(
    db: &mut PgConnection,
    code: CurrencyCode,
    field: Field,
    instants: &[DateTime<Utc>],
    rule: OutlierRule,
) -> Result<Vec<(DateTime<Utc>, Best)>> {
    let banks = super::banks::active_bank_ids(&mut *db).await?;
    let in_force = in_force_at(db, &banks, code, instants).await?;
    let columns: Vec<&Vec<InForce>> = banks.iter().filter_map(|b| in_force.get(b)).collect();
    let ids: Vec<BankId> = banks
        .iter()
        .copied()
        .filter(|b| in_force.contains_key(b))
        .collect();
    // Per instant, which banks' values the rule leaves out.
    let left_out: Vec<Vec<bool>> = (0..instants.len())
        .map(|i| {
            let market: Vec<Quoted> = columns
                .iter()
                .map(|records| match &records[i] {
                    Some((record, previous)) => Quoted {
                        value: field.of_record(record),
                        previous: previous.as_ref().and_then(|p| field.of_record(p)),
                    },
                    None => Quoted {
                        value: None,
                        previous: None,
                    },
                })
                .collect();
            rule.left_out(&market)
        })
        .collect();
    let mut best: Vec<Best> = vec![None; instants.len()];
    for (column, (bank, records)) in ids.iter().zip(&columns).enumerate() {
        for (i, (slot, record)) in best.iter_mut().zip(records.iter()).enumerate() {
            let Some((record, _)) = record else { continue };
            let Some(value) = field.of_record(record).filter(|_| !left_out[i][column]) else {
                continue;
            };
            let better = match &*slot {
                None => true,
                Some((_, held, held_at)) => {
                    let by_value = if field.higher_is_better() {
                        value.cmp(held)
                    } else {
                        held.cmp(&value)
                    };
                    // Banks are visited by id: an equal value and time keeps
                    // the lower id.
                    by_value.then_with(|| held_at.cmp(&record.as_of)) == Ordering::Greater
                }
            };
            if better {
                *slot = Some((*bank, value, record.as_of));
            }
        }
    }
    Ok(instants.iter().copied().zip(best).collect())
}

/// A bank's record in force at an instant, and the record before it.
type InForce = Option<(HistoryRecord, Option<HistoryRecord>)>;

/// Each bank's record of `code` in force at each of `instants`, with the
/// record before it (what an outlier is held against).
///
/// A bank that published no more than [`SCAN_PER_INSTANT`] records per
/// instant over the range is read in one index range scan and carried
/// forward here: a five-year daily series of a bank publishing daily is
/// one scan of ~1,800 rows rather than 1,800 probes. A busier bank is
/// probed once per instant instead, so no bank costs more than the probes
/// would, however often it published.
async fn in_force_at(
    db: &mut PgConnection,
    banks: &[BankId],
    code: CurrencyCode,
    instants: &[DateTime<Utc>],
) -> Result<HashMap<BankId, Vec<InForce>>> {
    let (Some(first), Some(last)) = (instants.first(), instants.last()) else {
        return Ok(HashMap::new());
    };
    let ids: Vec<i64> = banks.iter().map(|b| b.get()).collect();
    let mut found = HashMap::new();
    let mut busy = Vec::new();
    if instants.windows(2).all(|w| w[0] <= w[1]) {
        let most = instants.len() * SCAN_PER_INSTANT;
        // Per bank: the record in force at the first instant and the one
        // before it, then those published up to the last one (one more
        // than `most` tells a busy bank).
        let rows = sqlx::query(&format!(
            "SELECT b.bank_id, r.* FROM UNNEST($1::bigint[]) AS b (bank_id)
             CROSS JOIN LATERAL (
                 (SELECT {RECORD_COLUMNS} FROM rates_of($2::bpchar)
                  WHERE bank_id = b.bank_id AND as_of < $3
                  ORDER BY as_of DESC LIMIT 2)
                 UNION ALL
                 (SELECT {RECORD_COLUMNS} FROM rates_of($2::bpchar)
                  WHERE bank_id = b.bank_id
                    AND as_of >= $3 AND as_of < $4
                  ORDER BY as_of LIMIT $5)
             ) r"
        ))
        .bind(&ids)
        .bind(code.as_str())
        .bind(first)
        .bind(last)
        .bind(i64::try_from(most + 1).unwrap_or(i64::MAX))
        .fetch_all(&mut *db)
        .await?;
        let mut scanned: HashMap<i64, Vec<HistoryRecord>> = HashMap::new();
        for row in &rows {
            scanned
                .entry(row.try_get("bank_id")?)
                .or_default()
                .push(record(code, row)?);
        }
        for bank in banks {
            let mut records = scanned.remove(&bank.get()).unwrap_or_default();
            records.sort_by_key(|r| r.as_of);
            if records.iter().filter(|r| r.as_of >= *first).count() > most {
                busy.push(*bank);
                continue;
            }
            found.insert(*bank, carried_forward(&records, instants));
        }
    } else {
        busy.extend_from_slice(banks);
    }
    if !busy.is_empty() {
        found.extend(probed(db, &busy, code, instants).await?);
    }
    Ok(found)
}

/// The last of `records` (oldest first) before each instant (ascending),
/// and the one before it.
fn carried_forward(records: &[HistoryRecord], instants: &[DateTime<Utc>]) -> Vec<InForce> {
    let mut next = 0;
    instants
        .iter()
        .map(|at| {
            while next < records.len() && records[next].as_of < *at {
                next += 1;
            }
            let i = next.checked_sub(1)?;
            let before = i.checked_sub(1).map(|j| records[j].clone());
            Some((records[i].clone(), before))
        })
        .collect()
}

/// One index probe per bank and instant: the last record before it, and
/// the one before that.
async fn probed(
    db: &mut PgConnection,
    banks: &[BankId],
    code: CurrencyCode,
    instants: &[DateTime<Utc>],
) -> Result<HashMap<BankId, Vec<InForce>>> {
    let ids: Vec<i64> = banks.iter().map(|b| b.get()).collect();
    let rows = sqlx::query(&format!(
        "SELECT b.bank_id, t.n, r.* FROM UNNEST($1::bigint[]) AS b (bank_id)
         CROSS JOIN UNNEST($3::timestamptz[]) WITH ORDINALITY AS t (at, n)
         CROSS JOIN LATERAL (
             SELECT {RECORD_COLUMNS} FROM rates_of($2::bpchar)
             WHERE bank_id = b.bank_id AND as_of < t.at
             ORDER BY as_of DESC LIMIT 2
         ) r
         ORDER BY b.bank_id, t.n, r.as_of DESC"
    ))
    .bind(&ids)
    .bind(code.as_str())
    .bind(instants)
    .fetch_all(db)
    .await?;
    let mut found: HashMap<BankId, Vec<InForce>> = banks
        .iter()
        .map(|bank| (*bank, vec![None; instants.len()]))
        .collect();
    // Each instant's rows: the record in force, then the one before it.
    for row in &rows {
        let bank =
            BankId::new(row.try_get("bank_id")?).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        let n: i64 = row.try_get("n")?;
        if let (Some(records), Ok(i)) = (found.get_mut(&bank), usize::try_from(n - 1)) {
            if let Some(slot) = records.get_mut(i) {
                let read = record(code, row)?;
                match slot {
                    None => *slot = Some((read, None)),
                    Some((_, before)) => *before = Some(read),
                }
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(hour: u32) -> DateTime<Utc> {
        DateTime::from_timestamp(i64::from(hour) * 3600, 0).expect("a time")
    }

    fn published(hour: u32) -> HistoryRecord {
        HistoryRecord {
            currency: CurrencyCode::parse("USD").expect("a code"),
            as_of: at(hour),
            cash_buying: Decimal::from(hour),
            cash_selling: Decimal::from(hour),
            transactional_buying: None,
            transactional_selling: None,
        }
    }

    #[test]
    fn each_instant_shows_the_last_record_strictly_before_it_and_the_one_before() {
        let records = [published(1), published(3), published(4)];
        let shown: Vec<Option<(i64, Option<i64>)>> =
            carried_forward(&records, &[at(1), at(2), at(4), at(9)])
                .into_iter()
                .map(|r| {
                    r.map(|(r, before)| {
                        (
                            r.as_of.timestamp() / 3600,
                            before.map(|b| b.as_of.timestamp() / 3600),
                        )
                    })
                })
                .collect();
        assert_eq!(
            shown,
            [
                None,
                Some((1, None)),
                Some((3, Some(1))),
                Some((4, Some(3)))
            ]
        );
    }
}
