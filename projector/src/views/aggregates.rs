//! The views over all banks (/currencies, best rates), kept up to date
//! board by board. The all-banks lists are joined by the API from the
//! banks' elements (`ratewire_api::views::lists`).
//!
//! A task of their own keeps every active bank's current board in memory
//! (`Boards`). The bank-views task hands it each bank view it has just
//! written to Redis, with the currencies whose history the fold changed
//! behind the latest boards (backfills, retractions); the task then
//! recomputes only what those touch: the best rates of the currencies on
//! the bank's old and new board, picked from memory, with the best quotes'
//! series (the [`SeriesCache`] reads only rows written since it last read),
//! and the /currencies counts, also from memory.
//!
//! Other projectors fold other partitions, so other banks: before each
//! recomputation the task compares the version each active bank's views
//! were last written at in Redis, by anyone, with the version of the board
//! it holds, and reads the banks that differ again (one Redis round trip
//! for the comparison). Everything is read in full again on a rebuild, on a
//! generation switch, after a failure, and every [`RESYNC_EVERY`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use chrono::Utc;
use ratewire_proto::{BankId, CurrencyCode};
use sqlx::{PgConnection, PgPool};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::error::Result;
use crate::metrics as report;
use crate::views::redis::Target;
use crate::views::redis::{Rendered, ViewUpdate};
use crate::views::series_cache::{SeriesCache, SeriesKey};
use ratewire_readmodel::quality::OutlierRule;
use ratewire_readmodel::store::{self, Version};
use ratewire_readmodel::views::{self, BankInfo, BankView, BestEntry, Field, RateView, ViewStyle};

/// How often the boards in memory are read again in full from Postgres.
pub const RESYNC_EVERY: Duration = Duration::from_secs(60);

/// How soon failed work is tried again when nothing new arrives.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Work for the task.
pub enum Work {
    /// Bank views written to Redis, read at `version` (`None`: the bank is
    /// gone), and currencies whose history changed.
    Banks {
        target: Target,
        version: Version,
        banks: Vec<(BankId, Option<BankView>)>,
        currencies: Vec<CurrencyCode>,
        /// The `occurredAt` of the events behind them (for
        /// `ratewire_projector_aggregates_delay_seconds`).
        occurred: Vec<chrono::DateTime<Utc>>,
    },
    /// Currencies whose history changed with no bank view to write (a
    /// backfill behind the latest boards).
    Currencies {
        target: Target,
        currencies: Vec<CurrencyCode>,
    },
    /// Read every board again and recompute everything.
    Resync { target: Target },
}

impl Work {
    fn target(&self) -> &Target {
        match self {
            Work::Banks { target, .. }
            | Work::Currencies { target, .. }
            | Work::Resync { target } => target,
        }
    }
}

/// The task's handle: sending never waits.
#[derive(Clone)]
pub struct Aggregates {
    work: mpsc::UnboundedSender<Work>,
}

impl Aggregates {
    pub fn spawn(shutdown: CancellationToken) -> Self {
        let (work, inbox) = mpsc::unbounded_channel();
        tokio::spawn(run(inbox, shutdown));
        Self { work }
    }

    pub fn send(&self, work: Work) {
        let _ = self.work.send(work);
    }
}

/// Every active bank's current board, as of the newest snapshot read.
#[derive(Default)]
struct Boards {
    generation: String,
    banks: BTreeMap<BankId, (Version, BankView)>,
    /// The newest snapshot any of them was read in: what an update made
    /// of them is written as. Each bank view is read after the commit that
    /// changed it, so a later change always comes with a later version and
    /// lands over an update that missed it.
    newest: Option<Version>,
}

impl Boards {
    /// Takes in `view` of `id` unless what is held was read later; returns
    /// the currencies on the board it replaced and on the new one.
    fn take(
        &mut self,
        id: BankId,
        version: Version,
        view: Option<BankView>,
    ) -> BTreeSet<CurrencyCode> {
        self.newest = self.newest.max(Some(version));
        if self.banks.get(&id).is_some_and(|(held, _)| *held > version) {
            return BTreeSet::new();
        }
        let mut touched: BTreeSet<CurrencyCode> = BTreeSet::new();
        if let Some((_, old)) = self.banks.remove(&id) {
            touched.extend(old.rates.iter().map(|r| r.currency));
        }
        if let Some(view) = view.filter(|v| v.bank.active) {
            touched.extend(view.rates.iter().map(|r| r.currency));
            self.banks.insert(id, (version, view));
        }
        touched
    }

    /// Each of `codes`' quotes by the active banks, in bank id order (as
    /// [`store::quotes_of`] reads them).
    fn quotes(&self, codes: &BTreeSet<CurrencyCode>) -> HashMap<CurrencyCode, Quotes> {
        let mut quotes: HashMap<CurrencyCode, Quotes> = HashMap::new();
        for (_, view) in self.banks.values() {
            for rate in view.rates.iter().filter(|r| codes.contains(&r.currency)) {
                quotes
                    .entry(rate.currency)
                    .or_default()
                    .push((view.bank.clone(), rate.clone()));
            }
        }
        quotes
    }

    /// How many active banks quote each currency (as
    /// [`store::currency_counts`] counts them).
    fn counts(&self) -> Vec<(CurrencyCode, i64)> {
        let mut counts: BTreeMap<CurrencyCode, i64> = BTreeMap::new();
        for (_, view) in self.banks.values() {
            for rate in &view.rates {
                *counts.entry(rate.currency).or_default() += 1;
            }
        }
        counts.into_iter().collect()
    }

    fn currencies(&self) -> BTreeSet<CurrencyCode> {
        self.banks
            .values()
            .flat_map(|(_, v)| v.rates.iter().map(|r| r.currency))
            .collect()
    }
}

type Quotes = Vec<(BankInfo, RateView)>;

/// What waits to be done, for one generation.
struct Pending {
    target: Target,
    banks: Vec<(BankId, Version, Option<BankView>)>,
    currencies: BTreeSet<CurrencyCode>,
    resync: bool,
    /// The last try failed: the next waits [`RETRY_AFTER`] for new work.
    failed: bool,
    occurred: Vec<chrono::DateTime<Utc>>,
}

/// Most events remembered for the delay while the work waits; beyond it
/// the delay is known well enough from the ones kept.
const OCCURRED_KEPT: usize = 100_000;

impl Pending {
    fn new(target: Target) -> Self {
        Self {
            target,
            banks: Vec::new(),
            currencies: BTreeSet::new(),
            resync: false,
            failed: false,
            occurred: Vec::new(),
        }
    }

    fn add(&mut self, work: Work) {
        match work {
            Work::Banks {
                version,
                banks,
                currencies,
                occurred,
                ..
            } => {
                let room = OCCURRED_KEPT.saturating_sub(self.occurred.len());
                self.occurred.extend(occurred.into_iter().take(room));
                self.banks
                    .extend(banks.into_iter().map(|(id, view)| (id, version, view)));
                self.currencies.extend(currencies);
            }
            Work::Currencies { currencies, .. } => self.currencies.extend(currencies),
            Work::Resync { .. } => self.resync = true,
        }
    }
}

async fn run(mut inbox: mpsc::UnboundedReceiver<Work>, shutdown: CancellationToken) {
    let mut boards = Boards::default();
    let mut cache = SeriesCache::default();
    let mut pending: Option<Pending> = None;
    let mut resynced = Instant::now();
    loop {
        // Nothing waits: wait for work. Failed work: wait for more, or try
        // again after a while. Anything else is done at once.
        let next = if pending.as_ref().is_some_and(|p| !p.failed) {
            None
        } else {
            let failed = pending.is_some();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                work = inbox.recv() => match work {
                    Some(work) => Some(work),
                    None => return,
                },
                _ = tokio::time::sleep(RETRY_AFTER), if failed => None,
            }
        };
        // Everything that waited is done at once.
        for work in next
            .into_iter()
            .chain(std::iter::from_fn(|| inbox.try_recv().ok()))
        {
            let same = pending
                .as_ref()
                .is_some_and(|p| p.target.generation == work.target().generation);
            if !same {
                // Another generation's work replaces the old one's.
                pending = Some(Pending::new(work.target().clone()));
            }
            if let Some(pending) = pending.as_mut() {
                pending.add(work);
            }
        }
        let Some(mut work) = pending.take() else {
            continue;
        };
        if resynced.elapsed() >= RESYNC_EVERY {
            work.resync = true;
        }
        let started = Instant::now();
        match recompute(&mut boards, &mut cache, &mut work).await {
            Ok((resync, behind)) => {
                report::aggregated(&work.occurred, Utc::now());
                if resync {
                    resynced = Instant::now();
                }
                if behind {
                    // Bank views were written while this round ran: another
                    // round, after taking in what this projector queued.
                    pending = Some(Pending::new(work.target));
                }
                debug!(
                    ms = started.elapsed().as_secs_f64() * 1e3,
                    resync, behind, "views over all banks recomputed"
                );
            }
            Err(e) => {
                report::view_error(&e);
                warn!(error = %e, "views over all banks not recomputed; will retry");
                // What was taken in may not have reached Redis: read all.
                work.resync = true;
                work.failed = true;
                pending = Some(work);
            }
        }
    }
}

/// Brings `boards` up to date with `work` and writes what changed; says
/// whether everything was read again, and whether bank views were written
/// meanwhile (another round is due).
///
/// Best rates and /currencies are written whatever version Redis holds
/// (the last writer wins), and each writer checks afterwards for bank
/// views written meanwhile, by anyone, and writes again if there were:
/// every bank view is written before its projector recomputes, so the last
/// write is always made from every board (this projector's own views
/// written meanwhile come through its inbox before the next round reads
/// anything). Gating these writes by snapshot
/// version, as the bank views are, let a projector's write that missed a
/// board another projector had just folded stand over that projector's
/// correct one.
async fn recompute(
    boards: &mut Boards,
    cache: &mut SeriesCache,
    work: &mut Pending,
) -> Result<(bool, bool)> {
    let target = &work.target;
    let mut stage = Stage::start();
    let resync = work.resync || boards.generation != target.generation || boards.newest.is_none();
    let mut touched: BTreeSet<CurrencyCode> = work.currencies.clone();
    if resync {
        let (version, read_boards) = read_all(&target.pool).await?;
        // Every currency quoted before or now, and any ever known: the
        // best rates of one nobody quotes any more are removed.
        touched.extend(boards.currencies());
        touched.extend(store::known_currencies(&target.pool).await?);
        if boards.generation != target.generation {
            boards.generation.clone_from(&target.generation);
            boards.newest = None;
        }
        boards.banks = read_boards;
        boards.newest = boards.newest.max(Some(version));
        for (id, version, view) in std::mem::take(&mut work.banks) {
            boards.take(id, version, view);
        }
    } else {
        for (id, version, view) in std::mem::take(&mut work.banks) {
            touched.extend(boards.take(id, version, view));
        }
        let stale = stale_banks(boards, target).await?;
        touched.extend(read_again(boards, target, &stale).await?);
    }
    stage.done(if resync { "resync" } else { "catch_up" });
    write(boards, cache, target, touched, &mut stage).await?;
    // Checked after the write: a bank view written before this write and
    // missed by it is seen here, and written by the next round.
    let behind = !stale_banks(boards, target).await?.is_empty();
    stage.done("check");
    Ok((resync, behind))
}

/// The banks whose views were written since `boards` read them, by
/// anyone, compared by each active bank's version in Redis (one round
/// trip), with the version written.
async fn stale_banks(boards: &Boards, target: &Target) -> Result<Vec<(BankId, Option<Version>)>> {
    let mut views = target.views.clone();
    let written = views.bank_versions().await?;
    let listed: BTreeSet<BankId> = written.iter().map(|(id, _)| *id).collect();
    let mut stale: Vec<(BankId, Option<Version>)> = written
        .into_iter()
        .filter(|(id, version)| {
            boards
                .banks
                .get(id)
                .is_none_or(|(held, _)| version.is_some_and(|v| v > *held))
        })
        .collect();
    stale.extend(
        boards
            .banks
            .keys()
            .filter(|id| !listed.contains(id))
            .map(|id| (*id, None)),
    );
    Ok(stale)
}

/// Reads `stale` banks again (their partitions are folded elsewhere, or an
/// operator command wrote them); returns the currencies they touched. Each
/// is then held at least at the version Redis showed, so a version that no
/// read can reach (a Postgres restored from a backup) is not read forever.
async fn read_again(
    boards: &mut Boards,
    target: &Target,
    stale: &[(BankId, Option<Version>)],
) -> Result<BTreeSet<CurrencyCode>> {
    let ids: Vec<BankId> = stale.iter().map(|(id, _)| *id).collect();
    let shown: HashMap<BankId, Version> = stale
        .iter()
        .filter_map(|(id, v)| v.map(|v| (*id, v)))
        .collect();
    let mut touched = BTreeSet::new();
    for update in ViewUpdate::load_banks(&target.pool, &ids).await? {
        for (id, view) in update.banks {
            let version = shown
                .get(&id)
                .map_or(update.version, |v| (*v).max(update.version));
            touched.extend(boards.take(id, version, view));
        }
    }
    Ok(touched)
}

/// Writes /currencies and the best rates of `touched` from `boards`.
async fn write(
    boards: &Boards,
    cache: &mut SeriesCache,
    target: &Target,
    touched: BTreeSet<CurrencyCode>,
    stage: &mut Stage,
) -> Result<()> {
    let Some(version) = boards.newest else {
        return Ok(());
    };
    let style = target.views.style();
    let mut update = ViewUpdate::at(version);
    update.forced = true;
    update.currencies = Some(Rendered::new(views::currencies_response(
        &boards.counts(),
        style,
    )));
    let quotes = boards.quotes(&touched);
    let codes: Vec<CurrencyCode> = touched.into_iter().collect();
    let mut tx = store::begin_snapshot(&target.pool).await?;
    render_best(
        &mut tx,
        &target.generation,
        &codes,
        &quotes,
        style.outliers,
        cache,
        &mut update,
    )
    .await?;
    tx.commit().await?;
    stage.done("render");
    let mut views = target.views.clone();
    views.apply(&update).await?;
    stage.done("write");
    Ok(())
}

/// Times the stages of a round, into
/// `ratewire_projector_aggregates_stage_seconds{stage}`: `catch_up` (or
/// `resync`: boards read again), `render` (series read, best rates and
/// /currencies rendered), `write` (to Redis), `check` (for bank views
/// written meanwhile).
struct Stage(Instant);

impl Stage {
    fn start() -> Self {
        Self(Instant::now())
    }

    fn done(&mut self, stage: &'static str) {
        let took = self.0.elapsed();
        tracing::trace!(stage, ms = took.as_secs_f64() * 1e3, "stage done");
        report::aggregates_stage(stage, took);
        self.0 = Instant::now();
    }
}

/// Every active bank's view, in one snapshot, and its version.
async fn read_all(pool: &PgPool) -> Result<(Version, BTreeMap<BankId, (Version, BankView)>)> {
    let ids = store::active_bank_ids(pool).await?;
    let mut banks = BTreeMap::new();
    let mut newest = None;
    for update in ViewUpdate::load_banks(pool, &ids).await? {
        newest = newest.max(Some(update.version));
        for (id, view) in update.banks {
            if let Some(view) = view.filter(|v| v.bank.active) {
                banks.insert(id, (update.version, view));
            }
        }
    }
    let version = match newest {
        Some(version) => version,
        None => Version::of(&mut *store::begin_snapshot(pool).await?).await?,
    };
    Ok((version, banks))
}

/// Renders the best rates of `codes` from their `quotes` into `update`
/// (removing those nobody quotes), reading the best quotes' series in `db`.
async fn render_best(
    db: &mut PgConnection,
    generation: &str,
    codes: &[CurrencyCode],
    quotes: &HashMap<CurrencyCode, Quotes>,
    outliers: OutlierRule,
    cache: &mut SeriesCache,
    update: &mut ViewUpdate,
) -> Result<()> {
    let now = Utc::now();
    let picks: Vec<(CurrencyCode, [Option<usize>; 4])> = codes
        .iter()
        .map(|code| {
            let picks = quotes.get(code).map(|q| store::best_picks(q, outliers));
            (*code, picks.unwrap_or_default())
        })
        .collect();
    let mut wanted: Vec<SeriesKey> = Vec::new();
    for (code, picks) in &picks {
        for (field, pick) in Field::ALL.into_iter().zip(picks) {
            if let Some(i) = pick {
                wanted.push((quotes[code][*i].0.id, *code, field));
            }
        }
    }
    let mut series = cache.series(db, generation, &wanted, now).await?;
    tracing::trace!(stats = ?cache.stats(), "series found");
    for (code, picks) in picks {
        let Some(quotes) = quotes.get(&code).filter(|q| !q.is_empty()) else {
            update.best.push((code, None));
            continue;
        };
        let entries: [Option<BestEntry>; 4] = std::array::from_fn(|f| {
            let field = Field::ALL[f];
            picks[f].map(|i| {
                let quote = &quotes[i];
                let points = series
                    .remove(&(quote.0.id, code, field))
                    .unwrap_or_default();
                store::best_entry(field, quote, points)
            })
        });
        let (body, digest) = views::best_rates_fingerprinted(&entries, now);
        update.best.push((code, Some(Rendered { body, digest })));
    }
    Ok(())
}

/// Reads and renders /currencies and the best rates of `currencies` from
/// Postgres, in one snapshot (a rebuild, a re-driven dead letter),
/// carrying forward the series `cache` keeps.
pub async fn load(
    pool: &PgPool,
    generation: &str,
    currencies: &[CurrencyCode],
    style: &ViewStyle,
    cache: &mut SeriesCache,
) -> Result<ViewUpdate> {
    // One snapshot throughout: the series cache relies on it.
    let mut tx = store::begin_snapshot(pool).await?;
    let mut update = ViewUpdate::at(Version::of(&mut tx).await?);
    update.currencies = Some(Rendered::new(views::currencies_response(
        &store::currency_counts(&mut *tx).await?,
        style,
    )));
    let quotes = store::quotes_of(&mut *tx, currencies).await?;
    let outliers = style.outliers;
    render_best(
        &mut tx,
        generation,
        currencies,
        &quotes,
        outliers,
        cache,
        &mut update,
    )
    .await?;
    tx.commit().await?;
    Ok(update)
}
