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

mod breaches;
mod sql;
mod watching;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::judge::{Field, Quote};
use crate::schema::EVALUATION_LOCK;
use breaches::Breaches;
pub use breaches::QualityEvent;
use ratewire_readmodel::quality::OutlierRule;
pub(crate) use sql::record_quality_events;
use sql::Statements;
pub use watching::BankNow;
use watching::Watching;

/// The fold's alert statements for one alerts schema.
#[derive(Debug, Clone)]
pub struct Judge {
    schema: String,
    sql: Statements,
    /// Whether a partition without a position starts one here (the live
    /// fold); a replay never does, or it would judge the whole history.
    seeds: bool,
    /// The spread cap breaches are judged against, while a webhook names
    /// `quality.spread_cap_breached`.
    spread_cap: Option<Decimal>,
    /// How best-rate alerts treat outliers: as best-rates do.
    outliers: OutlierRule,
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
        Self {
            schema: schema.to_owned(),
            seeds: true,
            sql: Statements::new(schema),
            spread_cap: None,
            outliers: OutlierRule::default(),
        }
    }

    /// Leaves outliers out of best-rate alerts by `rule`.
    pub fn with_outliers(self, rule: OutlierRule) -> Self {
        Self {
            outliers: rule,
            ..self
        }
    }

    /// Judges spread-cap breaches against `cap` too.
    pub fn with_spread_cap(self, cap: Decimal) -> Self {
        Self {
            spread_cap: Some(cap),
            ..self
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
        // A replay looks first, without a lock, whether the live fold has
        // evaluated its messages already (positions only grow: a message
        // below one read was evaluated for certain). The live fold is
        // almost always first, so it locks at once.
        if !self.seeds {
            let peeked: BTreeMap<i32, i64> = sqlx::query_as(&self.sql.peek)
                .bind(topic)
                .bind(&partitions)
                .fetch_all(&mut *db)
                .await?
                .into_iter()
                .collect();
            let pending = messages.into_iter().any(|(partition, offset)| {
                peeked.get(&partition).is_some_and(|from| offset >= *from)
            });
            if !pending {
                return Ok(None);
            }
        }
        let mut rows = self.lock(db, topic, &partitions).await?;
        if rows.len() < partitions.len() && self.seeds {
            let starts: Vec<i64> = partitions.iter().map(|p| positions[p]).collect();
            sqlx::query(&self.sql.seed_positions)
                .bind(topic)
                .bind(&partitions)
                .bind(&starts)
                .execute(&mut *db)
                .await?;
            sqlx::query(&self.sql.seed_quotes).execute(&mut *db).await?;
            rows = self.lock(db, topic, &partitions).await?;
        }
        let any_watch = rows.iter().any(|(_, _, any, _)| *any);
        let breach_hooks = rows.iter().any(|(_, _, _, hooks)| *hooks);
        let from = rows.into_iter().map(|(p, n, _, _)| (p, n)).collect();
        let watching = match any_watch {
            true => Some(Watching::load(&self.sql, db, banks).await?),
            false => None,
        };
        let breaches = match (self.spread_cap, breach_hooks) {
            (Some(cap), true) => Some(Breaches::new(cap)),
            _ => None,
        };
        // The banks' stored quotes: read with the watches when there are
        // any (they read the banks' quotes too), else on their own.
        let stored = match &watching {
            Some(watching) => watching.quotes_of(banks),
            None => {
                let ids: Vec<i64> = banks.iter().copied().collect();
                let mut stored: BTreeMap<i64, Vec<Quote>> = BTreeMap::new();
                for (quote, _) in crate::quotes::read(db, &self.sql.quotes, &[], &ids).await? {
                    stored.entry(quote.bank).or_default().push(quote);
                }
                stored
            }
        };
        Ok(Some(Evaluation {
            from,
            watching,
            breaches,
            outliers: self.outliers,
            stored,
            observed: BTreeMap::new(),
            traces: BTreeMap::new(),
        }))
    }

    /// Locks the partitions' rows and, while any watch exists, takes the
    /// evaluation lock: each partition's first unevaluated offset, whether
    /// any watch exists, and whether a webhook names breaches.
    async fn lock(
        &self,
        db: &mut PgConnection,
        topic: &str,
        partitions: &[i32],
    ) -> sqlx::Result<Vec<(i32, i64, bool, bool)>> {
        sqlx::query_as(&self.sql.lock)
            .bind(topic)
            .bind(partitions)
            .bind(EVALUATION_LOCK)
            .fetch_all(db)
            .await
    }
}

/// A batch's evaluation: where each partition's unevaluated messages
/// start, and what it did so far.
#[derive(Debug)]
pub struct Evaluation {
    from: BTreeMap<i32, i64>,
    /// `None`: no watch exists; only the quotes are kept.
    watching: Option<Watching>,
    /// `None`: no webhook names breaches.
    breaches: Option<Breaches>,
    outliers: OutlierRule,
    /// The quotes of the batch's banks as stored before it, then as its
    /// events left them.
    stored: BTreeMap<i64, Vec<Quote>>,
    /// How the batch left each bank it observed: its quotes are stored at
    /// the batch's end.
    observed: BTreeMap<i64, BankNow>,
    /// The fold's trace context of each traced event: its crossings carry
    /// it to their webhook calls.
    traces: BTreeMap<Uuid, String>,
}

impl Evaluation {
    /// Whether the message at `partition`/`offset` is evaluated here.
    pub fn covers(&self, partition: i32, offset: i64) -> bool {
        self.from
            .get(&partition)
            .is_some_and(|from| offset >= *from)
    }

    /// Records the `traceparent` of the span folding `event_id`: the
    /// webhook calls its crossings make continue that trace.
    pub fn traced(&mut self, event_id: Uuid, traceparent: String) {
        self.traces.insert(event_id, traceparent);
    }

    /// Judges the watches an applied event (`event_id`, occurred at
    /// `occurred_at`) moved, as it left its bank. Events that do not
    /// change what alerts compare (reference boards) are not observed.
    pub fn observe(&mut self, event_id: Uuid, occurred_at: DateTime<Utc>, mut now: BankNow) {
        let before = self.stored.remove(&now.bank).unwrap_or_default();
        // Previous values not at hand stand as stored for the same board
        // (a correction, a bank's change): the board before is the same.
        for quote in &mut now.quotes {
            if now.without_previous.contains(&quote.currency) {
                quote.previous = before
                    .iter()
                    .find(|b| b.currency == quote.currency && b.updated_at == quote.updated_at)
                    .map_or([None; 4], |b| b.previous);
            }
        }
        if let Some(watching) = &mut self.watching {
            watching.observe(event_id, occurred_at, &now, self.outliers);
        }
        if let Some(breaches) = &mut self.breaches {
            breaches.observe(event_id, occurred_at, &now, &before);
        }
        self.stored.insert(now.bank, now.quotes.clone());
        self.observed.insert(now.bank, now);
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
        let advance = Advance {
            topic,
            positions: positions.iter().map(|(p, n)| (*p, *n)).unzip(),
        };
        // The positions move with the quotes' statement when there is one.
        if self.observed.is_empty() {
            sqlx::query(&judge.sql.advance)
                .bind(advance.topic)
                .bind(&advance.positions.0)
                .bind(&advance.positions.1)
                .execute(&mut *db)
                .await?;
        } else {
            store_quotes(&judge.sql, db, self.observed.values(), &advance).await?;
        }
        let fired = match self.watching {
            Some(watching) => watching.store(&judge.sql, db, &self.traces).await?,
            None => 0,
        };
        if let Some(breaches) = self.breaches.filter(|b| !b.found.is_empty()) {
            store_quality_events(&judge.sql.quality_events, db, &breaches.found).await?;
        }
        Ok(fired)
    }
}

/// Where the evaluated partitions' positions move: the topic, and each
/// partition's next offset.
struct Advance<'a> {
    topic: &'a str,
    positions: (Vec<i32>, Vec<i64>),
}

/// Stores the banks' quotes as the batch left them: their details, their
/// latest board's rates, and no rate of a currency that board lacks; and
/// moves the positions on.
async fn store_quotes(
    sql: &Statements,
    db: &mut PgConnection,
    banks: impl Iterator<Item = &BankNow>,
    advance: &Advance<'_>,
) -> sqlx::Result<()> {
    let mut ids = Vec::new();
    let mut codes = Vec::new();
    let mut names = Vec::new();
    let mut active = Vec::new();
    let mut q_banks = Vec::new();
    let mut currencies = Vec::new();
    // One column a field, in `Field::ALL` order ($7..$10), and one for
    // each field's previous value ($12..$15).
    let mut fields: [Vec<Option<Decimal>>; 4] = Default::default();
    let mut previous: [Vec<Option<Decimal>>; 4] = Default::default();
    let mut updated = Vec::new();
    for now in banks {
        ids.push(now.bank);
        codes.push(now.code.as_str());
        names.push(now.name.as_str());
        active.push(now.active);
        for quote in &now.quotes {
            q_banks.push(now.bank);
            currencies.push(quote.currency.as_str().to_owned());
            for (column, field) in fields.iter_mut().zip(Field::ALL) {
                column.push(quote.value(field));
            }
            for (column, value) in previous.iter_mut().zip(quote.previous) {
                column.push(value);
            }
            updated.push(quote.updated_at);
        }
    }
    let [cash_buying, cash_selling, transactional_buying, transactional_selling] = fields;
    sqlx::query(&sql.refresh)
        .bind(&ids)
        .bind(&codes)
        .bind(&names)
        .bind(&active)
        .bind(&q_banks)
        .bind(&currencies)
        .bind(&cash_buying)
        .bind(&cash_selling)
        .bind(&transactional_buying)
        .bind(&transactional_selling)
        .bind(&updated)
        .bind(&previous[0])
        .bind(&previous[1])
        .bind(&previous[2])
        .bind(&previous[3])
        .bind(advance.topic)
        .bind(&advance.positions.0)
        .bind(&advance.positions.1)
        .execute(db)
        .await?;
    Ok(())
}

/// Records watchdog events (each once: a second record of an id is
/// dropped).
pub(crate) async fn store_quality_events(
    statement: &str,
    db: &mut PgConnection,
    events: &[QualityEvent],
) -> sqlx::Result<()> {
    let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind).collect();
    let bodies: Vec<&str> = events.iter().map(|e| e.body.as_str()).collect();
    let times: Vec<DateTime<Utc>> = events.iter().map(|e| e.occurred_at).collect();
    sqlx::query(statement)
        .bind(&ids)
        .bind(&kinds)
        .bind(&bodies)
        .bind(&times)
        .execute(db)
        .await?;
    Ok(())
}
