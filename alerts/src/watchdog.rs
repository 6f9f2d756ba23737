//! Missed publications told to webhooks (`quality.publication_missed`):
//! a bank's slot (its schedule's, as quality reports count them:
//! `ratewire_readmodel::quality::slots`) that ended without a board.
//!
//! A slot is judged only once every partition's fold has passed its end
//! by [`GRACE`], so a board received in it can no longer be on its way;
//! a round runs in one transaction under a lock, so one projector at a
//! time judges. Each bank's [`Cursor`] says where judging stands and which
//! run of missed slots was told last: a run of consecutive missed slots is
//! told once, when its first slot is found, however long it lasts. An
//! event's id comes from its bank and the run's start, so no round can
//! record it twice. A bank is first judged from the round that finds it
//! active with a schedule: its past is the quality reports' to show.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use ratewire_proto::Schedule;
use ratewire_readmodel::quality::judge;
use ratewire_readmodel::store::fold_positions;
use sqlx::types::Json;
use sqlx::PgPool;

use crate::error::Result;
use crate::evaluation::{record_quality_events, store_quality_events, QualityEvent};
use crate::message::{BankRef, Body, PublicationMissed, PUBLICATION_MISSED};
use crate::schema::SLOT_WATCH_LOCK;

/// How long after every fold passed a slot's end it is judged: longer
/// than a push waits for the broker's acknowledgement, so a board
/// received before the end is on the log by then.
pub const GRACE: Duration = Duration::seconds(15);

/// Missed slots, consecutive ones as one span: `[from, to)`.
pub type Span = (DateTime<Utc>, DateTime<Utc>);

/// Where judging stands for one bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The end of the last slot judged.
    pub judged_until: DateTime<Utc>,
    /// The end of the last missed slot told (as part of its run).
    pub missed_until: Option<DateTime<Utc>>,
}

/// One bank's step up to `limit` (a round at `now`): `schedule` is `None`
/// for a bank that is not active or has none, which keeps no cursor
/// (judged again, it starts afresh, from the round that finds it). The
/// runs to tell, and the cursor after.
pub fn step(
    cursor: Option<Cursor>,
    schedule: Option<&Schedule>,
    zone: Tz,
    (limit, now): (DateTime<Utc>, DateTime<Utc>),
    received: &[DateTime<Utc>],
) -> (Option<Cursor>, Vec<Span>) {
    let Some(schedule) = schedule else {
        return (None, Vec::new());
    };
    let Some(mut cursor) = cursor else {
        let first = Cursor {
            judged_until: now.max(limit),
            missed_until: None,
        };
        return (Some(first), Vec::new());
    };
    let judged = judge(schedule, zone, cursor.judged_until, limit, received);
    let mut told = Vec::new();
    for (from, to) in judged.missed_spans {
        if cursor.missed_until != Some(from) {
            told.push((from, to));
        }
        cursor.missed_until = Some(to);
    }
    cursor.judged_until = judged.through.unwrap_or(cursor.judged_until);
    (Some(cursor), told)
}

/// The instant every partition's fold has passed (`None` before each has
/// folded or settled).
fn frontier(positions: &[ratewire_readmodel::store::FoldPosition]) -> Option<DateTime<Utc>> {
    positions
        .iter()
        .map(|p| p.known_at.max(p.settled_at))
        .min()
        .flatten()
}

/// A bank as the round reads it.
#[derive(sqlx::FromRow)]
struct Bank {
    id: i64,
    code: String,
    name: String,
    active: bool,
    schedule: Option<Json<Schedule>>,
}

/// One round over every bank, on `pool` (a read-model generation's, the
/// alerts' tables in `schema`); how many runs were told (0 when another
/// projector holds the round).
pub async fn round(pool: &PgPool, schema: &str, zone: Tz) -> Result<usize> {
    let mut tx = pool.begin().await?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(SLOT_WATCH_LOCK)
        .fetch_one(&mut *tx)
        .await?;
    if !locked {
        return Ok(0);
    }
    let positions = fold_positions(&mut *tx).await?;
    let Some(limit) = frontier(&positions).map(|at| at - GRACE) else {
        return Ok(0);
    };
    let now = Utc::now();
    let banks: Vec<Bank> =
        sqlx::query_as("SELECT id, code, name, active, schedule FROM banks ORDER BY id")
            .fetch_all(&mut *tx)
            .await?;
    let cursors: HashMap<i64, Cursor> =
        sqlx::query_as::<_, (i64, DateTime<Utc>, Option<DateTime<Utc>>)>(&format!(
            "SELECT bank_id, judged_until, missed_until FROM {schema}.slot_watch FOR UPDATE"
        ))
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(bank, judged_until, missed_until)| {
            (
                bank,
                Cursor {
                    judged_until,
                    missed_until,
                },
            )
        })
        .collect();
    let judged: Vec<&Bank> = banks
        .iter()
        .filter(|b| b.active && b.schedule.is_some())
        .filter(|b| cursors.get(&b.id).is_some_and(|c| c.judged_until < limit))
        .collect();
    let received = received(&mut tx, &judged, &cursors).await?;
    let (mut ids, mut judged_until, mut missed_until) = (Vec::new(), Vec::new(), Vec::new());
    let mut gone = Vec::new();
    let mut events = Vec::new();
    for bank in &banks {
        let schedule = bank.schedule.as_ref().map(|s| &s.0).filter(|_| bank.active);
        let times = received
            .get(&bank.id)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let cursor = cursors.get(&bank.id).copied();
        let (after, told) = step(cursor, schedule, zone, (limit, now), times);
        match after {
            Some(after) if Some(after) != cursor => {
                ids.push(bank.id);
                judged_until.push(after.judged_until);
                missed_until.push(after.missed_until);
            }
            None if cursor.is_some() => gone.push(bank.id),
            _ => {}
        }
        for (from, to) in told {
            events.push(missed(bank, schedule, from, to));
        }
    }
    sqlx::query(&format!(
        "INSERT INTO {schema}.slot_watch (bank_id, judged_until, missed_until)
         SELECT * FROM UNNEST($1::bigint[], $2::timestamptz[], $3::timestamptz[])
         ON CONFLICT (bank_id) DO UPDATE
         SET judged_until = EXCLUDED.judged_until, missed_until = EXCLUDED.missed_until"
    ))
    .bind(&ids)
    .bind(&judged_until)
    .bind(&missed_until)
    .execute(&mut *tx)
    .await?;
    sqlx::query(&format!(
        "DELETE FROM {schema}.slot_watch WHERE bank_id = ANY ($1)"
    ))
    .bind(&gone)
    .execute(&mut *tx)
    .await?;
    if !events.is_empty() {
        let statement = record_quality_events(schema);
        store_quality_events(&statement, &mut tx, &events).await?;
    }
    tx.commit().await?;
    metrics::counter!("ratewire_projector_publications_missed_total")
        .increment(events.len() as u64);
    Ok(events.len())
}

/// The times the judged banks' boards were received since their cursors,
/// by bank, in order.
async fn received(
    tx: &mut sqlx::PgConnection,
    banks: &[&Bank],
    cursors: &HashMap<i64, Cursor>,
) -> sqlx::Result<HashMap<i64, Vec<DateTime<Utc>>>> {
    let Some(since) = banks
        .iter()
        .filter_map(|b| cursors.get(&b.id))
        .map(|c| c.judged_until)
        .min()
    else {
        return Ok(HashMap::new());
    };
    let ids: Vec<i64> = banks.iter().map(|b| b.id).collect();
    // A board is known after it is received, so none received since the
    // cursor was known before it.
    let rows: Vec<(i64, DateTime<Utc>)> = sqlx::query_as(
        "SELECT bank_id, COALESCE(received_at, known_from) AS received FROM board_versions
         WHERE bank_id = ANY ($1) AND known_from >= $2
         ORDER BY 2",
    )
    .bind(&ids)
    .bind(since)
    .fetch_all(&mut *tx)
    .await?;
    let mut times: HashMap<i64, Vec<DateTime<Utc>>> = HashMap::new();
    for (bank, at) in rows {
        times.entry(bank).or_default().push(at);
    }
    Ok(times)
}

/// The event telling a run of `bank`'s missed slots found as `[from, to)`.
fn missed(
    bank: &Bank,
    schedule: Option<&Schedule>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> QualityEvent {
    let body = Body {
        kind: PUBLICATION_MISSED,
        timestamp: to,
        data: PublicationMissed {
            bank: BankRef {
                id: bank.id,
                name: bank.name.clone(),
                code: bank.code.clone(),
            },
            schedule: schedule.cloned().expect("told only under a schedule"),
            from,
            to,
        },
    };
    QualityEvent {
        id: format!("missed:{}:{}", bank.id, from.timestamp_millis()),
        kind: PUBLICATION_MISSED,
        body: body.to_json(),
        occurred_at: to,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewire_proto::Period;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn every_minute() -> Schedule {
        Schedule::Every(Period::parse("PT1M").unwrap())
    }

    #[test]
    fn a_bank_first_seen_is_judged_from_then_on() {
        let (cursor, told) = step(
            None,
            Some(&every_minute()),
            Tz::UTC,
            (at("2026-11-02T08:00:30Z"), at("2026-11-02T08:00:00Z")),
            &[],
        );
        assert!(told.is_empty());
        assert_eq!(cursor.unwrap().judged_until, at("2026-11-02T08:00:30Z"));
    }

    #[test]
    fn a_run_of_missed_slots_is_told_once_and_a_new_run_again() {
        let schedule = every_minute();
        let start = Cursor {
            judged_until: at("2026-11-02T08:00:30Z"),
            missed_until: None,
        };
        // 08:01–08:02 had a board; 08:02–08:03 did not.
        let received = [at("2026-11-02T08:01:10Z")];
        let (cursor, told) = step(
            Some(start),
            Some(&schedule),
            Tz::UTC,
            (at("2026-11-02T08:03:20Z"), at("2026-11-02T08:00:00Z")),
            &received,
        );
        assert_eq!(
            told,
            [(at("2026-11-02T08:02:00Z"), at("2026-11-02T08:03:00Z"))]
        );
        assert_eq!(cursor.unwrap().judged_until, at("2026-11-02T08:03:00Z"));
        // Still silent: the run goes on, told already.
        let (cursor, told) = step(
            cursor,
            Some(&schedule),
            Tz::UTC,
            (at("2026-11-02T08:05:00Z"), at("2026-11-02T08:00:00Z")),
            &received,
        );
        assert!(told.is_empty());
        assert_eq!(
            cursor.unwrap().missed_until,
            Some(at("2026-11-02T08:05:00Z"))
        );
        // A board, then silence again: a new run.
        let received = [at("2026-11-02T08:05:30Z")];
        let (_, told) = step(
            cursor,
            Some(&schedule),
            Tz::UTC,
            (at("2026-11-02T08:07:00Z"), at("2026-11-02T08:00:00Z")),
            &received,
        );
        assert_eq!(
            told,
            [(at("2026-11-02T08:06:00Z"), at("2026-11-02T08:07:00Z"))]
        );
    }

    #[test]
    fn a_bank_without_a_schedule_keeps_no_cursor() {
        let start = Cursor {
            judged_until: at("2026-11-02T08:00:00Z"),
            missed_until: None,
        };
        let (cursor, told) = step(
            Some(start),
            None,
            Tz::UTC,
            (at("2026-11-02T09:00:00Z"), at("2026-11-02T08:00:00Z")),
            &[],
        );
        assert!(told.is_empty());
        assert_eq!(cursor, None);
    }
}
