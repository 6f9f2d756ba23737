//! Alerts evaluated in the fold's transaction, so that a crossing is
//! recorded (its outbox row) exactly when its board is applied: a crash
//! keeps both or neither.
//!
//! Each log position is evaluated once, whatever folds it: the alerts
//! schema's `positions` hold, per partition, the first offset nobody has
//! evaluated. A fold locks its partitions' rows, evaluates the messages at
//! or past them, and moves them on; a replay into a new generation (which
//! folds the log again from offset zero) finds its old messages evaluated
//! and skips them, and the messages it reaches first it evaluates like a
//! live fold. Outbox ids come from the alert and the event, so even a
//! second evaluation could not send a crossing twice.
//!
//! Values are compared in the alerts schema's `quotes`: each bank's
//! latest board, copied from the generation after each evaluated event of
//! that bank. A bank's rows depend only on its own events (one partition,
//! in order), so any generation copies the same values; the best rate
//! across banks is taken there rather than from a generation whose other
//! partitions may be behind (a replay's).
//!
//! An alert holds whether its condition held after the last board
//! evaluated (`satisfied`, NULL until known). A board that makes it true
//! while it was not fires once; one that makes it false re-arms it.
//! Evaluation is per event when any alert exists (two boards of a bank in
//! one batch may cross and cross back), so such batches take the fold's
//! one-by-one path; without alerts only the quotes are kept, once per
//! batch. A transaction-wide lock serialises evaluation across lanes and
//! projectors: the best rate moves with every bank's board.

use std::collections::{BTreeMap, BTreeSet};

use ratewire_proto::{Envelope, Event};
use sqlx::PgConnection;

use super::Incoming;

/// The fold's alert statements for one alerts schema.
#[derive(Debug, Clone)]
pub struct AlertsFold {
    schema: String,
    sql: Statements,
}

#[derive(Debug, Clone)]
struct Statements {
    peek: String,
    lock: String,
    seed_positions: String,
    seed_quotes: String,
    refresh: String,
    evaluate: String,
    advance: String,
}

/// The lock key evaluations take (`pg_advisory_xact_lock`): "rwalerts".
const EVALUATION_LOCK: i64 = 0x7277_616c_6572_7473;

impl AlertsFold {
    /// `schema` is a checked identifier (settings) holding the alerts'
    /// tables, migrated.
    pub fn new(schema: &str) -> Self {
        let s = schema;
        let fields = "(VALUES ('cashBuying', q.cash_buying, TRUE), ('cashSelling', q.cash_selling, FALSE),
                              ('transactionalBuying', q.transactional_buying, TRUE),
                              ('transactionalSelling', q.transactional_selling, FALSE)) AS f (field, value, higher)";
        let millis = |at: &str| {
            format!(r#"to_char({at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"#)
        };
        Self {
            schema: schema.to_owned(),
            sql: Statements {
                peek: format!(
                    "SELECT partition, next_offset FROM {s}.positions WHERE topic = $1 AND partition = ANY ($2)"
                ),
                lock: format!(
                    "SELECT partition, next_offset, EXISTS (SELECT 1 FROM {s}.alerts) AS any_alert
                     FROM {s}.positions WHERE topic = $1 AND partition = ANY ($2)
                     ORDER BY partition FOR UPDATE"
                ),
                // A partition first seen: evaluation starts where this
                // generation is.
                seed_positions: format!(
                    "INSERT INTO {s}.positions (topic, partition, next_offset)
                     SELECT $1, p, n FROM UNNEST($2::int[], $3::bigint[]) AS t (p, n)
                     ON CONFLICT DO NOTHING"
                ),
                // ...and the quotes start from what it holds.
                seed_quotes: format!(
                    "WITH banks_in AS (
                         INSERT INTO {s}.quote_banks (bank_id, code, name, active)
                         SELECT id, code, name, active FROM banks ON CONFLICT DO NOTHING)
                     INSERT INTO {s}.quotes (bank_id, currency, cash_buying, cash_selling,
                                             transactional_buying, transactional_selling, updated_at)
                     SELECT r.bank_id, r.currency::text, r.cash_buying, r.cash_selling,
                            r.transactional_buying, r.transactional_selling, r.as_of
                     FROM banks k
                     CROSS JOIN LATERAL (SELECT as_of, currencies FROM boards
                                         WHERE bank_id = k.id ORDER BY as_of DESC LIMIT 1) b
                     JOIN rates r ON r.bank_id = k.id AND r.as_of = b.as_of AND r.currency = ANY (b.currencies)
                     ON CONFLICT DO NOTHING"
                ),
                // Copies the banks' ($1) latest boards and details; returns
                // every currency they quoted before or quote now.
                refresh: format!(
                    "WITH latest AS (
                         SELECT r.bank_id, r.currency::text AS currency, r.cash_buying, r.cash_selling,
                                r.transactional_buying, r.transactional_selling, r.as_of
                         FROM UNNEST($1::bigint[]) AS k (id)
                         CROSS JOIN LATERAL (SELECT as_of, currencies FROM boards
                                             WHERE bank_id = k.id ORDER BY as_of DESC LIMIT 1) b
                         JOIN rates r ON r.bank_id = k.id AND r.as_of = b.as_of AND r.currency = ANY (b.currencies)
                     ), gone AS (
                         DELETE FROM {s}.quotes q WHERE q.bank_id = ANY ($1)
                           AND (q.bank_id, q.currency) NOT IN (SELECT bank_id, currency FROM latest)
                         RETURNING q.currency
                     ), put AS (
                         INSERT INTO {s}.quotes (bank_id, currency, cash_buying, cash_selling,
                                                 transactional_buying, transactional_selling, updated_at)
                         SELECT * FROM latest
                         ON CONFLICT (bank_id, currency) DO UPDATE SET
                             cash_buying = EXCLUDED.cash_buying, cash_selling = EXCLUDED.cash_selling,
                             transactional_buying = EXCLUDED.transactional_buying,
                             transactional_selling = EXCLUDED.transactional_selling,
                             updated_at = EXCLUDED.updated_at
                     ), details AS (
                         INSERT INTO {s}.quote_banks (bank_id, code, name, active)
                         SELECT id, code, name, active FROM banks WHERE id = ANY ($1)
                         ON CONFLICT (bank_id) DO UPDATE SET code = EXCLUDED.code,
                             name = EXCLUDED.name, active = EXCLUDED.active
                     )
                     SELECT currency FROM latest UNION SELECT currency FROM gone"
                ),
                // The alerts on the bank ($1) or on the best rate of the
                // currencies ($2), judged on the quotes after event $3
                // (occurred at $4); the crossings go to the outbox.
                evaluate: format!(
                    "WITH best AS (
                         SELECT DISTINCT ON (q.currency, f.field) q.currency, f.field, f.value,
                                q.bank_id, q.updated_at
                         FROM {s}.quotes q
                         JOIN {s}.quote_banks b ON b.bank_id = q.bank_id AND b.active
                         CROSS JOIN LATERAL {fields}
                         WHERE q.currency = ANY ($2) AND f.value IS NOT NULL
                         ORDER BY q.currency, f.field,
                                  CASE WHEN f.higher THEN f.value END DESC,
                                  CASE WHEN NOT f.higher THEN f.value END ASC,
                                  q.updated_at, q.bank_id
                     ), own AS (
                         SELECT q.currency, f.field, f.value, q.bank_id, q.updated_at
                         FROM {s}.quotes q CROSS JOIN LATERAL {fields}
                         WHERE q.bank_id = $1 AND q.currency = ANY ($2)
                     ), judged AS (
                         SELECT a.id, a.owner, a.webhook_id, a.currency, a.field, a.condition,
                                a.threshold, a.satisfied AS was, a.last_value,
                                v.value, v.bank_id, v.updated_at,
                                CASE WHEN v.value IS NULL THEN NULL
                                     WHEN a.condition = 'above' THEN v.value > a.threshold
                                     ELSE v.value < a.threshold END AS now
                         FROM {s}.alerts a
                         LEFT JOIN best x ON a.bank_id IS NULL AND x.currency = a.currency AND x.field = a.field
                         LEFT JOIN own o ON a.bank_id = $1 AND o.currency = a.currency AND o.field = a.field
                         CROSS JOIN LATERAL (SELECT COALESCE(x.value, o.value) AS value,
                                                    COALESCE(x.bank_id, o.bank_id) AS bank_id,
                                                    COALESCE(x.updated_at, o.updated_at) AS updated_at) v
                         WHERE a.currency = ANY ($2) AND (a.bank_id IS NULL OR a.bank_id = $1)
                     ), crossings AS (
                         SELECT j.* FROM judged j
                         JOIN {s}.webhooks w ON w.id = j.webhook_id AND w.disabled_at IS NULL
                         WHERE COALESCE(j.now, FALSE) AND j.was IS DISTINCT FROM TRUE
                     ), changed AS (
                         UPDATE {s}.alerts a SET satisfied = j.now, last_value = j.value,
                             fired = a.fired + (j.id IN (SELECT id FROM crossings))::int,
                             last_fired_at = CASE WHEN j.id IN (SELECT id FROM crossings) THEN $4
                                                  ELSE a.last_fired_at END
                         FROM judged j
                         WHERE a.id = j.id
                           AND (a.satisfied IS DISTINCT FROM j.now OR a.last_value IS DISTINCT FROM j.value)
                     ), fired AS (
                         INSERT INTO {s}.deliveries (id, webhook_id, alert_id, owner, type, body)
                         SELECT 'msg_' || left(encode(sha256(convert_to(c.id::text || ':' || $3::text, 'UTF8')), 'hex'), 32),
                                c.webhook_id, c.id, c.owner, 'rate.threshold_crossed',
                                json_build_object(
                                    'type', 'rate.threshold_crossed',
                                    'timestamp', {occurred},
                                    'data', json_build_object(
                                        'alertId', c.id,
                                        'bank', json_build_object('id', c.bank_id, 'name', b.name, 'code', b.code),
                                        'currencyCode', c.currency,
                                        'field', c.field,
                                        'condition', c.condition,
                                        'threshold', c.threshold,
                                        'previous', c.last_value,
                                        'current', c.value,
                                        'updatedAt', {updated},
                                        'eventId', $3))::text
                         FROM crossings c JOIN {s}.quote_banks b ON b.bank_id = c.bank_id
                         ON CONFLICT (id) DO NOTHING
                         RETURNING 1
                     )
                     SELECT count(*) FROM fired",
                    occurred = millis("$4"),
                    updated = millis("c.updated_at"),
                ),
                advance: format!(
                    "UPDATE {s}.positions p SET next_offset = GREATEST(p.next_offset, n.next_offset)
                     FROM UNNEST($2::int[], $3::bigint[]) AS n (partition, next_offset)
                     WHERE p.topic = $1 AND p.partition = n.partition"
                ),
            },
        }
    }

    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// What this batch must evaluate, with the partitions' rows locked;
    /// `None` when every message was evaluated before (a replay behind the
    /// live fold: nothing is locked). `positions` are the generation's
    /// stored next offsets of the batch's partitions.
    pub(super) async fn guard(
        &self,
        db: &mut PgConnection,
        topic: &str,
        batch: &[Incoming],
        positions: &BTreeMap<i32, i64>,
    ) -> sqlx::Result<Option<Guard>> {
        let partitions: Vec<i32> = positions.keys().copied().collect();
        // Positions only grow: a message below one read without a lock
        // was evaluated for certain.
        let peeked: BTreeMap<i32, i64> = sqlx::query_as(&self.sql.peek)
            .bind(topic)
            .bind(&partitions)
            .fetch_all(&mut *db)
            .await?
            .into_iter()
            .collect();
        let pending = batch.iter().any(|m| {
            peeked
                .get(&m.partition)
                .is_none_or(|from| m.offset >= *from)
        });
        if !pending {
            return Ok(None);
        }
        let mut rows: Vec<(i32, i64, bool)> = sqlx::query_as(&self.sql.lock)
            .bind(topic)
            .bind(&partitions)
            .fetch_all(&mut *db)
            .await?;
        if rows.len() < partitions.len() {
            let starts: Vec<i64> = partitions.iter().map(|p| positions[p]).collect();
            sqlx::query(&self.sql.seed_positions)
                .bind(topic)
                .bind(&partitions)
                .bind(&starts)
                .execute(&mut *db)
                .await?;
            sqlx::query(&self.sql.seed_quotes).execute(&mut *db).await?;
            rows = sqlx::query_as(&self.sql.lock)
                .bind(topic)
                .bind(&partitions)
                .fetch_all(&mut *db)
                .await?;
        }
        let any_alert = rows.iter().any(|(_, _, any)| *any);
        Ok(Some(Guard {
            from: rows.into_iter().map(|(p, n, _)| (p, n)).collect(),
            per_event: any_alert,
            locked: false,
            banks: BTreeSet::new(),
            fired: 0,
        }))
    }

    /// Evaluates one applied event (when the guard asks for it per event)
    /// or notes its bank for [`AlertsFold::finish`].
    pub(super) async fn applied(
        &self,
        db: &mut PgConnection,
        guard: &mut Guard,
        message: &Incoming,
        envelope: &Envelope,
    ) -> sqlx::Result<()> {
        if !guard.covers(message) || !moves_quotes(&envelope.event) {
            return Ok(());
        }
        let bank = envelope.bank_id.get();
        if !guard.per_event {
            guard.banks.insert(bank);
            return Ok(());
        }
        if !guard.locked {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(EVALUATION_LOCK)
                .execute(&mut *db)
                .await?;
            guard.locked = true;
        }
        let currencies: Vec<String> = sqlx::query_scalar(&self.sql.refresh)
            .bind([bank])
            .fetch_all(&mut *db)
            .await?;
        if currencies.is_empty() {
            return Ok(());
        }
        let fired: i64 = sqlx::query_scalar(&self.sql.evaluate)
            .bind(bank)
            .bind(&currencies)
            .bind(envelope.event_id)
            .bind(envelope.occurred_at)
            .fetch_one(&mut *db)
            .await?;
        guard.fired += fired as u64;
        Ok(())
    }

    /// Notes the batch's events applied set-based (no alert exists, so
    /// only their banks' quotes are kept).
    pub(super) fn applied_run<'a>(
        &self,
        guard: &mut Guard,
        events: impl Iterator<Item = (&'a Incoming, i64)>,
    ) {
        for (message, bank) in events {
            if guard.covers(message) {
                guard.banks.insert(bank);
            }
        }
    }

    /// Copies the quotes of banks noted without evaluation and moves the
    /// evaluated positions to the batch's end.
    pub(super) async fn finish(
        &self,
        db: &mut PgConnection,
        topic: &str,
        guard: &Guard,
        positions: &BTreeMap<i32, i64>,
    ) -> sqlx::Result<()> {
        if !guard.banks.is_empty() {
            let banks: Vec<i64> = guard.banks.iter().copied().collect();
            sqlx::query(&self.sql.refresh)
                .bind(&banks)
                .execute(&mut *db)
                .await?;
        }
        let (partitions, next): (Vec<i32>, Vec<i64>) =
            positions.iter().map(|(p, n)| (*p, *n)).unzip();
        sqlx::query(&self.sql.advance)
            .bind(topic)
            .bind(&partitions)
            .bind(&next)
            .execute(&mut *db)
            .await?;
        Ok(())
    }
}

/// A batch's evaluation: where each partition's unevaluated messages
/// start, and what it did so far.
#[derive(Debug)]
pub struct Guard {
    from: BTreeMap<i32, i64>,
    /// Some alert exists: evaluate each event as it is applied.
    pub per_event: bool,
    locked: bool,
    /// Banks whose quotes are copied at the batch's end.
    banks: BTreeSet<i64>,
    /// Crossings recorded.
    pub fired: u64,
}

impl Guard {
    fn covers(&self, message: &Incoming) -> bool {
        self.from
            .get(&message.partition)
            .is_some_and(|from| message.offset >= *from)
    }
}

/// Whether the event may change what alerts compare: a bank's boards,
/// details or state (not a reference board).
fn moves_quotes(event: &Event) -> bool {
    !matches!(event, Event::ReferenceBoardPublished(_))
}
