//! The load's watch of the API: how long each board took to be served
//! (publish-to-visible), on its bank's `/rates?bankId` and in the
//! all-banks lists, polled without becoming the load.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// The parts of a `/api/v1/rates?bankId=N` answer the watch reads; the
/// rest of the body is skipped, not built into values.
#[derive(Deserialize)]
struct Served {
    data: Vec<ServedGroup>,
}

#[derive(Deserialize)]
struct ServedGroup {
    data: Vec<ServedBank>,
}

#[derive(Deserialize)]
struct ServedBank {
    #[serde(rename = "lastRatesUpdatedAt")]
    last_rates_updated_at: Option<String>,
}

/// The parts `T` of the answer to `path`, asked with `key`; `None` when
/// the API does not answer with them.
async fn get_parts<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    api: &str,
    key: &str,
    path: &str,
) -> Option<T> {
    let response = http
        .get(format!("{api}{path}"))
        .header("x-api-key", key)
        .send()
        .await
        .ok()?;
    let body = response.bytes().await.ok()?;
    serde_json::from_slice(&body).ok()
}

/// The as-of time of the board the API serves for `bank`, if any.
async fn served_as_of(http: &reqwest::Client, api: &str, key: &str, bank: i64) -> Option<String> {
    let path = format!("/api/v1/rates?bankId={bank}");
    let served: Served = get_parts(http, api, key, &path).await?;
    served
        .data
        .into_iter()
        .next()?
        .data
        .into_iter()
        .next()?
        .last_rates_updated_at
}

/// The parts of a `/api/v1/banks` answer the watch reads (the bank id is a
/// string there).
#[derive(Deserialize)]
struct Listed {
    data: Vec<ListedBank>,
}

#[derive(Deserialize)]
struct ListedBank {
    id: String,
    #[serde(rename = "lastRatesUpdatedAt")]
    last_rates_updated_at: Option<String>,
}

/// The as-of time of each bank's board in the all-banks lists.
async fn listed_as_of(
    http: &reqwest::Client,
    api: &str,
    key: &str,
) -> Option<HashMap<i64, String>> {
    let listed: Listed = get_parts(http, api, key, "/api/v1/banks").await?;
    Some(
        listed
            .data
            .into_iter()
            .filter_map(|bank| Some((bank.id.parse().ok()?, bank.last_rates_updated_at?)))
            .collect(),
    )
}

/// Boards acknowledged but not yet seen on the API: bank -> (as-of, due).
/// Per bank, each board waiting to be seen: its as-of, when its push was
/// due and when it was acknowledged.
pub type Waiting = HashMap<i64, Vec<(String, Instant, Instant)>>;

/// The boards waiting to be seen on their bank's view, and in the lists.
#[derive(Default)]
pub struct Outstanding {
    pub bank: Mutex<Waiting>,
    pub listed: Mutex<Waiting>,
}

/// Most requests the watcher has in flight. The watch must not become the
/// load: polling each board on its own made the polling grow with the
/// latency it measured. One request per waiting bank per round, at most
/// this many at once, keeps it bounded whatever the latency.
const WATCH_CONCURRENCY: usize = 4;

/// Shortest time from one round's start to the next one's: the resolution
/// of the measurement. Rounds back to back polled each waiting bank as fast
/// as the API answered, and the watch (its requests and their parsing) took
/// about a third of the two cores it was measuring.
const WATCH_EVERY: Duration = Duration::from_millis(5);

/// Longest a board is waited for before it counts as never seen.
pub const WATCH_PATIENCE: Duration = Duration::from_secs(10);

/// Boards seen: each one's time to served (ms) from when its push was due
/// and from its acknowledgement, and the boards never seen.
#[derive(Default)]
pub struct Seen {
    pub times: Vec<f64>,
    pub after_ack: Vec<f64>,
    pub lost: usize,
}

impl Seen {
    /// Settles the boards of `bank` that `served` (an as-of) covers, and
    /// those waited for too long.
    pub fn settle(
        &mut self,
        waiting: &mut Waiting,
        bank: i64,
        served: Option<&str>,
        seen: Instant,
    ) {
        let Some(boards) = waiting.get_mut(&bank) else {
            return;
        };
        boards.retain(|(as_of, due, acked)| {
            if served.is_some_and(|s| s >= as_of.as_str()) {
                let ms = |since: &Instant| seen.duration_since(*since).as_secs_f64() * 1000.0;
                self.times.push(ms(due));
                self.after_ack.push(ms(acked));
                false
            } else if seen.duration_since(*due) > WATCH_PATIENCE {
                self.lost += 1;
                false
            } else {
                true
            }
        });
        if boards.is_empty() {
            waiting.remove(&bank);
        }
    }
}

/// What the watch saw on each bank's view and in the lists, and the
/// requests it took.
#[derive(Default)]
pub struct Watched {
    pub bank: Seen,
    pub listed: Seen,
    pub polls: usize,
}

/// Polls, round after round, each bank that has boards waiting and, while
/// any board is not yet in them, the all-banks lists (`/banks`, composed in
/// the same step as the all-banks `/rates`); records every board the API
/// now serves (its as-of or a later one) with the time since it was due.
/// Runs until `done` and nothing is waiting.
pub async fn watch(
    outstanding: Arc<Outstanding>,
    (api, key): (String, String),
    done: CancellationToken,
) -> Watched {
    let http = reqwest::Client::new();
    let mut watched = Watched::default();
    let mut round = tokio::time::interval(WATCH_EVERY);
    round.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        round.tick().await;
        let waiting: Vec<i64> = outstanding.bank.lock().await.keys().copied().collect();
        let unlisted = !outstanding.listed.lock().await.is_empty();
        if waiting.is_empty() && !unlisted {
            if done.is_cancelled() {
                return watched;
            }
            continue;
        }
        watched.polls += waiting.len() + usize::from(unlisted);
        let Watched { bank, listed, .. } = &mut watched;
        let banks = async {
            let mut answers = futures_util::stream::iter(waiting)
                .map(|id| {
                    let (http, api, key) = (&http, &api, &key);
                    async move { (id, served_as_of(http, api, key, id).await) }
                })
                .buffer_unordered(WATCH_CONCURRENCY);
            while let Some((id, served)) = answers.next().await {
                let seen = Instant::now();
                let mut waiting = outstanding.bank.lock().await;
                bank.settle(&mut waiting, id, served.as_deref(), seen);
            }
        };
        let lists = async {
            if !unlisted {
                return;
            }
            let served = listed_as_of(&http, &api, &key).await.unwrap_or_default();
            let seen = Instant::now();
            let mut waiting = outstanding.listed.lock().await;
            let ids: Vec<i64> = waiting.keys().copied().collect();
            for id in ids {
                listed.settle(&mut waiting, id, served.get(&id).map(String::as_str), seen);
            }
        };
        tokio::join!(banks, lists);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_is_seen_once_a_served_as_of_reaches_it() {
        let due = Instant::now();
        let (acked, now) = (
            due + Duration::from_millis(3),
            due + Duration::from_millis(10),
        );
        let mut waiting: Waiting = HashMap::new();
        waiting.insert(
            7,
            vec![
                ("2026-11-20T08:00:00.001Z".into(), due, acked),
                ("2026-11-20T08:00:00.002Z".into(), due, acked),
            ],
        );
        let mut seen = Seen::default();
        seen.settle(&mut waiting, 7, None, due);
        seen.settle(&mut waiting, 7, Some("2026-11-20T08:00:00.001Z"), now);
        assert_eq!((seen.times.len(), waiting[&7].len()), (1, 1));
        // Counted from when it was due, and from its acknowledgement.
        assert_eq!(
            (seen.times[0].round(), seen.after_ack[0].round()),
            (10.0, 7.0)
        );
        seen.settle(&mut waiting, 7, Some("2026-11-20T08:00:00.005Z"), now);
        assert_eq!((seen.times.len(), seen.lost), (2, 0));
        assert!(waiting.is_empty());
    }

    #[test]
    fn a_board_waited_for_past_the_patience_is_lost() {
        let due = Instant::now();
        let mut waiting: Waiting = HashMap::new();
        waiting.insert(7, vec![("2026-11-20T08:00:00.001Z".into(), due, due)]);
        let mut seen = Seen::default();
        seen.settle(&mut waiting, 7, None, due + WATCH_PATIENCE * 2);
        assert_eq!((seen.times.len(), seen.lost), (0, 1));
        assert!(waiting.is_empty());
    }
}
