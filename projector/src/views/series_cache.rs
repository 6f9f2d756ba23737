//! The best-rates series, kept between recomputations of the views over all
//! banks. Reading each best bank's 30-day series again (about a hundred
//! index probes each, four per currency) was most of every recompute, and a
//! recompute runs every second under load. Kept here, a series only needs
//! the rows written since it was last read, and those of every series come
//! in one statement.
//!
//! A kept series is carried forward to exactly what [`store::series_read`]
//! would read at the same time:
//! - rows reach a bank's history after its newest row, except when the
//!   fold rewrites history (a backfilled or re-published board), which
//!   bumps the bank's `history_rev` (migration 0003): the bank's series are
//!   then read again from scratch;
//! - a series of at most 100 values holds all of them, so what leaves the
//!   window and what joins it are both known;
//! - a bucketed series keeps its buckets' last values. It stays bucketed
//!   while its pivot (the 101st-newest value when read) is inside the
//!   window, which proves the window still holds more than 100 values; then
//!   it is read again (once in 30 days for a busy bank).
//!
//! The caller reads within one repeatable-read snapshot, so the revisions
//! and the rows agree.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Duration, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use sqlx::PgConnection;

use crate::error::Result;
use ratewire_readmodel::store::{self, Point, SeriesRead, SERIES_DAYS, SERIES_POINTS};
use ratewire_readmodel::views::Field;

/// Which series: the bank, the currency and the field.
pub type SeriesKey = (BankId, CurrencyCode, Field);

/// A kept series no one asked for in this long is let go, so only the
/// banks recently best for something stay in memory. Counted in time, not
/// in recomputations: rounds come quickly under load, and a count of
/// rounds let go of series a second or two after their bank was last
/// best, so every round read many of them again (docs/benchmarks.md,
/// "Figures behind design choices in the code").
const FORGET_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Most series kept (about 3 KB each when full); beyond it those asked for
/// least recently go first. Every bank best for every field of every
/// currency, at 50 banks and 30 currencies, is 6,000.
const MOST_KEPT: usize = 6_000;

#[derive(Debug, Default)]
pub struct SeriesCache {
    /// The generation (read schema) the series were read from.
    generation: String,
    kept: HashMap<SeriesKey, Kept>,
    /// Recomputations served, to tell which series went unused.
    round: u64,
    stats: Stats,
}

/// How the series of the last recomputation were found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub carried: usize,
    pub read: usize,
}

#[derive(Debug)]
struct Kept {
    /// The bank's `history_rev` when read.
    rev: i64,
    /// Every row of the bank and currency up to this time has been taken in.
    seen_through: DateTime<Utc>,
    /// The time the series was last brought to.
    until: DateTime<Utc>,
    /// `None`: the series is every value in the window; else see
    /// [`SeriesRead::pivot`].
    pivot: Option<DateTime<Utc>>,
    points: Vec<Point>,
    /// The round it was last asked for, and when.
    used: u64,
    asked: std::time::Instant,
}

impl SeriesCache {
    /// The series of `wanted` at `until`, read through `db` (one snapshot).
    pub async fn series(
        &mut self,
        db: &mut PgConnection,
        generation: &str,
        wanted: &[SeriesKey],
        until: DateTime<Utc>,
    ) -> Result<HashMap<SeriesKey, Vec<Point>>> {
        if generation != self.generation {
            self.kept.clear();
            generation.clone_into(&mut self.generation);
        }
        self.round += 1;
        let since = until - Duration::days(SERIES_DAYS);
        let wanted: BTreeSet<SeriesKey> = wanted.iter().copied().collect();
        let banks: Vec<BankId> = wanted
            .iter()
            .map(|(bank, _, _)| *bank)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let revisions = store::history_revisions(&mut *db, &banks).await?;

        let mut carry = Vec::new();
        let mut read = Vec::new();
        for key in wanted {
            let rev = revisions.get(&key.0).copied();
            match self.kept.get(&key) {
                Some(kept) if Some(kept.rev) == rev && kept.can_reach(since, until) => {
                    carry.push(key)
                }
                _ => read.push((key, rev)),
            }
        }

        // The rows after what each carried series has seen, per bank and
        // currency, from the earliest any of its fields has seen.
        let mut after: HashMap<(BankId, CurrencyCode), DateTime<Utc>> = HashMap::new();
        for key in &carry {
            let seen = self.kept[key].seen_through;
            after
                .entry((key.0, key.1))
                .and_modify(|t| *t = (*t).min(seen))
                .or_insert(seen);
        }
        let keys: Vec<_> = after.iter().map(|((b, c), t)| (*b, *c, *t)).collect();
        let limit = SERIES_POINTS + 1;
        let rows = store::rates_after(db, &keys, until, limit).await?;
        for key in carry {
            let rows = rows.get(&(key.0, key.1)).map_or(&[][..], Vec::as_slice);
            if rows.len() as i64 >= limit {
                // More arrived than one read would take: read it whole.
                read.push((key, Some(self.kept[&key].rev)));
                continue;
            }
            let kept = self.kept.get_mut(&key).expect("carried series are kept");
            kept.advance(key.2, rows, since, until);
            kept.used = self.round;
            kept.asked = std::time::Instant::now();
        }

        let round = self.round;
        let mut found: HashMap<SeriesKey, Vec<Point>> = self
            .kept
            .iter()
            .filter(|(_, kept)| kept.used == round)
            .map(|(key, kept)| (*key, kept.points.clone()))
            .collect();
        self.stats = Stats {
            carried: found.len(),
            read: read.len(),
        };
        for ((bank, code, field), rev) in read {
            let fresh = store::series_read(db, bank, code, field.column(), until).await?;
            found.insert((bank, code, field), fresh.points.clone());
            // A bank unknown to the read model has no history to keep.
            if let Some(rev) = rev {
                self.kept.insert(
                    (bank, code, field),
                    Kept::from_read(fresh, rev, since, until, round),
                );
            }
        }
        self.forget();
        Ok(found)
    }

    /// Lets go of the series asked for too long ago, and of the least
    /// recently asked for beyond [`MOST_KEPT`].
    fn forget(&mut self) {
        self.kept
            .retain(|_, kept| kept.asked.elapsed() < FORGET_AFTER);
        if self.kept.len() > MOST_KEPT {
            let mut asked: Vec<std::time::Instant> = self.kept.values().map(|k| k.asked).collect();
            let excess = self.kept.len() - MOST_KEPT;
            let (_, oldest_kept, _) = asked.select_nth_unstable(excess);
            let oldest_kept = *oldest_kept;
            self.kept.retain(|_, kept| kept.asked >= oldest_kept);
        }
    }

    /// How the last call found its series.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}

impl Kept {
    fn from_read(
        read: SeriesRead,
        rev: i64,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        round: u64,
    ) -> Self {
        Kept {
            rev,
            // No value in the window: nothing at or before `since` can ever
            // be in a later window.
            seen_through: read.newest.unwrap_or(since),
            until,
            pivot: read.pivot,
            points: read.points,
            used: round,
            asked: std::time::Instant::now(),
        }
    }

    /// Whether carrying forward to `until` gives what a read would.
    fn can_reach(&self, since: DateTime<Utc>, until: DateTime<Utc>) -> bool {
        // A clock that went back would need rows taken out again.
        self.until <= until && self.pivot.is_none_or(|pivot| pivot > since)
    }

    /// Takes in `rows` (oldest first, all of the bank's rows of the currency
    /// after the earliest time any of its kept fields has seen) and moves
    /// the window to `(since, until]`.
    fn advance(
        &mut self,
        field: Field,
        rows: &[store::RateRow],
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) {
        let index = Field::ALL
            .iter()
            .position(|f| *f == field)
            .expect("a field of Field::ALL");
        let seen = self.seen_through;
        for row in rows.iter().filter(|row| row.as_of > seen) {
            if let Some(value) = row.values[index] {
                self.points.push((row.as_of, value));
            }
            self.seen_through = row.as_of;
        }
        self.until = until;
        // A bucket's kept value is its last, so a bucket with no value
        // after `since` loses exactly its kept point.
        self.points.retain(|(at, _)| *at > since);
        if self.pivot.is_none() {
            if self.points.len() as i64 <= SERIES_POINTS {
                return;
            }
            self.pivot = Some(self.points[self.points.len() - 1 - SERIES_POINTS as usize].0);
        }
        // The last value of each bucket, newest SERIES_POINTS buckets.
        let mut bucketed: Vec<Point> = Vec::with_capacity(self.points.len());
        for point in self.points.drain(..) {
            match bucketed.last_mut() {
                Some(last) if store::series_bucket(last.0) == store::series_bucket(point.0) => {
                    *last = point
                }
                _ => bucketed.push(point),
            }
        }
        let excess = bucketed.len().saturating_sub(SERIES_POINTS as usize);
        bucketed.drain(..excess);
        self.points = bucketed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn kept(asked: Instant) -> Kept {
        Kept {
            rev: 0,
            seen_through: Utc::now(),
            until: Utc::now(),
            pivot: None,
            points: Vec::new(),
            used: 0,
            asked,
        }
    }

    #[test]
    fn series_not_asked_for_a_while_or_beyond_the_bound_are_let_go() {
        let now = Instant::now();
        let mut cache = SeriesCache::default();
        let code = CurrencyCode::parse("USD").unwrap();
        let key = |i: usize| {
            let bank = BankId::new(i as i64 + 1).unwrap();
            (bank, code, Field::ALL[0])
        };
        // The first asked for longest ago.
        for i in 0..MOST_KEPT + 2 {
            let ago = std::time::Duration::from_millis((MOST_KEPT + 2 - i) as u64);
            cache.kept.insert(key(i), kept(now - ago));
        }
        let Some(long_ago) = now.checked_sub(FORGET_AFTER * 2) else {
            return; // a machine up for less than two minutes
        };
        cache.kept.insert(key(MOST_KEPT + 2), kept(long_ago));

        cache.forget();

        assert_eq!(cache.kept.len(), MOST_KEPT);
        assert!(!cache.kept.contains_key(&key(MOST_KEPT + 2)));
        assert!(!cache.kept.contains_key(&key(0)) && !cache.kept.contains_key(&key(1)));
        assert!(cache.kept.contains_key(&key(2)));
    }
}
