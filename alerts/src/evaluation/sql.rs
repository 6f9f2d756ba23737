//! The statements the judge runs in the fold's transaction, for one
//! alerts schema. They run on the generation's connection, so the
//! alerts' tables are named with their schema; they fetch and store sets
//! of rows, and the judge ([`crate::judge`]) decides.

#[derive(Debug, Clone)]
pub(super) struct Statements {
    pub peek: String,
    pub lock: String,
    pub seed_positions: String,
    pub seed_quotes: String,
    pub watches: String,
    pub quotes: String,
    pub refresh: String,
    pub candidates: String,
    pub crossed: String,
    pub advance: String,
    pub quality_events: String,
}

impl Statements {
    /// `s` is a checked identifier (settings) holding the alerts' tables.
    pub fn new(s: &str) -> Self {
        let advance = advance_positions(s, 16);
        let latest =
            "SELECT r.bank_id, r.currency::text AS currency, r.cash_buying, r.cash_selling,
                             r.transactional_buying, r.transactional_selling, r.as_of
                      FROM banks k
                      CROSS JOIN LATERAL (SELECT as_of, currencies FROM boards
                                          WHERE bank_id = k.id ORDER BY as_of DESC LIMIT 1) b
                      JOIN rates r ON r.bank_id = k.id AND r.as_of = b.as_of
                                  AND r.currency = ANY (b.currencies)";
        Self {
            peek: format!(
                "SELECT partition, next_offset FROM {s}.positions WHERE topic = $1 AND partition = ANY ($2)"
            ),
            // Locks the partitions' rows, then, when any watch exists,
            // takes the evaluation lock ($3) in the same round trip: `flags`
            // counts the locked rows first, so the order is always rows,
            // then lock. What is read under the lock is read by the next
            // statements, whose snapshots follow it.
            lock: format!(
                "WITH locked AS MATERIALIZED (
                     SELECT partition, next_offset FROM {s}.positions
                     WHERE topic = $1 AND partition = ANY ($2)
                     ORDER BY partition FOR UPDATE
                 ), flags AS MATERIALIZED (
                     SELECT EXISTS (SELECT 1 FROM {s}.watches) AS any_watch,
                            EXISTS (SELECT 1 FROM {s}.webhooks
                                    WHERE cardinality(events) > 0
                                      AND 'quality.spread_cap_breached' = ANY (events)
                                      AND disabled_at IS NULL) AS breach_hooks
                     FROM (SELECT count(*) FROM locked) AS all_locked
                 ), held AS MATERIALIZED (
                     SELECT CASE WHEN any_watch
                                 THEN (SELECT TRUE FROM pg_advisory_xact_lock($3))
                                 ELSE FALSE END AS any_watch,
                            breach_hooks
                     FROM flags
                 )
                 SELECT l.partition, l.next_offset, h.any_watch, h.breach_hooks
                 FROM locked l CROSS JOIN held h ORDER BY l.partition"
            ),
            // A partition first seen: evaluation starts where this
            // generation is...
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
                 {latest}
                 ON CONFLICT DO NOTHING"
            ),
            // The watches of the banks ($1) and of the best rates, each
            // with the `since` of its newest alert: an index probe, whatever
            // the table's statistics say (alerts not known yet are those
            // whose `since` is the watch's evaluations).
            watches: format!(
                "SELECT w.currency, w.field, w.bank_id, w.value, w.evaluations,
                        (SELECT max(a.since) FROM {s}.alerts a
                         WHERE a.currency = w.currency AND a.field = w.field
                           AND a.watch_bank = w.bank_id AND a.since >= 0) AS newest
                 FROM {s}.watches w
                 WHERE w.bank_id = ANY ($1) OR w.bank_id = 0"
            ),
            quotes: crate::quotes::statement(s),
            // Stores the banks' ($1..$4) details and their latest
            // boards' quotes ($5..$11) with their previous values
            // ($12..$15), dropping currencies they no longer quote; and
            // moves the positions on, as `advance` does ($16..$18).
            refresh: format!(
                "WITH advanced AS ({advance}), now AS (
                     SELECT * FROM UNNEST($5::bigint[], $6::text[], $7::numeric[], $8::numeric[],
                                          $9::numeric[], $10::numeric[], $11::timestamptz[],
                                          $12::numeric[], $13::numeric[], $14::numeric[],
                                          $15::numeric[])
                         AS n (bank_id, currency, cash_buying, cash_selling,
                               transactional_buying, transactional_selling, updated_at,
                               previous_cash_buying, previous_cash_selling,
                               previous_transactional_buying, previous_transactional_selling)
                 ), gone AS (
                     DELETE FROM {s}.quotes q WHERE q.bank_id = ANY ($1)
                       AND NOT EXISTS (SELECT 1 FROM now n
                                       WHERE n.bank_id = q.bank_id AND n.currency = q.currency)
                 ), put AS (
                     INSERT INTO {s}.quotes (bank_id, currency, cash_buying, cash_selling,
                                             transactional_buying, transactional_selling, updated_at,
                                             previous_cash_buying, previous_cash_selling,
                                             previous_transactional_buying,
                                             previous_transactional_selling)
                     SELECT * FROM now
                     ON CONFLICT (bank_id, currency) DO UPDATE SET
                         cash_buying = EXCLUDED.cash_buying, cash_selling = EXCLUDED.cash_selling,
                         transactional_buying = EXCLUDED.transactional_buying,
                         transactional_selling = EXCLUDED.transactional_selling,
                         updated_at = EXCLUDED.updated_at,
                         previous_cash_buying = EXCLUDED.previous_cash_buying,
                         previous_cash_selling = EXCLUDED.previous_cash_selling,
                         previous_transactional_buying = EXCLUDED.previous_transactional_buying,
                         previous_transactional_selling = EXCLUDED.previous_transactional_selling
                 )
                 INSERT INTO {s}.quote_banks (bank_id, code, name, active)
                 SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::bool[])
                 ON CONFLICT (bank_id) DO UPDATE SET code = EXCLUDED.code,
                     name = EXCLUDED.name, active = EXCLUDED.active"
            ),
            // Stores the watches moved ($10..$16) and reads, for each move
            // ($1 its number), the alerts of its watch whose threshold
            // lies in the ranges it may fire (`above` from $5 included to
            // $6 excluded, `below` from $7 excluded to $8 included: each a
            // range of the thresholds' index), and those not known yet ($9
            // its watch's evaluations; NULL when the watch has none, and that
            // read is skipped). An alert may come twice; the caller keeps
            // one. One round trip: the alerts do not depend on the watches'
            // rows.
            candidates: format!(
                "WITH moved AS (
                     UPDATE {s}.watches w SET value = m.value, holder = m.holder,
                         updated_at = m.updated_at, evaluations = m.evaluations
                     FROM UNNEST($10::text[], $11::text[], $12::bigint[], $13::numeric[],
                                 $14::bigint[], $15::timestamptz[], $16::bigint[])
                          AS m (currency, field, bank_id, value, holder, updated_at, evaluations)
                     WHERE w.currency = m.currency AND w.field = m.field AND w.bank_id = m.bank_id)
                 SELECT m.i, x.id, x.condition, x.threshold, x.since
                 FROM UNNEST($1::int[], $2::text[], $3::text[], $4::bigint[], $5::numeric[],
                             $6::numeric[], $7::numeric[], $8::numeric[], $9::bigint[])
                      AS m (i, currency, field, bank, above_from, above_to, below_from,
                            below_to, unknown)
                 CROSS JOIN LATERAL (
                     SELECT a.id, a.condition, a.threshold, a.since FROM {s}.alerts a
                     WHERE a.currency = m.currency AND a.field = m.field AND a.watch_bank = m.bank
                       AND a.condition = 'above'
                       AND a.threshold >= m.above_from AND a.threshold < m.above_to
                     UNION ALL
                     SELECT a.id, a.condition, a.threshold, a.since FROM {s}.alerts a
                     WHERE a.currency = m.currency AND a.field = m.field AND a.watch_bank = m.bank
                       AND a.condition = 'below'
                       AND a.threshold > m.below_from AND a.threshold <= m.below_to
                     UNION ALL
                     SELECT a.id, a.condition, a.threshold, a.since FROM {s}.alerts a
                     WHERE m.unknown IS NOT NULL
                       AND a.currency = m.currency AND a.field = m.field AND a.watch_bank = m.bank
                       AND a.since = m.unknown AND a.since >= 0) x"
            ),
            // One row per crossing ($1 its number), its alerts given
            // as ($11 crossing, $12 alert) pairs; $13 its fold's trace.
            crossed: format!(
                "INSERT INTO {s}.crossings (event_id, currency, field, watch_bank, alert_ids,
                                           previous, current, holder, updated_at, occurred_at,
                                           traceparent)
                 SELECT c.event_id, c.currency, c.field, c.bank,
                        ARRAY(SELECT f.alert FROM UNNEST($11::int[], $12::uuid[]) AS f (i, alert)
                              WHERE f.i = c.i),
                        c.previous, c.current, c.holder, c.updated_at, c.occurred_at,
                        c.traceparent
                 FROM UNNEST($1::int[], $2::uuid[], $3::text[], $4::text[], $5::bigint[],
                             $6::numeric[], $7::numeric[], $8::bigint[], $9::timestamptz[],
                             $10::timestamptz[], $13::text[])
                      AS c (i, event_id, currency, field, bank, previous, current, holder,
                            updated_at, occurred_at, traceparent)
                 ON CONFLICT DO NOTHING"
            ),
            quality_events: record_quality_events(s),
            advance: advance_positions(s, 1),
        }
    }
}

/// Moves the evaluated partitions' positions on: the topic, then each
/// partition and its next offset, as parameters `$first` to `$first + 2`.
fn advance_positions(s: &str, first: usize) -> String {
    let (topic, partitions, next) = (first, first + 1, first + 2);
    format!(
        "UPDATE {s}.positions p SET next_offset = GREATEST(p.next_offset, n.next_offset)
         FROM UNNEST(${partitions}::int[], ${next}::bigint[]) AS n (partition, next_offset)
         WHERE p.topic = ${topic} AND p.partition = n.partition"
    )
}

/// Records watchdog events ($1..$4: id, type, body, time), each once: the
/// fold's breaches and the missed-slot judge's rounds alike.
pub(crate) fn record_quality_events(s: &str) -> String {
    format!(
        "INSERT INTO {s}.quality_events (id, type, body, occurred_at)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::timestamptz[])
         ON CONFLICT DO NOTHING"
    )
}
