//! The best-rates series the projector keeps between recomputations
//! ([`SeriesCache`]) are what reading them whole gives, through everything
//! a bank's history can do: busy spells (bucketed series) and quiet ones,
//! the 30-day window sliding past values and pivots, backfilled and
//! re-published boards, boards dated ahead of the clock, fields not always
//! quoted, batches with a bad board among good ones, and
//! recomputations skipped for long enough that many rows pile up.

use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ratewire_projector::fold::{apply_batch, Incoming};
use ratewire_projector::views::series_cache::{SeriesCache, SeriesKey};
use ratewire_proto::{
    encode, BankId, BankRegistered, BoardPublished, CurrencyCode, Envelope, Event,
};
use ratewire_readmodel::store;
use ratewire_readmodel::views::Field;
use sqlx::PgPool;

mod common;
use common::{board, dec, drop_database, entry, fresh_pool};

const TOPIC: &str = "series";
const BANKS: [i64; 2] = [1, 2];
const CODES: [&str; 2] = ["USD", "EUR"];

#[tokio::test]
async fn kept_series_match_a_full_read_seed_1() -> anyhow::Result<()> {
    check(1).await
}

#[tokio::test]
async fn kept_series_match_a_full_read_seed_2() -> anyhow::Result<()> {
    check(2).await
}

fn random_board(rng: &mut StdRng, as_of: DateTime<Utc>) -> BoardPublished {
    let rates = CODES
        .iter()
        .map(|code| {
            let buying = rng.gen_range(10_000..10_100);
            let transactional = rng
                .gen_bool(0.6)
                .then(|| (dec(buying + 5), dec(buying + 30)));
            entry(code, dec(buying), dec(buying + 40), transactional)
        })
        .collect();
    board(as_of, rates)
}

struct Log {
    pool: PgPool,
    offset: i64,
}

impl Log {
    async fn apply(&mut self, events: &[Envelope]) -> anyhow::Result<()> {
        let messages: Vec<Incoming> = events
            .iter()
            .map(|e| {
                self.offset += 1;
                Incoming::keyed(0, self.offset - 1, e.bank_id, encode(e))
            })
            .collect();
        apply_batch(&self.pool, TOPIC, &messages, &[], None).await?;
        Ok(())
    }
}

async fn check(seed: u64) -> anyhow::Result<()> {
    let (pool, name) = fresh_pool("rw_series").await?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut clock = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let mut log = Log {
        pool: pool.clone(),
        offset: 0,
    };
    let banks: Vec<BankId> = BANKS.iter().map(|b| BankId::new(*b).unwrap()).collect();
    let registered: Vec<Envelope> = banks
        .iter()
        .map(|bank| {
            Envelope::new(
                *bank,
                clock,
                Event::BankRegistered(BankRegistered {
                    code: format!("B{bank}"),
                    name: format!("Bank {bank}"),
                    image_url: "https://i.test/b.png".into(),
                    social_links: vec![],
                    schedule: None,
                }),
            )
        })
        .collect();
    log.apply(&registered).await?;

    let every: Vec<SeriesKey> = banks
        .iter()
        .flat_map(|bank| {
            CODES.iter().flat_map(move |code| {
                Field::ALL.map(|field| (*bank, CurrencyCode::parse(code).unwrap(), field))
            })
        })
        .collect();
    let mut cache = SeriesCache::default();
    let mut published: Vec<(BankId, DateTime<Utc>)> = Vec::new();
    let (mut carried, mut read) = (0, 0);
    let mut bucketed = 0;
    for step in 0..400 {
        // Busy spells (two boards a bank every few minutes: more than 100
        // values in 30 days) and quiet ones (days apart: the window empties).
        let busy = (step / 100) % 2 == 0;
        clock += if busy {
            Duration::minutes(rng.gen_range(1..20))
        } else {
            Duration::hours(rng.gen_range(6..72))
        };
        let mut events = Vec::new();
        for bank in &banks {
            let boards = if busy { 2 } else { rng.gen_range(0..2) };
            for i in 0..boards {
                let as_of = match rng.gen_range(0..100) {
                    0..=1 => clock - Duration::hours(rng.gen_range(1..24 * 40)),
                    2..=3 if !published.is_empty() => {
                        published[rng.gen_range(0..published.len())].1
                    }
                    // Ingest takes boards at most 5 minutes ahead.
                    4 => clock + Duration::minutes(rng.gen_range(1..=5)),
                    _ => clock - Duration::seconds(30 * (boards - i)),
                };
                // Now and then a board of a bank never registered, which
                // is dead-lettered while the batch's other boards apply.
                let stray = rng.gen_bool(0.02);
                let bank = if stray {
                    BankId::new(999_999).unwrap()
                } else {
                    published.push((*bank, as_of));
                    *bank
                };
                events.push(Envelope::new(
                    bank,
                    clock,
                    Event::BoardPublished(random_board(&mut rng, as_of)),
                ));
            }
        }
        log.apply(&events).await?;

        // A long pause in the middle of a busy spell: more rows pile up than
        // one read of rows takes.
        let paused = (220..280).contains(&step);
        if paused || rng.gen_bool(0.2) {
            continue;
        }
        let wanted: Vec<SeriesKey> = if rng.gen_bool(0.8) {
            every.clone()
        } else {
            every
                .iter()
                .copied()
                .filter(|_| rng.gen_bool(0.5))
                .collect()
        };
        let mut tx = store::begin_snapshot(&pool).await?;
        let got = cache.series(&mut tx, "readmodel", &wanted, clock).await?;
        tx.commit().await?;
        carried += cache.stats().carried;
        read += cache.stats().read;

        assert_eq!(got.len(), wanted.len(), "seed {seed} step {step}");
        let mut db = pool.acquire().await?;
        for key @ (bank, code, field) in &wanted {
            let whole = store::series_read(&mut db, *bank, *code, field.column(), clock).await?;
            bucketed += usize::from(whole.pivot.is_some());
            assert_eq!(
                got[key], whole.points,
                "seed {seed} step {step} at {clock}: bank {bank} {code} {field:?}"
            );
        }
    }
    assert!(bucketed > 100, "busy spells bucket the series: {bucketed}");
    assert!(
        read > 0 && carried > 5 * read,
        "most series are carried forward: {carried} carried, {read} read"
    );
    drop(log);
    drop_database(pool, name).await
}
