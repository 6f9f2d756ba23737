//! Requests that arrive while the limiter's Redis round trip is under way
//! share the next one.
//!
//! One task owns the round trips. It takes every request waiting (up to
//! [`MOST_PER_TRIP`]), sends one pipeline with an `INCRBY` per counter
//! and a `GET` per view, and shares the answers out. A burst of requests
//! for one key and one view costs Redis a handful of commands instead of
//! five per request, and the view's bytes cross the socket once.
//!
//! Counting stays exact. `INCRBY n` reserves `n` consecutive counts, so
//! the requests of a trip are decided in arrival order as if each had
//! counted alone, and refused requests are given back with one `DECRBY`
//! per counter. Across instances nothing changes: no instance ever admits
//! a count another instance holds.
//!
//! A request waits at most for the trip before its own. Every view it gets
//! was read after the request arrived, so sharing never serves it a view
//! older than asking alone would.
//!
//! The task is also the only writer of counts taken while Redis could not
//! be asked: a trip carries its subjects' counts in its `INCRBY`s, and
//! between trips the task adds everyone else's when told to (see
//! [`super::local`] for why this order matters).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use chrono::Utc;
use ratewire_readmodel::redis::Connection;
use redis::Value;
use tokio::sync::{mpsc, oneshot, Notify};

use super::local::{LocalCounts, Sent};
use super::{Verdict, Windows, MINUTE_TTL_SECONDS, MONTH_TTL_SECONDS};
use crate::access::plans::Limits;
use crate::redis_guard::{RedisGuard, Unavailable};
use crate::views::requests::{Stored, ViewRef};

/// The most requests one round trip carries: the pipeline stays a few
/// kilobytes and no request waits behind an unbounded trip.
const MOST_PER_TRIP: usize = 256;

/// One request to count, and where its answer goes.
pub(super) struct Ask {
    pub minute_key: String,
    pub month_key: String,
    pub limits: Limits,
    /// The view to read along when the request is allowed.
    pub view: Option<ViewRef>,
    /// Counts to lease besides the request's own when it is allowed (see
    /// `lease`): granted as far as both windows allow.
    pub lease: u64,
    /// Whether it counts toward the month, the counts its trip carries
    /// for its subject (admitted in this process while Redis could not be
    /// asked: added in the same `INCRBY`, not decided again), and where
    /// its outcome is kept.
    pub sent: Sent,
    pub reply: oneshot::Sender<Result<Counted, Failed>>,
}

/// One request's share of a round trip.
#[derive(Debug, Clone)]
pub(super) struct Counted {
    pub verdict: Verdict,
    pub minute_used: u64,
    pub month_used: u64,
    /// The view's value when the request was allowed and asked for one
    /// (`Some(None)`: the key is missing).
    pub view: Option<Option<Stored>>,
    /// Counts leased besides the request's own (included in Redis's counts,
    /// not in `minute_used` and `month_used`).
    pub leased: u64,
}

#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum Failed {
    #[error("{0}")]
    Redis(#[from] Unavailable),
    #[error("the limiter's queue is full")]
    Busy,
    #[error("no answer within the budget")]
    TimedOut,
    #[error("the limiter's round-trip task has stopped")]
    Stopped,
}

/// Requests waiting for a round trip, at most: past it a request is
/// decided in this process at once instead of queueing behind Redis.
pub(super) const QUEUE: usize = 4_096;

/// Starts the task that makes the round trips; it ends when every sender
/// is dropped. `add_local` asks it to add the counts taken in this process
/// to Redis before its next trip.
pub(super) fn start(
    redis: RedisGuard,
    local: Arc<LocalCounts>,
    add_local: Arc<Notify>,
    timezone: chrono_tz::Tz,
) -> mpsc::Sender<Ask> {
    let (asks, waiting) = mpsc::channel(QUEUE);
    tokio::spawn(run(waiting, redis, local, add_local, timezone));
    asks
}

async fn run(
    mut waiting: mpsc::Receiver<Ask>,
    redis: RedisGuard,
    local: Arc<LocalCounts>,
    add_local: Arc<Notify>,
    timezone: chrono_tz::Tz,
) {
    let mut trip = Vec::with_capacity(MOST_PER_TRIP);
    loop {
        tokio::select! {
            // Before the next trip: that trip is decided on these counts.
            biased;
            _ = add_local.notified() => {
                add_local_counts(&redis, &local, timezone).await;
                continue;
            }
            taken = waiting.recv_many(&mut trip, MOST_PER_TRIP) => {
                if taken == 0 {
                    return;
                }
            }
        }
        for ask in &mut trip {
            ask.sent.take_unsent();
        }
        one_trip(&redis, &mut trip).await;
    }
}

/// Adds what was admitted here while Redis could not be asked.
async fn add_local_counts(redis: &RedisGuard, local: &LocalCounts, timezone: chrono_tz::Tz) {
    let this_minute = Windows::with(Utc::now(), timezone, |windows| windows.minute.clone());
    match local.add_unsent(&mut redis.conn(), &this_minute).await {
        Ok(0) => {}
        Ok(subjects) => tracing::info!(subjects, "counts taken without redis added to it"),
        Err(e) => {
            tracing::warn!(error = %e, "adding local counts to redis failed; the next trips carry them")
        }
    }
}

/// Counts `trip` in Redis and answers each request.
async fn one_trip(redis: &RedisGuard, trip: &mut Vec<Ask>) {
    metrics::counter!("ratewire_api_limiter_round_trips_total").increment(1);
    let trip_ref = &*trip;
    let counted = redis
        .call("limiter round trip", |mut conn| async move {
            count(&mut conn, trip_ref).await
        })
        .await;
    match counted {
        Ok((answers, give_back)) => {
            for (ask, answer) in trip.drain(..).zip(answers) {
                // Known to this process before any request hears of
                // it: a request decided here next must count it.
                ask.sent.answered(
                    answer.minute_used + answer.leased,
                    answer.month_used + answer.leased,
                );
                // The caller may have gone; its count stands, as it
                // would have had it waited.
                let _ = ask.reply.send(Ok(answer));
            }
            // After the answers, so only refusals pay for it.
            if let Some(give_back) = give_back {
                let given = redis
                    .call("giving counts back", |mut conn| async move {
                        give_back.query_async::<()>(&mut conn).await
                    })
                    .await;
                if let Err(e) = given {
                    tracing::debug!(error = %e, "giving back refused requests' counts failed; they expire with their window");
                }
            }
        }
        Err(e) => {
            let failed = Failed::Redis(e);
            for ask in trip.drain(..) {
                ask.sent.unanswered();
                let _ = ask.reply.send(Err(failed.clone()));
            }
        }
    }
}

/// A counter's place in a trip: requests counted on it, counts carried
/// along (decided before), the count before the trip's requests, and how
/// many of them were admitted so far.
#[derive(Default)]
struct Counter {
    asked: u64,
    carried: u64,
    before: u64,
    admitted: u64,
}

/// Counters and views of a trip by key, in the order first asked.
struct Distinct<'a, T> {
    index: HashMap<&'a str, usize>,
    items: Vec<(&'a str, T)>,
}

impl<'a, T: Default> Distinct<'a, T> {
    fn new() -> Self {
        Self {
            index: HashMap::new(),
            items: Vec::new(),
        }
    }

    fn entry(&mut self, key: &'a str) -> &mut T {
        let at = *self.index.entry(key).or_insert_with(|| {
            self.items.push((key, T::default()));
            self.items.len() - 1
        });
        &mut self.items[at].1
    }

    fn get(&self, key: &str) -> &T {
        &self.items[self.index[key]].1
    }

    fn get_mut(&mut self, key: &str) -> &mut T {
        let at = self.index[key];
        &mut self.items[at].1
    }
}

async fn count(
    redis: &mut Connection,
    trip: &[Ask],
) -> redis::RedisResult<(Vec<Counted>, Option<redis::Pipeline>)> {
    let mut minutes = Distinct::<Counter>::new();
    let mut months = Distinct::<Counter>::new();
    let mut views = Distinct::<Option<Stored>>::new();
    let mut etags: HashMap<&str, &str> = HashMap::new();
    for ask in trip {
        let minute = minutes.entry(&ask.minute_key);
        minute.asked += 1 + ask.lease;
        minute.carried += ask.sent.carry.minute;
        let month = months.entry(&ask.month_key);
        month.asked += u64::from(ask.sent.count_month) * (1 + ask.lease);
        month.carried += ask.sent.carry.month;
        if let Some(view) = &ask.view {
            views.entry(&view.key);
            etags.insert(&view.key, &view.etags);
        }
    }

    let mut pipe = redis::pipe();
    for (key, counter) in &minutes.items {
        pipe.incr(*key, counter.asked + counter.carried)
            .cmd("EXPIRE")
            .arg(*key)
            .arg(MINUTE_TTL_SECONDS)
            .arg("NX")
            .ignore();
    }
    for (key, counter) in &months.items {
        if counter.asked + counter.carried > 0 {
            pipe.incr(*key, counter.asked + counter.carried)
                .cmd("EXPIRE")
                .arg(*key)
                .arg(MONTH_TTL_SECONDS)
                .arg("NX")
                .ignore();
        } else {
            // Counted elsewhere (requests that count per minute only still
            // report the month's use).
            pipe.get(*key);
        }
    }
    for (key, _) in &views.items {
        pipe.get(*key).hget(etags[*key], *key);
    }
    let replies: Vec<Value> = pipe.query_async(redis).await?;
    let mut replies = replies.into_iter();
    let mut next = || replies.next().unwrap_or(Value::Nil);
    for (_, counter) in &mut minutes.items {
        let total: i64 = redis::from_redis_value(next())?;
        counter.before = (total.max(0) as u64).saturating_sub(counter.asked);
    }
    for (_, counter) in &mut months.items {
        let total: Option<i64> = redis::from_redis_value(next())?;
        counter.before = (total.unwrap_or(0).max(0) as u64).saturating_sub(counter.asked);
    }
    for (_, stored) in &mut views.items {
        let body: Option<Vec<u8>> = redis::from_redis_value(next())?;
        let etag: Option<String> = redis::from_redis_value(next())?;
        *stored = body.map(|body| Stored {
            body: Bytes::from(body),
            etag,
        });
    }

    let answers = trip
        .iter()
        .map(|ask| decide(ask, &mut minutes, &mut months, &views))
        .collect();
    Ok((answers, give_back(&minutes, &months)))
}

/// The same rule as one request counting alone, with every refused request
/// before it already given back.
fn decide(
    ask: &Ask,
    minutes: &mut Distinct<Counter>,
    months: &mut Distinct<Counter>,
    views: &Distinct<Option<Stored>>,
) -> Counted {
    let minute = minutes.get_mut(&ask.minute_key);
    let month = months.get_mut(&ask.month_key);
    let minute_count = minute.before + minute.admitted + 1;
    let month_used = month.before + month.admitted;
    let verdict = if minute_count > ask.limits.per_minute {
        Verdict::RateLimited
    } else if ask.sent.count_month && month_used + 1 > ask.limits.per_month {
        Verdict::QuotaExceeded
    } else {
        Verdict::Allowed
    };
    if verdict != Verdict::Allowed {
        return Counted {
            verdict,
            minute_used: minute_count - 1,
            month_used,
            view: None,
            leased: 0,
        };
    }
    let month_count = month_used + u64::from(ask.sent.count_month);
    // A slice is leased only with a request counted toward the month.
    let leased = if ask.sent.count_month {
        ask.lease
            .min(ask.limits.per_minute.saturating_sub(minute_count))
            .min(ask.limits.per_month.saturating_sub(month_count))
    } else {
        0
    };
    minute.admitted += 1 + leased;
    month.admitted += u64::from(ask.sent.count_month) * (1 + leased);
    Counted {
        verdict,
        minute_used: minute_count,
        month_used: month_count,
        view: ask.view.as_ref().map(|view| views.get(&view.key).clone()),
        leased,
    }
}

/// One `DECRBY` per counter that refused requests, if any did.
fn give_back(minutes: &Distinct<Counter>, months: &Distinct<Counter>) -> Option<redis::Pipeline> {
    let mut pipe = redis::pipe();
    let mut any = false;
    for (key, counter) in minutes.items.iter().chain(&months.items) {
        let refused = counter.asked - counter.admitted;
        if refused > 0 {
            pipe.decr(*key, refused).ignore();
            any = true;
        }
    }
    any.then_some(pipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Redis of this machine, under a prefix of the test's own.
    fn redis() -> (Connection, String) {
        let url = std::env::var("RATEWIRE_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379/0".to_owned());
        let prefix = format!("rwtest:{}:", uuid::Uuid::new_v4().simple());
        (ratewire_readmodel::redis::connect(&url).unwrap(), prefix)
    }

    fn ask(prefix: &str, count_month: bool, limits: Limits, view: Option<&str>) -> Ask {
        Ask {
            minute_key: format!("{prefix}minute"),
            month_key: format!("{prefix}month"),
            limits,
            view: view.map(|v| ViewRef {
                key: format!("{prefix}{v}"),
                etags: format!("{prefix}etags"),
                list: None,
            }),
            lease: 0,
            sent: Sent::detached(count_month),
            reply: oneshot::channel().0,
        }
    }

    async fn forget(redis: &mut Connection, prefix: &str) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(redis)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL")
                .arg(keys)
                .query_async(redis)
                .await
                .unwrap();
        }
    }

    async fn value(redis: &mut Connection, key: String) -> Option<i64> {
        redis::cmd("GET").arg(key).query_async(redis).await.unwrap()
    }

    #[tokio::test]
    async fn one_trip_decides_in_arrival_order_as_if_each_counted_alone() {
        let (mut redis, p) = redis();
        let limits = Limits {
            per_minute: 4,
            per_month: 3,
        };
        let _: () = redis::pipe()
            .set(format!("{p}month"), 1)
            .set(format!("{p}view"), "{\"v\":1}")
            .hset(format!("{p}etags"), format!("{p}view"), "0123456789abcdef")
            .query_async(&mut redis)
            .await
            .unwrap();
        let trip = [
            ask(&p, true, limits, Some("view")),
            ask(&p, false, limits, None),
            ask(&p, true, limits, Some("view")),
            ask(&p, true, limits, Some("view")),
            ask(&p, false, limits, Some("missing")),
            ask(&p, false, limits, None),
        ];
        let (answers, give_back) = count(&mut redis, &trip).await.unwrap();
        let seen: Vec<_> = answers
            .iter()
            .map(|a| (a.verdict, a.minute_used, a.month_used))
            .collect();
        assert_eq!(
            seen,
            [
                (Verdict::Allowed, 1, 2),
                (Verdict::Allowed, 2, 2),
                (Verdict::Allowed, 3, 3),
                // The month is spent; its count is given back, so the next
                // request still finds a minute count within the limit.
                (Verdict::QuotaExceeded, 3, 3),
                (Verdict::Allowed, 4, 3),
                (Verdict::RateLimited, 4, 3),
            ]
        );
        let body = |a: &Counted| {
            a.view
                .clone()
                .map(|v| v.map(|s| String::from_utf8(s.body.to_vec()).unwrap()))
        };
        let etag = answers[0].view.clone().flatten().and_then(|s| s.etag);
        assert_eq!(etag.as_deref(), Some("0123456789abcdef"));
        assert_eq!(body(&answers[0]), Some(Some("{\"v\":1}".to_owned())));
        assert_eq!(body(&answers[1]), None, "no view asked");
        assert_eq!(body(&answers[3]), None, "refused requests read nothing");
        assert_eq!(body(&answers[4]), Some(None), "a missing view");

        let give_back = give_back.expect("two refusals to give back");
        give_back.query_async::<()>(&mut redis).await.unwrap();
        assert_eq!(value(&mut redis, format!("{p}minute")).await, Some(4));
        assert_eq!(value(&mut redis, format!("{p}month")).await, Some(3));
        let ttl: i64 = redis::cmd("TTL")
            .arg(format!("{p}minute"))
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(
            (1..=120).contains(&ttl),
            "the minute counter expires: {ttl}"
        );
        forget(&mut redis, &p).await;
    }

    #[tokio::test]
    async fn concurrent_requests_sharing_trips_admit_exactly_the_limit() {
        let (mut redis, p) = redis();
        let limiter = std::sync::Arc::new(super::super::Limiter::new(
            RedisGuard::new(redis.clone(), std::time::Duration::from_secs(2)),
            &p,
            chrono_tz::UTC,
        ));
        let limits = Limits {
            per_minute: 60,
            per_month: 1_000,
        };
        let now = chrono::Utc::now();
        let asks: Vec<_> = (0..400)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move { limiter.check("key:a", limits, true, now).await })
            })
            .collect();
        let mut admitted: Vec<u64> = vec![];
        for decision in asks {
            let decision = decision.await.unwrap();
            if decision.verdict == Verdict::Allowed {
                admitted.push(decision.minute_used);
            }
        }
        admitted.sort_unstable();
        assert_eq!(admitted, (1..=60).collect::<Vec<_>>(), "distinct counts");
        // The refusals' counts come back just after their answers.
        let minute = super::super::minute_key(&p, "key:a", &now.format("%Y%m%d%H%M").to_string());
        let month = super::super::month_key(
            &p,
            "key:a",
            &super::super::month_window(now, chrono_tz::UTC),
        );
        for _ in 0..100 {
            if value(&mut redis, minute.clone()).await == Some(60) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(value(&mut redis, minute).await, Some(60));
        assert_eq!(value(&mut redis, month).await, Some(60));
        forget(&mut redis, &p).await;
    }
}
