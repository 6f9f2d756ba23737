//! The fold's properties, on random logs (proptest). A log holds what the
//! topic can really hold: banks registered (and again), changed,
//! deactivated and reactivated; boards, often for an as-of already
//! published (corrections) or before the latest (backfills); retractions
//! of any board, of another bank's and of none; reference days and their
//! corrections; boards of a bank never registered; and events that reach
//! the log twice (a producer's retry).
//!
//! - the core keeps the rules, written here again the simplest way;
//! - folded into Postgres in random batches (some delivered twice), all
//!   at once or one event at a time, the read model holds what the core
//!   holds, and answers (latest boards and differences, best rates,
//!   history) as the core's model says;
//! - any regrouping of a log into batches, over partitions folded side by
//!   side, gives the same read model.
//!
//! `PROPTEST_CASES` sets the cases per property (256 by default).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use ratewire_projector::fold::core::{self, Verdict};
use ratewire_projector::fold::model::Model;
use ratewire_projector::fold::{apply_batch_written, apply_lanes, Incoming, Writes};
use ratewire_proto::{
    BankDeactivated, BankId, BankReactivated, BankRegistered, BankUpdated, BoardRetracted,
    CurrencyCode, Decoded, Envelope, Event, Period, ReferenceBoardPublished, ReferenceEntry,
    Schedule, SocialLink,
};
use ratewire_readmodel::quality::OutlierRule;
use ratewire_readmodel::store;
use ratewire_readmodel::views::Field;
use ratewire_service::testing::TestDatabase;
use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

use common::{board, dec, drop_database, dump, empty, entry, fresh_pool, versions};

const TOPIC: &str = "properties";
/// Banks 1 to 4 may be registered; 5 never is.
const BANKS: u8 = 5;
const CODES: [&str; 4] = ["USD", "EUR", "GBP", "CHF"];

/// The first instant of the logs' time.
fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 30, 0, 0, 0).unwrap()
}

/// When every event was received: after every board it carries.
fn received() -> DateTime<Utc> {
    base() + Duration::days(40)
}

#[derive(Debug, Clone)]
struct Rates {
    currency: usize,
    buying: i64,
    spread: i64,
    transactional: bool,
}

#[derive(Debug, Clone)]
enum Op {
    Register(u8),
    Update {
        bank: u8,
        name: bool,
        links: bool,
        /// 0: unchanged, 1: cleared, else set.
        schedule: u8,
    },
    Deactivate(u8),
    Reactivate(u8),
    Board {
        bank: u8,
        hour: u32,
        rates: Vec<Rates>,
        /// Publish the bank's previous rates again instead (stored against
        /// a base): 1 as they were, 2 with one value moved.
        again: u8,
    },
    /// A retraction of the `target`-th board published so far (of its own
    /// bank's when `cross` is off), or of one that never was.
    Retract {
        bank: u8,
        target: usize,
        stray: bool,
    },
    Reference {
        day: u8,
        rates: Vec<(usize, i64)>,
    },
    /// The `n`-th event so far reaches the log again.
    Again(usize),
}

fn rates() -> impl Strategy<Value = Vec<Rates>> {
    prop::collection::vec(
        (0..CODES.len(), 10_000i64..10_050, 0i64..30, any::<bool>()).prop_map(
            |(currency, buying, spread, transactional)| Rates {
                currency,
                buying,
                spread,
                transactional,
            },
        ),
        1..5,
    )
}

fn op() -> impl Strategy<Value = Op> {
    let bank = 1..=BANKS;
    prop_oneof![
        2 => (1..BANKS).prop_map(Op::Register),
        1 => (bank.clone(), any::<bool>(), any::<bool>(), 0u8..3)
            .prop_map(|(bank, name, links, schedule)| Op::Update { bank, name, links, schedule }),
        1 => bank.clone().prop_map(Op::Deactivate),
        1 => bank.clone().prop_map(Op::Reactivate),
        8 => (bank.clone(), 0u32..40, rates(), 0u8..4)
            .prop_map(|(bank, hour, rates, again)| Op::Board { bank, hour, rates, again }),
        2 => (bank, any::<usize>(), prop::bool::weighted(0.2))
            .prop_map(|(bank, target, stray)| Op::Retract { bank, target, stray }),
        1 => (0u8..4, prop::collection::vec((0..CODES.len(), 1i64..500), 1..3))
            .prop_map(|(day, rates)| Op::Reference { day, rates }),
        1 => any::<usize>().prop_map(Op::Again),
    ]
}

/// A log of up to 60 events, registrations first so that most ops act on
/// registered banks.
fn log() -> impl Strategy<Value = Vec<Op>> {
    (
        prop::collection::vec((1..BANKS).prop_map(Op::Register), 2..5),
        prop::collection::vec(op(), 0..56),
    )
        .prop_map(|(mut first, rest)| {
            first.extend(rest);
            first
        })
}

/// The ops as events. `cross` lets a retraction name another bank's board.
fn envelopes(ops: &[Op], cross: bool) -> Vec<Envelope> {
    let mut log: Vec<Envelope> = Vec::new();
    let mut published: Vec<(BankId, Uuid)> = Vec::new();
    let mut previous: BTreeMap<u8, Vec<Rates>> = BTreeMap::new();
    let mut ids = 0u128;
    let mut next_id = || {
        ids += 1;
        Uuid::from_u128(ids)
    };
    for (i, op) in ops.iter().enumerate() {
        let at = |bank: u8| BankId::new(i64::from(bank)).unwrap();
        let (bank, event) = match op {
            Op::Register(bank) => (
                at(*bank),
                Event::BankRegistered(BankRegistered {
                    code: format!("B{bank}"),
                    name: format!("Bank {bank}"),
                    image_url: "https://i.test/b.png".into(),
                    social_links: vec![],
                    schedule: None,
                }),
            ),
            Op::Update {
                bank,
                name,
                links,
                schedule,
            } => (
                at(*bank),
                Event::BankUpdated(BankUpdated {
                    name: name.then(|| format!("Bank {bank}, renamed at {i}")),
                    schedule: match schedule {
                        0 => None,
                        1 => Some(None),
                        _ => Some(Some(Schedule::Every(
                            Period::parse(&format!("PT{}M", 1 + i % 59)).unwrap(),
                        ))),
                    },
                    social_links: links.then(|| {
                        vec![SocialLink {
                            platform: "web".into(),
                            url: format!("https://b{bank}.test/{i}"),
                        }]
                    }),
                    ..BankUpdated::default()
                }),
            ),
            Op::Deactivate(bank) => (
                at(*bank),
                Event::BankDeactivated(BankDeactivated::default()),
            ),
            Op::Reactivate(bank) => (at(*bank), Event::BankReactivated(BankReactivated {})),
            Op::Board {
                bank,
                hour,
                rates,
                again,
            } => {
                let mut rates = match (again, previous.get(bank)) {
                    (1 | 2, Some(before)) => before.clone(),
                    _ => rates.clone(),
                };
                if *again == 2 {
                    rates[0].buying += 1;
                }
                previous.insert(*bank, rates.clone());
                let mut entries = BTreeMap::new();
                for r in &rates {
                    let transactional = r.transactional.then(|| {
                        (
                            dec(r.buying + 1),
                            dec(r.buying + r.spread).max(dec(r.buying + 1)),
                        )
                    });
                    entries.entry(r.currency).or_insert_with(|| {
                        entry(
                            CODES[r.currency],
                            dec(r.buying),
                            dec(r.buying + r.spread),
                            transactional,
                        )
                    });
                }
                let as_of = base() + Duration::hours(i64::from(*hour) * 3);
                let event = Event::BoardPublished(board(as_of, entries.into_values().collect()));
                (at(*bank), event)
            }
            Op::Retract {
                bank,
                target,
                stray,
            } => {
                let candidates: Vec<Uuid> = published
                    .iter()
                    .filter(|(owner, _)| cross || owner.get() == i64::from(*bank))
                    .map(|(_, id)| *id)
                    .collect();
                let board_event_id = match candidates.len() {
                    0 => next_id(),
                    _ if *stray => next_id(),
                    n => candidates[target % n],
                };
                let reason = Some(format!("withdrawn at {i}"));
                let event = Event::BoardRetracted(BoardRetracted {
                    board_event_id,
                    reason,
                });
                (at(*bank), event)
            }
            Op::Reference { day, rates } => {
                let mut entries: BTreeMap<usize, ReferenceEntry> = BTreeMap::new();
                for (currency, cents) in rates {
                    let wire = serde_json::json!({
                        "currency": CODES[*currency],
                        "buying": dec(*cents).to_string(),
                        "selling": dec(*cents + 7).to_string(),
                        "weightedAverage": dec(*cents + 3).to_string(),
                    });
                    entries
                        .entry(*currency)
                        .or_insert_with(|| serde_json::from_value(wire).unwrap());
                }
                let date = base().date_naive() + Duration::days(i64::from(*day));
                let board =
                    ReferenceBoardPublished::new("NBE", date, entries.into_values().collect())
                        .unwrap();
                let envelope = Envelope::reference(received(), board);
                log.push(Envelope {
                    event_id: next_id(),
                    ..envelope
                });
                continue;
            }
            Op::Again(n) => {
                if !log.is_empty() {
                    let again = log[n % log.len()].clone();
                    log.push(again);
                }
                continue;
            }
        };
        let envelope = Envelope {
            event_id: next_id(),
            bank_id: bank,
            occurred_at: received(),
            event,
        };
        if let Event::BoardPublished(_) = envelope.event {
            published.push((bank, envelope.event_id));
        }
        log.push(envelope);
    }
    log
}

/// The log's messages as a producer keyed by bank writes them over
/// `partitions` partitions: each bank's in one, in log order.
fn messages(log: &[Envelope], partitions: i64) -> Vec<Incoming> {
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    log.iter()
        .map(|e| {
            let partition = (e.bank_id.get() % partitions) as i32;
            let offset = next.entry(partition).or_insert(0);
            *offset += 1;
            Incoming::keyed(partition, *offset - 1, e.bank_id, ratewire_proto::encode(e))
        })
        .collect()
}

type Letters = BTreeSet<(Option<Uuid>, String)>;

/// The log folded by the core alone, in log order.
fn folded(messages: &[Incoming]) -> (Model, Letters) {
    let mut model = Model::default();
    let mut refused = Letters::new();
    for message in messages {
        let Ok(Decoded::Event(envelope)) = message.decode() else {
            panic!("the generated log keeps the contract");
        };
        let step = core::apply(&mut model, envelope, message.position());
        if let Verdict::Refused { rule, .. } = step.verdict {
            refused.insert((Some(envelope.event_id), rule.to_owned()));
        }
    }
    (model, refused)
}

/// How a log is cut into batches: each batch's size, and whether it is
/// delivered a second time.
fn batches() -> impl Strategy<Value = Vec<(usize, bool)>> {
    prop::collection::vec((1usize..12, prop::bool::weighted(0.2)), 1..80)
}

/// Folds `messages` into `pool` in `batches`, in `lanes` side by side.
async fn fold(
    pool: &PgPool,
    messages: &[Incoming],
    batches: &[(usize, bool)],
    writes: Writes,
    lanes: usize,
) -> anyhow::Result<()> {
    let mut at = 0;
    let mut cuts = batches.iter().cycle();
    while at < messages.len() {
        let (size, again) = *cuts.next().expect("batches are never empty");
        let end = (at + size).min(messages.len());
        for _ in 0..1 + usize::from(again) {
            let batch = &messages[at..end];
            let outcome = match writes {
                Writes::Together => apply_lanes(pool, TOPIC, batch, &[], None, lanes).await?,
                Writes::OneByOne => apply_batch_written(pool, TOPIC, batch, &[], writes).await?,
            };
            anyhow::ensure!(outcome.gaps.is_empty(), "no gap: {:?}", outcome.gaps);
        }
        at = end;
    }
    Ok(())
}

/// A database of the property's own, emptied for each case.
struct Property {
    runtime: tokio::runtime::Runtime,
    pool: PgPool,
    database: Option<TestDatabase>,
}

impl Property {
    fn new() -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let (pool, database) = runtime.block_on(fresh_pool("rw_props")).unwrap();
        Property {
            runtime,
            pool,
            database: Some(database),
        }
    }

    fn runner(&self) -> TestRunner {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(256);
        TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        })
    }

    /// Runs `case` on an empty read model.
    fn check<F>(&self, case: F) -> Result<(), TestCaseError>
    where
        F: std::future::Future<Output = anyhow::Result<()>>,
    {
        self.runtime
            .block_on(async {
                empty(&self.pool).await?;
                case.await
            })
            .map_err(|e| TestCaseError::fail(format!("{e:#}")))
    }
}

impl Drop for Property {
    fn drop(&mut self) {
        let (pool, database) = (self.pool.clone(), self.database.take());
        if let Some(database) = database {
            let _ = self.runtime.block_on(drop_database(pool, database));
        }
    }
}

#[test]
fn the_core_keeps_the_rules() {
    let mut runner = Property::runner_only();
    runner
        .run(&log(), |ops| {
            let log = envelopes(&ops, true);
            let (model, refused) = folded(&messages(&log, 1));
            let rules = Rules::fold(&log);
            prop_assert_eq!(
                &model
                    .banks
                    .iter()
                    .map(|(id, b)| (id.get(), b.active))
                    .collect::<BTreeMap<_, _>>(),
                &rules.active
            );
            prop_assert_eq!(&boards_of(&model), &rules.boards);
            prop_assert_eq!(&model.first_quoted, &rules.first_quoted);
            prop_assert_eq!(
                &model.retracted.keys().copied().collect::<BTreeSet<_>>(),
                &rules.retracted
            );
            prop_assert_eq!(
                &model.applied.keys().copied().collect::<BTreeSet<_>>(),
                &rules.applied
            );
            prop_assert_eq!(&refused, &rules.refused);
            let days: BTreeMap<_, _> = model
                .reference
                .iter()
                .map(|(key, day)| (key.clone(), day.event_id))
                .collect();
            prop_assert_eq!(&days, &rules.reference);
            Ok(())
        })
        .unwrap();
}

#[test]
fn folding_in_any_batches_at_once_gives_the_core_s_read_model_and_answers() {
    folds_as_the_core(Writes::Together);
}

#[test]
fn folding_one_event_at_a_time_gives_the_core_s_read_model_and_answers() {
    folds_as_the_core(Writes::OneByOne);
}

/// Random logs folded in random batches, written as `writes` says, give
/// the core's read model, and the read model answers as the core says.
fn folds_as_the_core(writes: Writes) {
    let property = Property::new();
    let mut runner = property.runner();
    runner
        .run(&(log(), batches()), |(ops, cuts)| {
            property.check(async {
                let log = envelopes(&ops, true);
                let messages = messages(&log, 1);
                fold(&property.pool, &messages, &cuts, writes, 1).await?;
                let expected = folded(&messages);
                let stored = dump(&property.pool).await?;
                anyhow::ensure!(stored == expected, "{}", difference(&stored, &expected));
                answers_match(&property.pool, &expected.0).await
            })
        })
        .unwrap();
}

#[test]
fn regrouping_a_log_into_other_batches_over_partitions_changes_nothing() {
    let property = Property::new();
    let mut runner = property.runner();
    runner
        .run(&(log(), batches(), batches()), |(ops, one, other)| {
            property.check(async {
                // Partitions are folded side by side, in any order: a
                // retraction names only its own bank's boards (which
                // bank's retraction of another's board is remembered
                // depends on that order).
                let log = envelopes(&ops, false);
                let mut messages = messages(&log, 3);
                // Appended a second apart, in log order: partitions folded
                // side by side then see known-at times in any order.
                for (i, message) in messages.iter_mut().enumerate() {
                    message.timestamp = Some(received() + Duration::seconds(i as i64));
                }
                fold(&property.pool, &messages, &one, Writes::Together, 3).await?;
                let first = dump(&property.pool).await?;
                let first_history = versions(&property.pool).await?;
                empty(&property.pool).await?;
                fold(&property.pool, &messages, &other, Writes::Together, 2).await?;
                let second = dump(&property.pool).await?;
                anyhow::ensure!(first == second, "{}", difference(&second, &first));
                let second_history = versions(&property.pool).await?;
                anyhow::ensure!(
                    first_history == second_history,
                    "the versions differ: {:?}",
                    first_history
                        .iter()
                        .filter(|r| !second_history.contains(r))
                        .chain(second_history.iter().filter(|r| !first_history.contains(r)))
                        .collect::<Vec<_>>()
                );
                let expected = folded(&messages);
                anyhow::ensure!(first == expected, "{}", difference(&first, &expected));
                Ok(())
            })
        })
        .unwrap();
}

impl Property {
    /// A runner for a property that needs no database.
    fn runner_only() -> TestRunner {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(256);
        TestRunner::new(Config {
            cases: cases * 4,
            failure_persistence: None,
            ..Config::default()
        })
    }
}

/// Where two read models differ, table by table.
fn difference(got: &(Model, Letters), expected: &(Model, Letters)) -> String {
    let (g, e) = (&got.0, &expected.0);
    let mut parts = Vec::new();
    macro_rules! compare {
        ($($table:ident),*) => {$(
            if g.$table != e.$table {
                parts.push(format!("{}: got {:?}\nexpected {:?}", stringify!($table), g.$table, e.$table));
            }
        )*};
    }
    compare!(
        applied,
        banks,
        boards,
        first_quoted,
        retracted,
        reference,
        stored
    );
    if got.1 != expected.1 {
        parts.push(format!(
            "dead letters: got {:?}\nexpected {:?}",
            got.1, expected.1
        ));
    }
    parts.join("\n")
}

/// Each board's id and cash values, by bank and as-of.
type Boards = BTreeMap<(i64, DateTime<Utc>), (Uuid, Vec<(String, Decimal, Decimal)>)>;

/// The model's boards as [`Boards`].
fn boards_of(model: &Model) -> Boards {
    model
        .boards
        .iter()
        .map(|((bank, as_of), board)| {
            let quotes = board
                .quotes
                .iter()
                .map(|q| (q.currency.to_string(), q.cash_buying, q.cash_selling))
                .collect();
            ((bank.get(), *as_of), (board.event_id, quotes))
        })
        .collect()
}

/// The rules, written out again the simplest way.
#[derive(Default)]
struct Rules {
    applied: BTreeSet<Uuid>,
    active: BTreeMap<i64, bool>,
    boards: Boards,
    first_quoted: BTreeMap<CurrencyCode, DateTime<Utc>>,
    /// Retracted board ids, with the bank that retracted them first.
    retracted_by: BTreeMap<Uuid, i64>,
    retracted: BTreeSet<Uuid>,
    reference: BTreeMap<(String, NaiveDate), Uuid>,
    refused: Letters,
}

impl Rules {
    fn fold(log: &[Envelope]) -> Rules {
        let mut rules = Rules::default();
        for e in log {
            if rules.applied.contains(&e.event_id) {
                continue;
            }
            let bank = e.bank_id.get();
            let known = rules.active.contains_key(&bank);
            let refuse = |rules: &mut Rules, rule: &str| {
                rules.refused.insert((Some(e.event_id), rule.to_owned()));
            };
            match &e.event {
                Event::BankRegistered(_) if known => {
                    refuse(&mut rules, "bank-registered");
                    continue;
                }
                Event::BankRegistered(_) => {
                    rules.active.insert(bank, true);
                }
                Event::ReferenceBoardPublished(day) => {
                    rules
                        .reference
                        .insert((day.source().to_owned(), day.date()), e.event_id);
                }
                _ if !known => {
                    refuse(&mut rules, "unknown-bank");
                    continue;
                }
                Event::BankDeactivated(_) => {
                    rules.active.insert(bank, false);
                }
                Event::BankReactivated(_) => {
                    rules.active.insert(bank, true);
                }
                Event::BankUpdated(_) => {}
                Event::BoardPublished(board) => {
                    // Retracted by its bank before it was applied: it stays
                    // withdrawn, as if never published.
                    if rules.retracted_by.get(&e.event_id) != Some(&bank) {
                        for rate in board.rates() {
                            let first = rules
                                .first_quoted
                                .entry(rate.currency())
                                .or_insert(board.as_of());
                            *first = (*first).min(board.as_of());
                        }
                        let quotes = board
                            .rates()
                            .iter()
                            .map(|r| {
                                (
                                    r.currency().to_string(),
                                    (r.cash_buying(), r.cash_selling()),
                                )
                            })
                            .collect::<BTreeMap<_, _>>()
                            .into_iter()
                            .map(|(c, (b, s))| (c, b, s))
                            .collect();
                        rules
                            .boards
                            .insert((bank, board.as_of()), (e.event_id, quotes));
                    }
                }
                Event::BoardRetracted(retraction) => {
                    let id = retraction.board_event_id;
                    rules.retracted.insert(id);
                    rules.retracted_by.entry(id).or_insert(bank);
                    rules
                        .boards
                        .retain(|(owner, _), (board, _)| !(*owner == bank && *board == id));
                }
            }
            rules.applied.insert(e.event_id);
        }
        rules
    }
}

/// The read model's answers are what `model` says: each bank's latest
/// board with its previous values, the best rates of each currency across
/// active banks (the rule written out again), and history at instants.
async fn answers_match(pool: &PgPool, model: &Model) -> anyhow::Result<()> {
    let before = |bank: BankId, code: CurrencyCode, at: DateTime<Utc>| {
        model
            .boards_of(bank)
            .rev()
            .filter(|(as_of, _)| *as_of < at)
            .find_map(|(as_of, board)| {
                board
                    .quotes
                    .iter()
                    .find(|q| q.currency == code)
                    .map(|q| (as_of, *q))
            })
    };
    for &bank in model.banks.keys() {
        let latest = store::latest_board(pool, bank).await?;
        let expected = model.latest(bank);
        anyhow::ensure!(
            latest.len() == expected.map_or(0, |(_, b)| b.quotes.len()),
            "bank {bank}: board size"
        );
        for rate in &latest {
            let (as_of, board) = expected.expect("a board");
            let quote = board
                .quotes
                .iter()
                .find(|q| q.currency == rate.currency)
                .expect("the currency is on the board");
            anyhow::ensure!(rate.updated_at == as_of, "bank {bank}: as-of");
            anyhow::ensure!(
                (
                    rate.cash_buying,
                    rate.cash_selling,
                    rate.transactional_buying,
                    rate.transactional_selling
                ) == (
                    quote.cash_buying,
                    quote.cash_selling,
                    quote.transactional_buying,
                    quote.transactional_selling
                ),
                "bank {bank} {}: values",
                rate.currency
            );
            let previous = before(bank, rate.currency, as_of).map(|(_, q)| {
                (
                    q.cash_buying,
                    q.cash_selling,
                    q.transactional_buying,
                    q.transactional_selling,
                )
            });
            let got = rate.previous.as_ref().map(|p| {
                (
                    p.cash_buying,
                    p.cash_selling,
                    p.transactional_buying,
                    p.transactional_selling,
                )
            });
            anyhow::ensure!(
                got == previous,
                "bank {bank} {}: previous values",
                rate.currency
            );
        }
    }
    let now = received();
    for code in CODES.map(|c| CurrencyCode::parse(c).unwrap()) {
        let best = store::best_rates(
            pool,
            code,
            now,
            OutlierRule {
                in_best: true,
                ..OutlierRule::default()
            },
        )
        .await?;
        let quoting: Vec<(
            BankId,
            DateTime<Utc>,
            ratewire_projector::fold::model::Quote,
        )> = model
            .banks
            .iter()
            .filter(|(_, b)| b.active)
            .filter_map(|(id, _)| {
                let (as_of, board) = model.latest(*id)?;
                let quote = board.quotes.iter().find(|q| q.currency == code)?;
                Some((*id, as_of, *quote))
            })
            .collect();
        let Some(best) = best else {
            anyhow::ensure!(quoting.is_empty(), "{code}: nobody quotes it, yet some do");
            continue;
        };
        for (field, entry) in Field::ALL.iter().zip(best.iter()) {
            let mut winner: Option<(Decimal, DateTime<Utc>, BankId)> = None;
            for (bank, as_of, q) in &quoting {
                let value = match field {
                    Field::CashBuying => Some(q.cash_buying),
                    Field::CashSelling => Some(q.cash_selling),
                    Field::TransactionalBuying => q.transactional_buying,
                    Field::TransactionalSelling => q.transactional_selling,
                };
                let Some(value) = value else { continue };
                let better = match winner {
                    None => true,
                    Some((w, wt, wb)) => {
                        let by_value = if field.higher_is_better() {
                            value > w
                        } else {
                            value < w
                        };
                        by_value || (value == w && (*as_of < wt || (*as_of == wt && *bank < wb)))
                    }
                };
                if better {
                    winner = Some((value, *as_of, *bank));
                }
            }
            match (entry, winner) {
                (None, None) => {}
                (Some(entry), Some((value, as_of, bank))) => anyhow::ensure!(
                    (entry.bank.id, entry.price, entry.updated_at) == (bank, value, as_of),
                    "{code} {field:?}: best"
                ),
                (entry, winner) => {
                    anyhow::bail!("{code} {field:?}: got {entry:?}, expected {winner:?}")
                }
            }
        }
    }
    // History: the record in force before instants across the log's time.
    for bank in 1..BANKS {
        let bank = BankId::new(i64::from(bank)).unwrap();
        for code in CODES.map(|c| CurrencyCode::parse(c).unwrap()) {
            for hours in (0..130).step_by(13) {
                let at = base() + Duration::hours(hours);
                let got = store::history(pool, bank, code, at).await?;
                let expected = before(bank, code, at);
                anyhow::ensure!(
                    got.map(|r| (r.as_of, r.cash_buying, r.cash_selling))
                        == expected.map(|(as_of, q)| (as_of, q.cash_buying, q.cash_selling)),
                    "history of bank {bank} {code} before {at}"
                );
            }
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_busy_bank_s_series_is_evened_out_to_at_most_100_points() -> anyhow::Result<()> {
    use chrono::SubsecRound;
    let (pool, name) = fresh_pool("rw_fold").await?;
    let bank = BankId::new(1).unwrap();
    let now = Utc::now().trunc_subsecs(0);
    let mut log = vec![Envelope::new(
        bank,
        now,
        Event::BankRegistered(BankRegistered {
            code: "B1".into(),
            name: "Bank 1".into(),
            image_url: "https://i.test/b.png".into(),
            social_links: vec![],
            schedule: None,
        }),
    )];
    // 400 boards, one every 2 hours: 33 days, more than the window holds.
    for i in 0..400i64 {
        let as_of = now - Duration::hours(2 * (399 - i));
        log.push(Envelope::new(
            bank,
            as_of,
            Event::BoardPublished(board(
                as_of,
                vec![entry("USD", dec(10_000 + i), dec(20_000), None)],
            )),
        ));
    }
    let messages = common::messages(&log);
    ratewire_projector::fold::apply_batch(&pool, TOPIC, &messages, &[], None).await?;

    let usd = CurrencyCode::parse("USD").unwrap();
    let series = store::series(&pool, bank, usd, Field::CashBuying.column(), now).await?;
    assert!(
        series.len() <= store::SERIES_POINTS as usize && series.len() >= 90,
        "{} points",
        series.len()
    );
    assert!(series.windows(2).all(|w| w[0].0 < w[1].0), "oldest first");
    assert!(
        series[0].0 > now - Duration::days(30),
        "only the last 30 days"
    );
    assert_eq!(
        series.last(),
        Some(&(now, dec(10_399))),
        "ends at the current value"
    );
    drop_database(pool, name).await
}

/// The rows of a model a reader sees as known at an instant: banks,
/// boards with their rates, the currencies quoted, and reference days
/// (applied ids, retractions remembered and first-quote times are the
/// fold's own bookkeeping, not history).
fn seen(model: &Model) -> impl PartialEq + std::fmt::Debug + '_ {
    (
        &model.banks,
        &model.boards,
        model.first_quoted.keys().collect::<Vec<_>>(),
        &model.reference,
    )
}

/// As known at each event's known-at time, the read model is the core's
/// fold of the log up to that event: events, corrections and retractions
/// known later are absent, whatever the batches were.
#[test]
fn as_known_at_each_event_the_read_model_is_the_fold_of_the_log_so_far() {
    let property = Property::new();
    let mut runner = property.runner();
    runner
        .run(&(log(), batches()), |(ops, cuts)| {
            property.check(async {
                let log = envelopes(&ops, true);
                let mut messages = messages(&log, 1);
                // A second apart on the log, as the broker stamps them.
                for (i, message) in messages.iter_mut().enumerate() {
                    message.timestamp = Some(received() + Duration::seconds(i as i64));
                }
                fold(&property.pool, &messages, &cuts, Writes::Together, 1).await?;
                // One connection, so the setting holds for every read.
                let reader = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(1)
                    .connect_with(property.pool.connect_options().as_ref().clone())
                    .await?;
                for (i, message) in messages.iter().enumerate() {
                    let at = message.timestamp.expect("stamped above");
                    sqlx::query("SELECT set_config('ratewire.known_at', $1, false)")
                        .bind(at.to_rfc3339())
                        .execute(&reader)
                        .await?;
                    let (stored, _) = dump(&reader).await?;
                    let (expected, _) = folded(&messages[..=i]);
                    // Each bank's latest board, as readers find it.
                    for bank in expected.banks.keys() {
                        let latest: Option<DateTime<Utc>> = sqlx::query_scalar(
                            "SELECT as_of FROM bank_latest WHERE bank_id = $1
                             ORDER BY known_from DESC LIMIT 1",
                        )
                        .bind(bank.get())
                        .fetch_optional(&reader)
                        .await?
                        .flatten();
                        let wanted = expected.latest(*bank).map(|(as_of, _)| as_of);
                        anyhow::ensure!(
                            latest == wanted,
                            "as known at event {i}, bank {bank}'s latest: {latest:?}, not {wanted:?}"
                        );
                    }
                    anyhow::ensure!(
                        seen(&stored) == seen(&expected),
                        "as known at event {i}: {}",
                        difference(
                            &(stored.clone(), Letters::new()),
                            &(expected.clone(), Letters::new())
                        )
                    );
                }
                reader.close().await;
                Ok(())
            })
        })
        .unwrap();
}
