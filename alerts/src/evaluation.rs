//! Alerts judged in the fold's transaction, so that a crossing is
//! recorded exactly when its board is applied: a crash keeps both or
//! neither. The fold tells an [`Evaluation`] how each applied event left
//! its bank ([`Evaluation::observe`]); the judge ([`crate::judge`]) decides
//! in memory, and [`Evaluation::finish`] stores what moved.
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
//! Values are compared in the alerts schema's `quotes`: each bank's latest
//! board, copied from the generation after the batch. A bank's rows depend
//! only on its own events (one partition, in order), so any generation
//! copies the same values; the best rate across banks is taken there
//! rather than from a generation whose other partitions may be behind (a
//! replay's).
//!
//! A board moves each watch it touches (one row each) and records one
//! `crossings` row per watch naming the alerts it fired, whatever the
//! number of alerts; the deliverer turns that row into messages outside
//! the fold. While any watch exists, a transaction-wide lock serialises
//! evaluation across lanes and projectors (the best rate moves with every
//! bank's board) and against alerts being made; without watches only the
//! quotes are kept.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use rust_decimal::Decimal;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::judge::{self, Armed, Condition, Field, Move, Quote, WatchBank, BEST};
use crate::schema::EVALUATION_LOCK;

/// The fold's alert statements for one alerts schema.
#[derive(Debug, Clone)]
pub struct Judge {
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
    watches: String,
    quotes: String,
    refresh: String,
    candidates: String,
    moved: String,
    crossed: String,
    advance: String,
}

impl Judge {
    /// A replay's: it judges only partitions the live fold started.
    pub fn for_replay(schema: &str) -> Self {
        Self {
            seeds: false,
            ..Self::new(schema)
        }
    }

    /// `schema` is a checked identifier (settings) holding the alerts'
    /// tables, migrated. The statements run on the generation's
    /// connection, so the alerts' tables are named with their schema.
    pub fn new(schema: &str) -> Self {
        let s = schema;
        let latest =
            "SELECT r.bank_id, r.currency::text AS currency, r.cash_buying, r.cash_selling,
                             r.transactional_buying, r.transactional_selling, r.as_of
                      FROM banks k
                      CROSS JOIN LATERAL (SELECT as_of, currencies FROM boards
                                          WHERE bank_id = k.id ORDER BY as_of DESC LIMIT 1) b
                      JOIN rates r ON r.bank_id = k.id AND r.as_of = b.as_of
                                  AND r.currency = ANY (b.currencies)";
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
                // The watches of the banks ($1) and of the best rates.
                watches: format!(
                    "SELECT currency, field, bank_id, value, evaluations FROM {s}.watches
                     WHERE bank_id = ANY ($1) OR bank_id = 0"
                ),
                // The quotes of the currencies ($1) and the banks ($2).
                quotes: format!(
                    "SELECT q.bank_id, q.currency, q.cash_buying, q.cash_selling,
                            q.transactional_buying, q.transactional_selling, q.updated_at,
                            COALESCE(b.active, FALSE) AS active
                     FROM {s}.quotes q LEFT JOIN {s}.quote_banks b ON b.bank_id = q.bank_id
                     WHERE q.currency = ANY ($1) OR q.bank_id = ANY ($2)"
                ),
                // Copies the banks' ($1) latest boards and details from
                // the generation.
                refresh: format!(
                    "WITH latest AS (
                         SELECT * FROM ({latest}) l WHERE l.bank_id = ANY ($1)
                     ), gone AS (
                         DELETE FROM {s}.quotes q WHERE q.bank_id = ANY ($1)
                           AND (q.bank_id, q.currency) NOT IN (SELECT bank_id, currency FROM latest)
                     ), put AS (
                         INSERT INTO {s}.quotes (bank_id, currency, cash_buying, cash_selling,
                                                 transactional_buying, transactional_selling, updated_at)
                         SELECT * FROM latest
                         ON CONFLICT (bank_id, currency) DO UPDATE SET
                             cash_buying = EXCLUDED.cash_buying, cash_selling = EXCLUDED.cash_selling,
                             transactional_buying = EXCLUDED.transactional_buying,
                             transactional_selling = EXCLUDED.transactional_selling,
                             updated_at = EXCLUDED.updated_at
                     )
                     INSERT INTO {s}.quote_banks (bank_id, code, name, active)
                     SELECT id, code, name, active FROM banks WHERE id = ANY ($1)
                     ON CONFLICT (bank_id) DO UPDATE SET code = EXCLUDED.code,
                         name = EXCLUDED.name, active = EXCLUDED.active"
                ),
                // For each move ($1 its number), the alerts of its watch
                // whose threshold lies in its range (each condition a range
                // of the thresholds' index), and those not known yet.
                candidates: format!(
                    "SELECT m.i, x.id, x.condition, x.threshold, x.since
                     FROM UNNEST($1::int[], $2::text[], $3::text[], $4::bigint[], $5::numeric[],
                                 $6::numeric[], $7::bigint[]) AS m (i, currency, field, bank, low, high, evaluations)
                     CROSS JOIN LATERAL (
                         SELECT a.id, a.condition, a.threshold, a.since FROM {s}.alerts a
                         WHERE a.currency = m.currency AND a.field = m.field AND a.watch_bank = m.bank
                           AND a.condition = ANY ('{{above,below}}') AND a.threshold BETWEEN m.low AND m.high
                         UNION
                         SELECT a.id, a.condition, a.threshold, a.since FROM {s}.alerts a
                         WHERE a.currency = m.currency AND a.field = m.field AND a.watch_bank = m.bank
                           AND a.since = m.evaluations) x"
                ),
                moved: format!(
                    "UPDATE {s}.watches w SET value = m.value, holder = m.holder,
                         updated_at = m.updated_at, evaluations = m.evaluations
                     FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::numeric[], $5::bigint[],
                                 $6::timestamptz[], $7::bigint[])
                          AS m (currency, field, bank_id, value, holder, updated_at, evaluations)
                     WHERE w.currency = m.currency AND w.field = m.field AND w.bank_id = m.bank_id"
                ),
                // One row per crossing ($1 its number), its alerts given
                // as ($11 crossing, $12 alert) pairs.
                crossed: format!(
                    "INSERT INTO {s}.crossings (event_id, currency, field, watch_bank, alert_ids,
                                               previous, current, holder, updated_at, occurred_at)
                     SELECT c.event_id, c.currency, c.field, c.bank,
                            ARRAY(SELECT f.alert FROM UNNEST($11::int[], $12::uuid[]) AS f (i, alert)
                                  WHERE f.i = c.i),
                            c.previous, c.current, c.holder, c.updated_at, c.occurred_at
                     FROM UNNEST($1::int[], $2::uuid[], $3::text[], $4::text[], $5::bigint[],
                                 $6::numeric[], $7::numeric[], $8::bigint[], $9::timestamptz[],
                                 $10::timestamptz[])
                          AS c (i, event_id, currency, field, bank, previous, current, holder,
                                updated_at, occurred_at)
                     ON CONFLICT DO NOTHING"
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
    /// stored next offsets of the batch's partitions, `messages` where the
    /// batch's messages are, `banks` the banks they name.
    pub async fn begin(
        &self,
        db: &mut PgConnection,
        topic: &str,
        positions: &BTreeMap<i32, i64>,
        messages: impl IntoIterator<Item = (i32, i64)>,
        banks: &BTreeSet<i64>,
    ) -> sqlx::Result<Option<Evaluation>> {
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
        let pending =
            messages
                .into_iter()
                .any(|(partition, offset)| match peeked.get(&partition) {
                    Some(from) => offset >= *from,
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
        let from = rows.into_iter().map(|(p, n, _)| (p, n)).collect();
        let watching = match any_watch {
            true => Some(self.watching(db, banks).await?),
            false => None,
        };
        Ok(Some(Evaluation {
            from,
            watching,
            observed: BTreeSet::new(),
        }))
    }

    /// Takes the evaluation lock and reads the watches the banks' events
    /// may move, with the quotes they are judged on.
    async fn watching(
        &self,
        db: &mut PgConnection,
        banks: &BTreeSet<i64>,
    ) -> sqlx::Result<Watching> {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(EVALUATION_LOCK)
            .execute(&mut *db)
            .await?;
        let banks: Vec<i64> = banks.iter().copied().collect();
        let rows: Vec<(String, String, i64, Option<Decimal>, i64)> =
            sqlx::query_as(&self.sql.watches)
                .bind(&banks)
                .fetch_all(&mut *db)
                .await?;
        let mut watches = BTreeMap::new();
        for (currency, field, bank, value, evaluations) in rows {
            let (Ok(currency), Some(field)) =
                (CurrencyCode::parse(&currency), Field::from_key(&field))
            else {
                continue;
            };
            watches.insert(
                WatchKey {
                    currency,
                    field,
                    bank,
                },
                Watch {
                    value,
                    holder: None,
                    updated_at: None,
                    evaluations,
                    moved: false,
                },
            );
        }
        let currencies: Vec<String> = watches
            .keys()
            .map(|k| k.currency.as_str().to_owned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let rows: Vec<QuoteRow> = sqlx::query_as(&self.sql.quotes)
            .bind(&currencies)
            .bind(&banks)
            .fetch_all(&mut *db)
            .await?;
        let mut quotes = BTreeMap::new();
        let mut active = BTreeMap::new();
        for row in rows {
            let Ok(currency) = CurrencyCode::parse(&row.currency) else {
                continue;
            };
            active.insert(row.bank_id, row.active);
            quotes.insert(
                (row.bank_id, currency),
                Quote {
                    bank: row.bank_id,
                    currency,
                    cash_buying: row.cash_buying,
                    cash_selling: row.cash_selling,
                    transactional_buying: row.transactional_buying,
                    transactional_selling: row.transactional_selling,
                    updated_at: row.updated_at,
                },
            );
        }
        Ok(Watching {
            watches,
            quotes,
            active,
            moves: Vec::new(),
        })
    }
}

#[derive(sqlx::FromRow)]
struct QuoteRow {
    bank_id: i64,
    currency: String,
    cash_buying: Option<Decimal>,
    cash_selling: Option<Decimal>,
    transactional_buying: Option<Decimal>,
    transactional_selling: Option<Decimal>,
    updated_at: DateTime<Utc>,
    active: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct WatchKey {
    currency: CurrencyCode,
    field: Field,
    bank: WatchBank,
}

#[derive(Debug, Clone)]
struct Watch {
    value: Option<Decimal>,
    holder: Option<i64>,
    updated_at: Option<DateTime<Utc>>,
    evaluations: i64,
    moved: bool,
}

/// The watches a batch may move, with the quotes they are judged on, and
/// the moves so far.
#[derive(Debug)]
struct Watching {
    watches: BTreeMap<WatchKey, Watch>,
    quotes: BTreeMap<(i64, CurrencyCode), Quote>,
    /// Whether a bank is listed (its quotes count for the best rate).
    active: BTreeMap<i64, bool>,
    moves: Vec<Moved>,
}

/// One watch moved by one event.
#[derive(Debug, Clone)]
struct Moved {
    key: WatchKey,
    step: Move,
    holder: Option<i64>,
    updated_at: Option<DateTime<Utc>>,
    event_id: Uuid,
    occurred_at: DateTime<Utc>,
}

/// How an applied event left its bank: listed or not, and its latest
/// board's rates (none when it has no board).
#[derive(Debug, Clone)]
pub struct BankNow {
    pub bank: i64,
    pub active: bool,
    pub quotes: Vec<Quote>,
}

/// A batch's evaluation: where each partition's unevaluated messages
/// start, and what it did so far.
#[derive(Debug)]
pub struct Evaluation {
    from: BTreeMap<i32, i64>,
    /// `None`: no watch exists; only the quotes are kept.
    watching: Option<Watching>,
    /// Banks whose quotes are copied at the batch's end.
    observed: BTreeSet<i64>,
}

impl Evaluation {
    /// Whether the message at `partition`/`offset` is evaluated here.
    pub fn covers(&self, partition: i32, offset: i64) -> bool {
        self.from
            .get(&partition)
            .is_some_and(|from| offset >= *from)
    }

    /// Whether [`Evaluation::observe`] needs each bank's latest rates.
    pub fn watches(&self) -> bool {
        self.watching.is_some()
    }

    /// Judges the watches an applied event (`event_id`, occurred at
    /// `occurred_at`) moved, as it left its bank. Events that do not
    /// change what alerts compare (reference boards) are not observed.
    pub fn observe(&mut self, event_id: Uuid, occurred_at: DateTime<Utc>, now: BankNow) {
        self.observed.insert(now.bank);
        let Some(watching) = &mut self.watching else {
            return;
        };
        let bank = now.bank;
        let mut affected: BTreeSet<CurrencyCode> = watching
            .quotes
            .keys()
            .filter(|(b, _)| *b == bank)
            .map(|(_, c)| *c)
            .collect();
        watching.quotes.retain(|(b, _), _| *b != bank);
        for quote in now.quotes {
            affected.insert(quote.currency);
            watching.quotes.insert((bank, quote.currency), quote);
        }
        watching.active.insert(bank, now.active);
        let Watching {
            watches,
            quotes,
            active,
            moves,
        } = watching;
        for (key, watch) in watches.iter_mut() {
            if !affected.contains(&key.currency) || (key.bank != bank && key.bank != BEST) {
                continue;
            }
            let candidates = quotes
                .values()
                .filter(|q| q.currency == key.currency)
                .map(|q| (q, active.get(&q.bank).copied().unwrap_or(false)));
            let seen = judge::watched(key.field, key.bank, candidates);
            moves.push(Moved {
                key: *key,
                step: Move {
                    old: watch.value,
                    new: seen.map(|s| s.value),
                    evaluations: watch.evaluations,
                },
                holder: seen.map(|s| s.holder),
                updated_at: seen.map(|s| s.updated_at),
                event_id,
                occurred_at,
            });
            watch.value = seen.map(|s| s.value);
            watch.holder = seen.map(|s| s.holder);
            watch.updated_at = seen.map(|s| s.updated_at);
            watch.evaluations += 1;
            watch.moved = true;
        }
    }

    /// Stores what the batch moved: the quotes of the banks observed, the
    /// watches, the crossings with the alerts they fired; moves the
    /// evaluated positions to the batch's end. Returns the alerts fired.
    pub async fn finish(
        self,
        judge: &Judge,
        db: &mut PgConnection,
        topic: &str,
        positions: &BTreeMap<i32, i64>,
    ) -> sqlx::Result<u64> {
        if !self.observed.is_empty() {
            let banks: Vec<i64> = self.observed.iter().copied().collect();
            sqlx::query(&judge.sql.refresh)
                .bind(&banks)
                .execute(&mut *db)
                .await?;
        }
        let fired = match self.watching {
            Some(watching) => store(judge, db, watching).await?,
            None => 0,
        };
        let (partitions, next): (Vec<i32>, Vec<i64>) =
            positions.iter().map(|(p, n)| (*p, *n)).unzip();
        sqlx::query(&judge.sql.advance)
            .bind(topic)
            .bind(&partitions)
            .bind(&next)
            .execute(&mut *db)
            .await?;
        Ok(fired)
    }
}

/// Reads the alerts each move may fire, judges them, and stores the
/// watches and crossings.
async fn store(judge: &Judge, db: &mut PgConnection, watching: Watching) -> sqlx::Result<u64> {
    let Watching { watches, moves, .. } = watching;
    if moves.is_empty() {
        return Ok(0);
    }
    let mut ask = Columns::default();
    for (i, moved) in moves.iter().enumerate() {
        let Some((low, high)) = moved.step.thresholds() else {
            continue;
        };
        ask.index.push(i as i32);
        ask.currency.push(moved.key.currency.as_str().to_owned());
        ask.field.push(moved.key.field.key().to_owned());
        ask.bank.push(moved.key.bank);
        ask.low.push(low);
        ask.high.push(high);
        ask.evaluations.push(moved.step.evaluations);
    }
    let candidates: Vec<(i32, Uuid, String, Decimal, i64)> = if ask.index.is_empty() {
        Vec::new()
    } else {
        sqlx::query_as(&judge.sql.candidates)
            .bind(&ask.index)
            .bind(&ask.currency)
            .bind(&ask.field)
            .bind(&ask.bank)
            .bind(&ask.low)
            .bind(&ask.high)
            .bind(&ask.evaluations)
            .fetch_all(&mut *db)
            .await?
    };
    let mut fired: BTreeMap<usize, Vec<Uuid>> = BTreeMap::new();
    for (i, id, condition, threshold, since) in candidates {
        let Some(condition) = Condition::parse(&condition) else {
            continue;
        };
        let alert = Armed {
            condition,
            threshold,
            since,
        };
        if judge::fires(&alert, &moves[i as usize].step) {
            fired.entry(i as usize).or_default().push(id);
        }
    }

    let moved: Vec<(&WatchKey, &Watch)> = watches.iter().filter(|(_, w)| w.moved).collect();
    sqlx::query(&judge.sql.moved)
        .bind(
            moved
                .iter()
                .map(|(k, _)| k.currency.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(moved.iter().map(|(k, _)| k.field.key()).collect::<Vec<_>>())
        .bind(moved.iter().map(|(k, _)| k.bank).collect::<Vec<_>>())
        .bind(moved.iter().map(|(_, w)| w.value).collect::<Vec<_>>())
        .bind(moved.iter().map(|(_, w)| w.holder).collect::<Vec<_>>())
        .bind(moved.iter().map(|(_, w)| w.updated_at).collect::<Vec<_>>())
        .bind(moved.iter().map(|(_, w)| w.evaluations).collect::<Vec<_>>())
        .execute(&mut *db)
        .await?;

    if fired.is_empty() {
        return Ok(0);
    }
    let mut rows = Crossings::default();
    let mut count = 0;
    for (i, alerts) in &fired {
        let moved = &moves[*i];
        let (Some(current), Some(holder), Some(updated_at)) =
            (moved.step.new, moved.holder, moved.updated_at)
        else {
            continue;
        };
        rows.index.push(*i as i32);
        rows.event_id.push(moved.event_id);
        rows.currency.push(moved.key.currency.as_str().to_owned());
        rows.field.push(moved.key.field.key().to_owned());
        rows.bank.push(moved.key.bank);
        rows.previous.push(moved.step.old);
        rows.current.push(current);
        rows.holder.push(holder);
        rows.updated_at.push(updated_at);
        rows.occurred_at.push(moved.occurred_at);
        for alert in alerts {
            rows.alert_crossing.push(*i as i32);
            rows.alert_id.push(*alert);
            count += 1;
        }
    }
    sqlx::query(&judge.sql.crossed)
        .bind(&rows.index)
        .bind(&rows.event_id)
        .bind(&rows.currency)
        .bind(&rows.field)
        .bind(&rows.bank)
        .bind(&rows.previous)
        .bind(&rows.current)
        .bind(&rows.holder)
        .bind(&rows.updated_at)
        .bind(&rows.occurred_at)
        .bind(&rows.alert_crossing)
        .bind(&rows.alert_id)
        .execute(&mut *db)
        .await?;
    Ok(count)
}

/// The moves asked about, as columns.
#[derive(Default)]
struct Columns {
    index: Vec<i32>,
    currency: Vec<String>,
    field: Vec<String>,
    bank: Vec<i64>,
    low: Vec<Decimal>,
    high: Vec<Decimal>,
    evaluations: Vec<i64>,
}

/// The crossings recorded, as columns.
#[derive(Default)]
struct Crossings {
    index: Vec<i32>,
    event_id: Vec<Uuid>,
    currency: Vec<String>,
    field: Vec<String>,
    bank: Vec<i64>,
    previous: Vec<Option<Decimal>>,
    current: Vec<Decimal>,
    holder: Vec<i64>,
    updated_at: Vec<DateTime<Utc>>,
    occurred_at: Vec<DateTime<Utc>>,
    alert_crossing: Vec<i32>,
    alert_id: Vec<Uuid>,
}
