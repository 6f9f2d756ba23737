//! Alerts evaluated in the fold's transaction, so that a crossing is
//! recorded exactly when its board is applied: a crash keeps both or
//! neither.
//!
//! Each log position is evaluated once, whatever folds it: the alerts
//! schema's `positions` hold, per partition, the first offset nobody has
//! evaluated. A fold locks its partitions' rows, evaluates the messages at
//! or past them, and moves them on; a replay into a new generation (which
//! folds the log again from offset zero) finds its old messages evaluated
//! and skips them, and the messages it reaches first it evaluates like a
//! live fold. Message ids come from the alert and the event, so even a
//! second evaluation could not send a crossing twice.
//!
//! Values are compared in the alerts schema's `quotes`: each bank's
//! latest board, copied from the generation after each evaluated event of
//! that bank. A bank's rows depend only on its own events (one partition,
//! in order), so any generation copies the same values; the best rate
//! across banks is taken there rather than from a generation whose other
//! partitions may be behind (a replay's).
//!
//! Alerts read watches (`watches`: one rate of a currency at a bank, or
//! the best across active banks), which keep the value of their last
//! evaluation. Every alert on a watch shares it: an "above" alert held
//! exactly when that value was above its threshold, so a board moving the
//! watch from `old` to `new` fires the alerts with a threshold in
//! `[old, new)` (a range of an index), plus those made since the last
//! evaluation (not known yet) that `new` meets. Those that `new` no longer
//! meets are re-armed without a write. A board thus writes one row per
//! watch and one `crossings` row naming the alerts it fired, whatever the
//! number of alerts; the deliverer turns that row into messages outside
//! the fold.
//!
//! Evaluation is per event when any watch exists (two boards of a bank in
//! one batch may cross and cross back), so such batches take the fold's
//! one-by-one path; without watches only the quotes are kept, once per
//! batch. A transaction-wide lock serialises evaluation across lanes and
//! projectors (the best rate moves with every bank's board) and against
//! alerts being made.

use std::collections::{BTreeMap, BTreeSet};

use ratewire_proto::{Envelope, Event};
use sqlx::PgConnection;

use super::Incoming;

/// The fold's alert statements for one alerts schema.
#[derive(Debug, Clone)]
pub struct AlertsFold {
    schema: String,
    sql: Statements,
    /// Whether a partition without a position starts one here (the live
    /// fold); a replay never does, or it would judge the whole history.
    seeds: bool,
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

use ratewire_readmodel::alerts::EVALUATION_LOCK;

impl AlertsFold {
    /// A replay's: it judges only partitions the live fold started.
    pub fn for_replay(schema: &str) -> Self {
        Self {
            seeds: false,
            ..Self::new(schema)
        }
    }

    /// `schema` is a checked identifier (settings) holding the alerts'
    /// tables, migrated.
    pub fn new(schema: &str) -> Self {
        let s = schema;
        let fields = "(VALUES ('cashBuying', q.cash_buying, TRUE), ('cashSelling', q.cash_selling, FALSE),
                              ('transactionalBuying', q.transactional_buying, TRUE),
                              ('transactionalSelling', q.transactional_selling, FALSE)) AS f (field, value, higher)";
        Self {
            schema: schema.to_owned(),
            seeds: true,
            sql: Statements {
                peek: format!(
                    "SELECT partition, next_offset FROM {s}.positions WHERE topic = $1 AND partition = ANY ($2)"
                ),
                lock: format!(
                    "SELECT partition, next_offset, EXISTS (SELECT 1 FROM {s}.watches) AS any_watch
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
                // The watches of the bank ($1) and of the best rates of the
                // currencies ($2), judged on the quotes after event $3
                // (occurred at $4): each moves to its new value, and the
                // alerts whose threshold lies between its old and new
                // values (or not known yet and met now) are recorded as
                // the event's crossings, one row per watch.
                evaluate: format!(
                    "WITH affected AS (
                         SELECT w.currency, w.field, w.bank_id, w.value AS old, w.evaluations
                         FROM {s}.watches w
                         WHERE w.currency = ANY ($2) AND w.bank_id IN ($1, 0)
                     ), quoted AS (
                         SELECT q.bank_id, q.currency, q.updated_at, b.active, f.field, f.value, f.higher
                         FROM {s}.quotes q
                         JOIN {s}.quote_banks b ON b.bank_id = q.bank_id
                         CROSS JOIN LATERAL {fields}
                         WHERE q.currency = ANY ($2) AND f.value IS NOT NULL
                     ), fresh AS (
                         SELECT a.*, n.value AS new, n.bank_id AS holder, n.updated_at
                         FROM affected a
                         LEFT JOIN LATERAL (
                             SELECT q.value, q.bank_id, q.updated_at FROM quoted q
                             WHERE q.currency = a.currency AND q.field = a.field
                               AND ((a.bank_id = 0 AND q.active) OR q.bank_id = a.bank_id)
                             ORDER BY CASE WHEN q.higher THEN q.value END DESC,
                                      CASE WHEN NOT q.higher THEN q.value END ASC,
                                      q.updated_at, q.bank_id
                             LIMIT 1) n ON TRUE
                     ), moved AS (
                         UPDATE {s}.watches w SET value = f.new, holder = f.holder,
                             updated_at = f.updated_at, evaluations = w.evaluations + 1
                         FROM fresh f
                         WHERE w.currency = f.currency AND w.field = f.field AND w.bank_id = f.bank_id
                     ), crossed AS (
                         SELECT f.*, ARRAY(
                             SELECT x.id FROM {s}.alerts x
                             WHERE x.currency = f.currency AND x.field = f.field
                               AND x.watch_bank = f.bank_id AND x.condition = 'above'
                               AND x.threshold < f.new AND (f.old IS NULL OR x.threshold >= f.old)
                               AND x.since < f.evaluations
                             UNION ALL
                             SELECT x.id FROM {s}.alerts x
                             WHERE x.currency = f.currency AND x.field = f.field
                               AND x.watch_bank = f.bank_id AND x.condition = 'below'
                               AND x.threshold > f.new AND (f.old IS NULL OR x.threshold <= f.old)
                               AND x.since < f.evaluations
                             UNION ALL
                             SELECT x.id FROM {s}.alerts x
                             WHERE x.currency = f.currency AND x.field = f.field
                               AND x.watch_bank = f.bank_id AND x.since = f.evaluations
                               AND CASE x.condition WHEN 'above' THEN f.new > x.threshold
                                                    ELSE f.new < x.threshold END
                         ) AS ids
                         FROM fresh f
                         WHERE f.new IS NOT NULL
                     ), recorded AS (
                         INSERT INTO {s}.crossings (event_id, currency, field, watch_bank, alert_ids,
                                                    previous, current, holder, updated_at, occurred_at)
                         SELECT $3, c.currency, c.field, c.bank_id, c.ids, c.old, c.new, c.holder,
                                c.updated_at, $4
                         FROM crossed c WHERE cardinality(c.ids) > 0
                         ON CONFLICT DO NOTHING
                         RETURNING cardinality(alert_ids) AS n
                     )
                     SELECT COALESCE(sum(n), 0)::bigint FROM recorded"
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
        let pending = batch.iter().any(|m| match peeked.get(&m.partition) {
            Some(from) => m.offset >= *from,
            None => self.seeds,
        });
        if !pending {
            return Ok(None);
        }
        let mut rows: Vec<(i32, i64, bool)> = sqlx::query_as(&self.sql.lock)
            .bind(topic)
            .bind(&partitions)
            .fetch_all(&mut *db)
            .await?;
        if rows.len() < partitions.len() && self.seeds {
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
        let any_watch = rows.iter().any(|(_, _, any)| *any);
        Ok(Some(Guard {
            from: rows.into_iter().map(|(p, n, _)| (p, n)).collect(),
            per_event: any_watch,
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
    /// Some watch exists: evaluate each event as it is applied.
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
