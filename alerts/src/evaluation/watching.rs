//! What a batch's evaluation keeps in memory while any watch exists: the
//! watches its banks' events may move, the quotes they are judged on,
//! and the moves so far; read under the evaluation lock, judged event by
//! event, stored at the batch's end.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use ratewire_proto::CurrencyCode;
use ratewire_readmodel::quality::OutlierRule;
use rust_decimal::Decimal;
use sqlx::PgConnection;
use uuid::Uuid;

use super::sql::Statements;
use crate::judge::{self, Armed, Condition, Field, Move, Quote, WatchBank, BEST};

/// How an applied event left its bank: its code and name, listed or not,
/// and its latest board's rates (none when it has no board), each with the
/// bank's previous values when the fold has them at hand.
#[derive(Debug, Clone)]
pub struct BankNow {
    pub bank: i64,
    pub code: String,
    pub name: String,
    pub active: bool,
    pub quotes: Vec<Quote>,
    /// The currencies whose previous values the fold did not have at hand
    /// (the event did not add the newest board, or the board before does
    /// not quote the currency): those stored for the same board stand.
    pub without_previous: BTreeSet<CurrencyCode>,
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
    /// The `since` of the watch's newest alert: while it is the watch's
    /// evaluations, alerts made since the last one are not known yet.
    newest: Option<i64>,
    moved: bool,
}

/// The watches a batch may move, with the quotes they are judged on, and
/// the moves so far.
#[derive(Debug)]
pub(super) struct Watching {
    watches: BTreeMap<WatchKey, Watch>,
    quotes: BTreeMap<(i64, CurrencyCode), Quote>,
    /// Whether a bank is listed (its quotes count for the best rate).
    active: BTreeMap<i64, bool>,
    moves: Vec<Moved>,
}

/// A watch as read: its key, its value and evaluations, and the `since`
/// of its newest alert.
#[derive(sqlx::FromRow)]
struct WatchRow {
    currency: String,
    field: String,
    bank_id: i64,
    value: Option<Decimal>,
    evaluations: i64,
    newest: Option<i64>,
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

impl Watching {
    /// Reads the watches the banks' events may move, with the quotes they
    /// are judged on; the evaluation lock is held ([`super::Judge::begin`]).
    pub async fn load(
        sql: &Statements,
        db: &mut PgConnection,
        banks: &BTreeSet<i64>,
    ) -> sqlx::Result<Watching> {
        let banks: Vec<i64> = banks.iter().copied().collect();
        let rows: Vec<WatchRow> = sqlx::query_as(&sql.watches)
            .bind(&banks)
            .fetch_all(&mut *db)
            .await?;
        let mut watches = BTreeMap::new();
        for row in rows {
            let (Ok(currency), Some(field)) = (
                CurrencyCode::parse(&row.currency),
                Field::from_key(&row.field),
            ) else {
                continue;
            };
            watches.insert(
                WatchKey {
                    currency,
                    field,
                    bank: row.bank_id,
                },
                Watch {
                    value: row.value,
                    holder: None,
                    updated_at: None,
                    evaluations: row.evaluations,
                    newest: row.newest,
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
        let mut quotes = BTreeMap::new();
        let mut active = BTreeMap::new();
        for (quote, listed) in crate::quotes::read(db, &sql.quotes, &currencies, &banks).await? {
            active.insert(quote.bank, listed);
            quotes.insert((quote.bank, quote.currency), quote);
        }
        Ok(Watching {
            watches,
            quotes,
            active,
            moves: Vec::new(),
        })
    }

    /// The stored quotes of `banks` (loaded with the watches), by bank.
    pub fn quotes_of(&self, banks: &BTreeSet<i64>) -> BTreeMap<i64, Vec<Quote>> {
        let mut quotes: BTreeMap<i64, Vec<Quote>> = BTreeMap::new();
        for ((bank, _), quote) in &self.quotes {
            if banks.contains(bank) {
                quotes.entry(*bank).or_default().push(*quote);
            }
        }
        quotes
    }

    /// Judges the watches an applied event moved, as it left its bank.
    pub fn observe(
        &mut self,
        event_id: Uuid,
        occurred_at: DateTime<Utc>,
        now: &BankNow,
        outliers: OutlierRule,
    ) {
        let bank = now.bank;
        let mut affected: BTreeSet<CurrencyCode> = self
            .quotes
            .keys()
            .filter(|(b, _)| *b == bank)
            .map(|(_, c)| *c)
            .collect();
        self.quotes.retain(|(b, _), _| *b != bank);
        for quote in &now.quotes {
            affected.insert(quote.currency);
            self.quotes.insert((bank, quote.currency), *quote);
        }
        self.active.insert(bank, now.active);
        let Watching {
            watches,
            quotes,
            active,
            moves,
        } = self;
        for (key, watch) in watches.iter_mut() {
            if !affected.contains(&key.currency) || (key.bank != bank && key.bank != BEST) {
                continue;
            }
            let candidates = quotes
                .values()
                .filter(|q| q.currency == key.currency)
                .map(|q| (q, active.get(&q.bank).copied().unwrap_or(false)));
            let seen = judge::watched(key.field, key.bank, candidates, outliers);
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

    /// Stores the watches moved, reading the alerts each move may fire
    /// in the same round trip; judges them, and stores the crossings.
    pub async fn store(
        self,
        sql: &Statements,
        db: &mut PgConnection,
        traces: &BTreeMap<Uuid, String>,
    ) -> sqlx::Result<u64> {
        let Watching { watches, moves, .. } = self;
        if moves.is_empty() {
            return Ok(0);
        }
        let mut ask = Columns::default();
        for (i, moved) in moves.iter().enumerate() {
            let Some(thresholds) = moved.step.thresholds() else {
                continue;
            };
            ask.index.push(i as i32);
            ask.currency.push(moved.key.currency.as_str().to_owned());
            ask.field.push(moved.key.field.key().to_owned());
            ask.bank.push(moved.key.bank);
            ask.above_from.push(thresholds.above.0);
            ask.above_to.push(thresholds.above.1);
            ask.below_from.push(thresholds.below.0);
            ask.below_to.push(thresholds.below.1);
            // Alerts made since the watch's last evaluation are read with
            // its first move in the batch only.
            let newest = watches.get(&moved.key).and_then(|w| w.newest);
            ask.unknown
                .push((newest == Some(moved.step.evaluations)).then_some(moved.step.evaluations));
        }
        let moved: Vec<(&WatchKey, &Watch)> = watches.iter().filter(|(_, w)| w.moved).collect();
        let candidates: Vec<(i32, Uuid, String, Decimal, i64)> = sqlx::query_as(&sql.candidates)
            .bind(&ask.index)
            .bind(&ask.currency)
            .bind(&ask.field)
            .bind(&ask.bank)
            .bind(&ask.above_from)
            .bind(&ask.above_to)
            .bind(&ask.below_from)
            .bind(&ask.below_to)
            .bind(&ask.unknown)
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
            .fetch_all(&mut *db)
            .await?;
        let mut fired: BTreeMap<usize, BTreeSet<Uuid>> = BTreeMap::new();
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
                fired.entry(i as usize).or_default().insert(id);
            }
        }

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
            rows.traceparent.push(traces.get(&moved.event_id).cloned());
            for alert in alerts {
                rows.alert_crossing.push(*i as i32);
                rows.alert_id.push(*alert);
                count += 1;
            }
        }
        sqlx::query(&sql.crossed)
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
            .bind(&rows.traceparent)
            .execute(&mut *db)
            .await?;
        Ok(count)
    }
}

/// The moves asked about, as columns.
#[derive(Default)]
struct Columns {
    index: Vec<i32>,
    currency: Vec<String>,
    field: Vec<String>,
    bank: Vec<i64>,
    above_from: Vec<Decimal>,
    above_to: Vec<Decimal>,
    below_from: Vec<Decimal>,
    below_to: Vec<Decimal>,
    /// The `since` of the alerts not known yet, when the watch has any.
    unknown: Vec<Option<i64>>,
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
    traceparent: Vec<Option<String>>,
}
