//! Folds random event sequences into a real Postgres and checks the read
//! model against a reference computed here from the same events: latest
//! boards with their differences, best rates and history.
//!
//! The sequences include what the log can really hold: producer retries
//! (the same event id twice), redelivered offsets, backfilled boards older
//! than the latest, boards re-published for the same as-of time, banks
//! deactivated and reactivated, and boards of a bank that was never
//! registered (dead-lettered, while the boards around them are applied).

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use chrono::{DateTime, Duration, SubsecRound, TimeZone, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ratewire_projector::fold::{apply_batch, apply_lanes, Incoming};
use ratewire_proto::{
    BankDeactivated, BankId, BankReactivated, BankRegistered, BoardPublished, BoardRetracted,
    CurrencyCode, Envelope, Event,
};
use ratewire_readmodel::store;
use ratewire_readmodel::views::{pick_best, Candidate, Field};
use rust_decimal::Decimal;

mod common;
use common::{board, dec, drop_database, entry, fresh_pool, messages};

const TOPIC: &str = "reference";
/// A bank no event registers: its boards break the read model's rule.
const UNREGISTERED: i64 = 9;
const CODES: [&str; 3] = ["USD", "EUR", "GBP"];

type Values = (Decimal, Decimal, Option<Decimal>, Option<Decimal>);

/// What the read model should be, kept the simplest way.
#[derive(Default)]
struct Reference {
    active: BTreeMap<i64, bool>,
    /// (bank, as_of) -> currency -> values; a re-published as-of replaces.
    boards: BTreeMap<(i64, DateTime<Utc>), BTreeMap<String, Values>>,
    /// The event id of each stored board.
    board_ids: BTreeMap<(i64, DateTime<Utc>), uuid::Uuid>,
    seen: BTreeSet<uuid::Uuid>,
}

impl Reference {
    fn apply(&mut self, envelope: &Envelope) {
        if !self.seen.insert(envelope.event_id) {
            return;
        }
        let bank = envelope.bank_id.get();
        if bank == UNREGISTERED {
            return;
        }
        match &envelope.event {
            Event::BankRegistered(_) | Event::BankReactivated(_) => {
                self.active.insert(bank, true);
            }
            Event::BankDeactivated(_) => {
                self.active.insert(bank, false);
            }
            Event::BankUpdated(_) | Event::ReferenceBoardPublished(_) => {}
            Event::BoardPublished(board) => {
                let rates = board
                    .rates()
                    .iter()
                    .map(|r| {
                        (
                            r.currency().to_string(),
                            (
                                r.cash_buying(),
                                r.cash_selling(),
                                r.transactional_buying(),
                                r.transactional_selling(),
                            ),
                        )
                    })
                    .collect();
                self.boards.insert((bank, board.as_of()), rates);
                self.board_ids
                    .insert((bank, board.as_of()), envelope.event_id);
            }
            Event::BoardRetracted(retraction) => {
                // Only a stored board of the same bank goes.
                let stored = self
                    .board_ids
                    .iter()
                    .find(|((b, _), id)| *b == bank && **id == retraction.board_event_id)
                    .map(|(key, _)| *key);
                if let Some(key) = stored {
                    self.boards.remove(&key);
                    self.board_ids.remove(&key);
                }
            }
        }
    }

    fn latest(&self, bank: i64) -> Option<(DateTime<Utc>, &BTreeMap<String, Values>)> {
        self.boards
            .range((bank, DateTime::<Utc>::MIN_UTC)..=(bank, DateTime::<Utc>::MAX_UTC))
            .next_back()
            .map(|((_, t), b)| (*t, b))
    }

    /// The bank's last value of `code` strictly before `before`.
    fn before(
        &self,
        bank: i64,
        code: &str,
        before: DateTime<Utc>,
    ) -> Option<(DateTime<Utc>, Values)> {
        self.boards
            .range((bank, DateTime::<Utc>::MIN_UTC)..(bank, before))
            .rev()
            .find_map(|((_, t), board)| board.get(code).map(|v| (*t, *v)))
    }
}

fn random_board(rng: &mut StdRng, as_of: DateTime<Utc>) -> BoardPublished {
    let mut rates = vec![];
    for code in CODES {
        if rng.gen_bool(0.8) || rates.is_empty() {
            let buying = rng.gen_range(10_000..10_050);
            let selling = buying + rng.gen_range(0..30);
            let transactional = rng
                .gen_bool(0.5)
                .then(|| (dec(buying + 1), dec(selling - 1).max(dec(buying + 1))));
            rates.push(entry(code, dec(buying), dec(selling), transactional));
        }
    }
    board(as_of, rates)
}

/// The log's messages as a producer keyed by bank writes them over
/// `partitions` partitions: each bank's in one, in log order.
fn partitioned(log: &[Envelope], partitions: i64) -> Vec<Incoming> {
    let mut next: BTreeMap<i64, i64> = BTreeMap::new();
    log.iter()
        .map(|e| {
            let partition = e.bank_id.get() % partitions;
            let offset = next.entry(partition).or_insert(0);
            *offset += 1;
            Incoming::keyed(
                partition as i32,
                *offset - 1,
                e.bank_id,
                ratewire_proto::encode(e),
            )
        })
        .collect()
}

/// A random log: the events in order, with retries and redeliveries mixed in.
fn random_log(seed: u64) -> Vec<Envelope> {
    let mut rng = StdRng::seed_from_u64(seed);
    let start = Utc::now().trunc_subsecs(0) - Duration::days(20);
    // Every event received now: the boards are dated in the past.
    let received = Utc::now();
    let banks: Vec<i64> = (1..=4).collect();
    let mut log = vec![];
    for bank in &banks {
        log.push(Envelope::new(
            BankId::new(*bank).unwrap(),
            start,
            Event::BankRegistered(BankRegistered {
                code: format!("B{bank}"),
                name: format!("Bank {bank}"),
                image_url: "https://i.test/b.png".into(),
                social_links: vec![],
            }),
        ));
    }
    let mut published: Vec<(BankId, uuid::Uuid)> = vec![];
    for step in 0..120 {
        let bank = BankId::new(banks[rng.gen_range(0..banks.len())]).unwrap();
        let id = uuid::Uuid::now_v7();
        let event = match rng.gen_range(0..100) {
            0..=3 => Event::BankDeactivated(BankDeactivated::default()),
            4..=9 => Event::BankReactivated(BankReactivated {}),
            10..=12 => {
                log.push(Envelope {
                    event_id: id,
                    bank_id: BankId::new(UNREGISTERED).unwrap(),
                    occurred_at: received,
                    event: Event::BoardPublished(random_board(
                        &mut rng,
                        start + Duration::hours(step as i64 * 3),
                    )),
                });
                continue;
            }
            13..=18 if !published.is_empty() => {
                // A correction: mostly one of this bank's boards, now and
                // then another bank's or one that never was (no-ops).
                let (owner, board) = published[rng.gen_range(0..published.len())];
                let board_event_id = match rng.gen_range(0..10) {
                    0 => uuid::Uuid::now_v7(),
                    _ => board,
                };
                let bank = if rng.gen_bool(0.8) { owner } else { bank };
                let envelope = Envelope {
                    event_id: id,
                    bank_id: bank,
                    occurred_at: received,
                    event: Event::BoardRetracted(BoardRetracted {
                        board_event_id,
                        reason: None,
                    }),
                };
                log.push(envelope);
                continue;
            }
            _ => {
                // Mostly moving forward in time, sometimes a backfill, and
                // sometimes exactly an earlier as-of again.
                let hours = match rng.gen_range(0..10) {
                    0 => rng.gen_range(0..step + 1),
                    _ => step + 1,
                } as i64;
                published.push((bank, id));
                Event::BoardPublished(random_board(&mut rng, start + Duration::hours(hours * 3)))
            }
        };
        let envelope = Envelope {
            event_id: id,
            bank_id: bank,
            occurred_at: received,
            event,
        };
        if rng.gen_bool(0.05) {
            // A producer retry: the same event reaches the log twice.
            log.push(envelope.clone());
        }
        log.push(envelope);
    }
    log
}

async fn check_seed(seed: u64) -> anyhow::Result<()> {
    let log = random_log(seed);
    let (pool, name) = fresh_pool("rw_fold").await?;
    let mut rng = StdRng::seed_from_u64(seed ^ 0xfeed);

    // Fold in random batch sizes; now and then a batch is delivered again.
    // Odd seeds spread the banks over three partitions, folded in lanes.
    let (messages, lanes): (Vec<Incoming>, usize) = if seed % 2 == 0 {
        (messages(&log), 1)
    } else {
        (partitioned(&log, 3), 3)
    };
    let mut at = 0;
    while at < messages.len() {
        let end = (at + rng.gen_range(1..12)).min(messages.len());
        apply_lanes(&pool, TOPIC, &messages[at..end], &[], None, lanes).await?;
        if rng.gen_bool(0.2) {
            let outcome = apply_lanes(&pool, TOPIC, &messages[at..end], &[], None, lanes).await?;
            assert_eq!(outcome.applied, 0, "a redelivered batch changes nothing");
        }
        at = end;
    }

    // A currency's first quote: the earliest board that named it.
    let mut first_quoted: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
    for envelope in log.iter().filter(|e| e.bank_id.get() != UNREGISTERED) {
        if let Event::BoardPublished(board) = &envelope.event {
            for rate in board.rates() {
                let first = first_quoted
                    .entry(rate.currency().to_string())
                    .or_insert(board.as_of());
                *first = (*first).min(board.as_of());
            }
        }
    }
    let stored: Vec<(String, DateTime<Utc>)> =
        sqlx::query_as("SELECT code::text, first_quoted_at FROM currencies ORDER BY code")
            .fetch_all(&pool)
            .await?;
    assert_eq!(
        stored,
        first_quoted.into_iter().collect::<Vec<_>>(),
        "seed {seed}: first quotes"
    );

    // Every board of the unregistered bank, and nothing else, is refused.
    let unregistered: BTreeSet<uuid::Uuid> = log
        .iter()
        .filter(|e| e.bank_id.get() == UNREGISTERED)
        .map(|e| e.event_id)
        .collect();
    let refused: BTreeSet<uuid::Uuid> =
        sqlx::query_scalar("SELECT event_id FROM dead_letters WHERE topic = $1")
            .bind(TOPIC)
            .fetch_all(&pool)
            .await?
            .into_iter()
            .collect();
    assert_eq!(refused, unregistered, "seed {seed}: dead letters");

    let mut reference = Reference::default();
    for envelope in &log {
        reference.apply(envelope);
    }

    // Latest boards and differences, per bank.
    for &bank in reference.active.keys() {
        let id = BankId::new(bank).unwrap();
        let board = store::latest_board(&pool, id).await?;
        let expected = reference.latest(bank);
        assert_eq!(
            board.len(),
            expected.map_or(0, |(_, b)| b.len()),
            "seed {seed} bank {bank}: board size"
        );
        for rate in &board {
            let (as_of, expected_board) = expected.unwrap();
            let values = expected_board[rate.currency.as_str()];
            assert_eq!(rate.updated_at, as_of, "seed {seed} bank {bank}");
            assert_eq!(
                (
                    rate.cash_buying,
                    rate.cash_selling,
                    rate.transactional_buying,
                    rate.transactional_selling
                ),
                values
            );
            let previous = reference
                .before(bank, rate.currency.as_str(), as_of)
                .map(|(_, v)| v);
            let got = rate.previous.as_ref().map(|p| {
                (
                    p.cash_buying,
                    p.cash_selling,
                    p.transactional_buying,
                    p.transactional_selling,
                )
            });
            assert_eq!(
                got, previous,
                "seed {seed} bank {bank} {}: previous value",
                rate.currency
            );
        }
    }

    // Best rates, per currency, across active banks' latest boards.
    let now = Utc::now();
    for code in CODES {
        let code = CurrencyCode::parse(code).unwrap();
        let best = store::best_rates(&pool, code, now).await?;
        let quotes = store::quotes(&pool, code).await?;
        let candidates: Vec<Candidate<'_>> = quotes
            .iter()
            .map(|(bank, rate)| Candidate { bank, rate })
            .collect();
        let quoting: Vec<i64> = reference
            .active
            .iter()
            .filter(|(bank, active)| {
                **active
                    && reference
                        .latest(**bank)
                        .is_some_and(|(_, b)| b.contains_key(code.as_str()))
            })
            .map(|(bank, _)| *bank)
            .collect();
        assert_eq!(
            candidates
                .iter()
                .map(|c| c.bank.id.get())
                .collect::<Vec<_>>(),
            quoting,
            "seed {seed} {code}: who quotes"
        );
        let Some(best) = best else {
            assert!(quoting.is_empty());
            continue;
        };
        for (field, entry) in Field::ALL.iter().zip(best.iter()) {
            // The reference winner, by the rule written out again here.
            let mut winner: Option<(Decimal, DateTime<Utc>, i64)> = None;
            for bank in &quoting {
                let (as_of, board) = reference.latest(*bank).unwrap();
                let v = board[code.as_str()];
                let value = match field {
                    Field::CashBuying => Some(v.0),
                    Field::CashSelling => Some(v.1),
                    Field::TransactionalBuying => v.2,
                    Field::TransactionalSelling => v.3,
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
                        by_value || (value == w && (as_of < wt || (as_of == wt && *bank < wb)))
                    }
                };
                if better {
                    winner = Some((value, as_of, *bank));
                }
            }
            match (entry, winner) {
                (None, None) => {}
                (Some(entry), Some((value, as_of, bank))) => {
                    assert_eq!(
                        (entry.bank.id.get(), entry.price, entry.updated_at),
                        (bank, value, as_of),
                        "seed {seed} {code} {field:?}"
                    );
                    assert_eq!(
                        pick_best(*field, &candidates).map(|i| candidates[i].bank.id.get()),
                        Some(bank)
                    );
                    // Fewer than 100 values in 30 days: the series is all of them.
                    let expected_series: Vec<(DateTime<Utc>, Decimal)> = reference
                        .boards
                        .range((bank, now - Duration::days(30))..=(bank, now))
                        .filter_map(|((_, t), board)| {
                            let v = board.get(code.as_str())?;
                            let value = match field {
                                Field::CashBuying => Some(v.0),
                                Field::CashSelling => Some(v.1),
                                Field::TransactionalBuying => v.2,
                                Field::TransactionalSelling => v.3,
                            }?;
                            Some((*t, value))
                        })
                        .collect();
                    assert!(expected_series.len() <= store::SERIES_POINTS as usize);
                    assert_eq!(
                        entry.series, expected_series,
                        "seed {seed} {code} {field:?}: series"
                    );
                    assert_eq!(
                        entry.series.last(),
                        Some(&(as_of, value)),
                        "the series ends at the current value"
                    );
                }
                (entry, winner) => {
                    panic!("seed {seed} {code} {field:?}: got {entry:?}, expected {winner:?}")
                }
            }
        }
    }

    // History: the record in force before random instants.
    let start = Utc::now() - Duration::days(21);
    for _ in 0..40 {
        let bank = rng.gen_range(1..=4);
        let code = CODES[rng.gen_range(0..CODES.len())];
        let before = start + Duration::minutes(rng.gen_range(0..(21 * 24 * 60)));
        let got = store::history(
            &pool,
            BankId::new(bank).unwrap(),
            CurrencyCode::parse(code).unwrap(),
            before,
        )
        .await?;
        let expected = reference.before(bank, code, before);
        assert_eq!(
            got.map(|r| (
                r.as_of,
                (
                    r.cash_buying,
                    r.cash_selling,
                    r.transactional_buying,
                    r.transactional_selling
                )
            )),
            expected,
            "seed {seed}: history of bank {bank} {code} before {before}"
        );
    }

    drop_database(pool, &name).await
}

#[tokio::test]
async fn folding_random_logs_matches_the_reference() -> anyhow::Result<()> {
    for seed in [1, 2, 3, 42, 2026, 7, 99] {
        check_seed(seed).await?;
    }
    Ok(())
}

#[test]
fn reference_helpers_agree_with_themselves() {
    // A tiny sanity check of the reference's own ordering.
    let mut reference = Reference::default();
    let t = |h| Utc.with_ymd_and_hms(2026, 11, 1, h, 0, 0).unwrap();
    let board = |v: &str| {
        let v = Decimal::from_str(v).unwrap();
        board(t(1), vec![entry("USD", v, v, None)])
    };
    let bank = BankId::new(1).unwrap();
    reference.apply(&Envelope::new(
        bank,
        t(0),
        Event::BoardPublished(board("1")),
    ));
    reference.apply(&Envelope::new(
        bank,
        t(0),
        Event::BoardPublished(board("2")),
    ));
    assert_eq!(
        reference.latest(1).unwrap().1["USD"].0,
        Decimal::from(2),
        "the later event wins"
    );
    assert_eq!(reference.before(1, "USD", t(2)).unwrap().0, t(1));
    assert!(reference.before(1, "USD", t(1)).is_none());
}

#[tokio::test]
async fn a_busy_bank_s_series_is_evened_out_to_at_most_100_points() -> anyhow::Result<()> {
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
    let messages: Vec<Incoming> = messages(&log);
    apply_batch(&pool, TOPIC, &messages, &[], None).await?;

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
    drop_database(pool, &name).await
}
