//! `ratewire-feed load`: many banks publishing at a fixed rate (open loop:
//! each push is due at its own time whether or not earlier ones were
//! answered, and latency counts from that time), or as fast as a number of
//! concurrent publishers can (closed loop, `rate` 0). Reports the
//! acknowledgement latency and, when watching the API, how long each board
//! took to be served (publish-to-visible): on its bank's `/rates?bankId`,
//! and in the all-banks lists (`/banks`). Used by `deploy/bench`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, SecondsFormat, Utc};
use tokio::sync::{Mutex, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::client::{new_bank, IngestClient, Pushed};
use super::market::{seed, DEMO_CURRENCIES};
use super::watch::{watch, Outstanding, Seen, Watched, WATCH_PATIENCE};

/// Twelve more currencies beyond the demo's eighteen, for 30-currency boards.
const MORE_CURRENCIES: [(&str, f64); 12] = [
    ("HKD", 19.90),
    ("SGD", 115.80),
    ("THB", 4.30),
    ("TRY", 4.50),
    ("BRL", 28.10),
    ("MXN", 8.40),
    ("NZD", 92.30),
    ("PLN", 38.90),
    ("CZK", 6.70),
    ("HUF", 0.42),
    ("ILS", 41.60),
    ("QAR", 42.60),
];

#[derive(Debug, Clone)]
pub struct LoadSettings {
    pub banks: usize,
    pub currencies: usize,
    /// Boards per second; 0 pushes as fast as `concurrency` publishers can.
    pub rate: f64,
    /// Stop after this long, or after `boards` boards, whichever is first.
    pub duration: Duration,
    pub boards: Option<usize>,
    /// Most pushes in flight at once.
    pub concurrency: usize,
    /// Poll this API (base URL, key) until each board is served.
    pub watch: Option<(String, String)>,
    /// The chance that a currency's quotes move from one board of a bank
    /// to the next (1: every value changes on every board).
    pub moves: f64,
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    /// `{name}_p50_ms` .. `{name}_max_ms` lines, for [`LoadReport::render`].
    fn lines(&self, name: &str, lines: &mut Vec<String>) {
        for (q, ms) in [
            ("p50", self.p50),
            ("p99", self.p99),
            ("p999", self.p999),
            ("max", self.max),
        ] {
            lines.push(format!("{name}_{q}_ms {ms:.2}"));
        }
    }

    pub fn of(mut samples: Vec<f64>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| {
            samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1]
        };
        Self {
            p50: at(0.50),
            p99: at(0.99),
            p999: at(0.999),
            max: samples[samples.len() - 1],
        }
    }
}

#[derive(Debug, Default)]
pub struct LoadReport {
    pub accepted: usize,
    pub failed: usize,
    pub seconds: f64,
    pub ack: Percentiles,
    pub visible: Option<Percentiles>,
    /// The same from each push's acknowledgement (202) instead of from
    /// when it was due.
    pub visible_after_ack: Option<Percentiles>,
    /// Boards the watch gave up on (not served within its patience).
    pub not_seen: usize,
    /// The same for the all-banks lists.
    pub listed: Option<Percentiles>,
    pub listed_after_ack: Option<Percentiles>,
    pub not_listed: usize,
    /// Requests the watch sent to the API.
    pub polls: usize,
    pub rate_entries: usize,
}

impl LoadReport {
    /// `key value` lines, for scripts.
    pub fn render(&self) -> String {
        let mut lines = vec![
            format!("accepted {}", self.accepted),
            format!("failed {}", self.failed),
            format!("seconds {:.3}", self.seconds),
            format!(
                "boards_per_second {:.1}",
                self.accepted as f64 / self.seconds.max(1e-9)
            ),
            format!("rate_entries {}", self.rate_entries),
        ];
        self.ack.lines("ack", &mut lines);
        if let Some(v) = self.visible {
            v.lines("visible", &mut lines);
            if let Some(v) = self.visible_after_ack {
                v.lines("visible_after_ack", &mut lines);
            }
            lines.push(format!("visible_not_seen {}", self.not_seen));
            lines.push(format!("watch_polls {}", self.polls));
        }
        if let Some(v) = self.listed {
            v.lines("listed", &mut lines);
            if let Some(v) = self.listed_after_ack {
                v.lines("listed_after_ack", &mut lines);
            }
            lines.push(format!("listed_not_seen {}", self.not_listed));
        }
        lines.join("\n")
    }
}

struct Bank {
    id: i64,
    token: String,
}

/// Registers (or reuses, by code) `LOAD0..LOADn` and takes a token for each.
async fn banks(client: &IngestClient, count: usize) -> anyhow::Result<Vec<Bank>> {
    let existing = client.banks().await?;
    let mut banks = Vec::with_capacity(count);
    for i in 0..count {
        let code = format!("LOAD{i}");
        let id = match existing.iter().find(|b| b["code"] == code.as_str()) {
            Some(bank) => bank["id"].as_i64().context("bank without id")?,
            None => {
                client
                    .register_bank(new_bank(
                        &code,
                        &format!("Load Bank {i}"),
                        &format!("https://assets.ratewire.example/banks/load{i}.png"),
                        &[],
                    ))
                    .await?
            }
        };
        let (token, _) = client.create_token(id).await?.context("bank vanished")?;
        banks.push(Bank { id, token });
    }
    Ok(banks)
}

/// A board of the first `currencies` of the demo's, their mid-rates moved
/// by `wobble` (a fraction), with a 2% spread.
pub fn board(as_of: &DateTime<Utc>, currencies: usize, wobble: f64) -> String {
    board_moved(as_of, currencies, |_| wobble)
}

/// The same, each currency's mid moved by its own wobble.
fn board_moved(as_of: &DateTime<Utc>, currencies: usize, wobble: impl Fn(&str) -> f64) -> String {
    let rates: Vec<String> = DEMO_CURRENCIES
        .iter()
        .chain(MORE_CURRENCIES.iter())
        .take(currencies)
        .map(|(code, mid)| {
            let mid = mid * (1.0 + wobble(code));
            format!(
                r#"{{"currency":"{code}","cashBuying":{:.4},"cashSelling":{:.4}}}"#,
                mid * 0.99,
                mid * 1.01
            )
        })
        .collect();
    format!(
        r#"{{"asOf":"{}","rates":[{}]}}"#,
        as_of.to_rfc3339_opts(SecondsFormat::Millis, true),
        rates.join(",")
    )
}

/// The last round, up to `round`, on which bank `bank`'s quote of `code`
/// moved, each moving with `chance` (0 when it never has): the same on
/// every run.
fn last_move(bank: usize, code: &str, round: usize, chance: f64) -> usize {
    let bank = bank.to_string();
    (1..=round)
        .rev()
        .find(|r| {
            let draw = seed(&[&bank, code, &r.to_string()]) % 1_000_000;
            (draw as f64) < chance * 1_000_000.0
        })
        .unwrap_or(0)
}

pub async fn run(
    settings: LoadSettings,
    client: IngestClient,
    shutdown: CancellationToken,
) -> anyhow::Result<LoadReport> {
    let banks = Arc::new(banks(&client, settings.banks.max(1)).await?);
    info!(banks = banks.len(), rate = settings.rate, "load starting");
    let acks = Arc::new(Mutex::new(Vec::new()));
    let failed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let slots = Arc::new(Semaphore::new(settings.concurrency.max(1)));
    let outstanding: Arc<Outstanding> = Arc::default();
    let pushes_done = CancellationToken::new();
    let watcher = settings
        .watch
        .clone()
        .map(|target| tokio::spawn(watch(Arc::clone(&outstanding), target, pushes_done.clone())));
    // As-of times step 1 ms from a whole millisecond in the recent past, so
    // every board is distinct and each bank's are increasing.
    let base = Utc::now() - chrono::Duration::minutes(10);
    let base = base - chrono::Duration::nanoseconds(base.timestamp_subsec_nanos() as i64);

    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut i = 0usize;
    while started.elapsed() < settings.duration
        && settings.boards.is_none_or(|n| i < n)
        && !shutdown.is_cancelled()
    {
        let due = if settings.rate > 0.0 {
            let due = started + Duration::from_secs_f64(i as f64 / settings.rate);
            tokio::time::sleep_until(due.into()).await;
            due
        } else {
            Instant::now()
        };
        let permit = Arc::clone(&slots).acquire_owned().await?;
        let bank_index = i % banks.len();
        let as_of = base + chrono::Duration::milliseconds(i as i64);
        let round = i / banks.len();
        let body = match settings.moves >= 1.0 {
            true => board(&as_of, settings.currencies, (i % 97) as f64 / 10_000.0),
            false => board_moved(&as_of, settings.currencies, |code| {
                let moved = last_move(bank_index, code, round, settings.moves);
                (moved % 97) as f64 / 10_000.0
            }),
        };
        let (client, banks, acks, failed, outstanding, watching) = (
            client.clone(),
            Arc::clone(&banks),
            Arc::clone(&acks),
            Arc::clone(&failed),
            Arc::clone(&outstanding),
            watcher.is_some(),
        );
        tasks.push(tokio::spawn(async move {
            let bank = &banks[bank_index];
            let answer = client.push_board(bank.id, &bank.token, body, None).await;
            drop(permit);
            if !matches!(answer, Pushed::Accepted { .. }) {
                failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            let acked = Instant::now();
            acks.lock()
                .await
                .push(acked.duration_since(due).as_secs_f64() * 1000.0);
            if watching {
                let as_of = as_of.to_rfc3339_opts(SecondsFormat::Millis, true);
                for waiting in [&outstanding.bank, &outstanding.listed] {
                    let mut waiting = waiting.lock().await;
                    waiting
                        .entry(bank.id)
                        .or_default()
                        .push((as_of.clone(), due, acked));
                }
            }
        }));
        i += 1;
    }
    for task in tasks {
        task.await?;
    }
    pushes_done.cancel();
    let watched = match watcher {
        Some(watcher) => Some(watcher.await?),
        None => None,
    };
    let seconds = started.elapsed().as_secs_f64();
    let acks = std::mem::take(&mut *acks.lock().await);
    if let Some(Watched { bank, listed, .. }) = &watched {
        if bank.lost + listed.lost > 0 {
            tracing::warn!(
                bank_view = bank.lost,
                lists = listed.lost,
                "boards not served within {WATCH_PATIENCE:?}"
            );
        }
    }
    let accepted = acks.len();
    let (polls, bank, listed) = match watched {
        Some(Watched {
            polls,
            bank,
            listed,
        }) => (polls, Some(bank), Some(listed)),
        None => (0, None, None),
    };
    let lost = |seen: &Option<Seen>| seen.as_ref().map_or(0, |s| s.lost);
    let (not_seen, not_listed) = (lost(&bank), lost(&listed));
    // From when each push was due, and from its acknowledgement.
    let timed = |seen: Option<Seen>| {
        seen.map(|s| (Percentiles::of(s.times), Percentiles::of(s.after_ack)))
            .unzip()
    };
    let ((visible, visible_after_ack), (listed, listed_after_ack)) = (timed(bank), timed(listed));
    Ok(LoadReport {
        accepted,
        failed: failed.load(std::sync::atomic::Ordering::Relaxed),
        seconds,
        ack: Percentiles::of(acks),
        not_seen,
        not_listed,
        polls,
        visible,
        visible_after_ack,
        listed,
        listed_after_ack,
        rate_entries: accepted * settings.currencies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_sample_at_or_above_the_rank() {
        let p = Percentiles::of((1..=1000).map(f64::from).collect());
        assert_eq!((p.p50, p.p99, p.p999, p.max), (500.0, 990.0, 999.0, 1000.0));
    }

    #[test]
    fn the_report_has_a_line_for_each_figure_the_bench_reads() {
        let p = Percentiles::of(vec![1.0, 2.0]);
        let report = LoadReport {
            accepted: 2,
            seconds: 1.0,
            ack: p,
            visible: Some(p),
            visible_after_ack: Some(p),
            listed: Some(p),
            listed_after_ack: Some(p),
            not_listed: 1,
            ..LoadReport::default()
        };
        let text = report.render();
        for line in [
            "ack_p50_ms 1.00",
            "ack_max_ms 2.00",
            "visible_p99_ms 2.00",
            "visible_p999_ms 2.00",
            "visible_not_seen 0",
            "visible_after_ack_p99_ms 2.00",
            "listed_after_ack_p99_ms 2.00",
            "listed_p50_ms 1.00",
            "listed_max_ms 2.00",
            "listed_not_seen 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
    }

    #[test]
    fn quotes_move_on_about_the_rounds_their_chance_says() {
        assert_eq!(last_move(3, "USD", 500, 0.0), 0);
        assert_eq!(last_move(3, "USD", 500, 1.0), 500);
        let moved = (1..=2000)
            .filter(|r| last_move(3, "USD", *r, 0.1) == *r)
            .count();
        assert!((150..=250).contains(&moved), "{moved} of 2000 rounds");
        assert_eq!(last_move(3, "USD", 700, 0.1), last_move(3, "USD", 700, 0.1));
    }

    #[test]
    fn a_load_board_quotes_thirty_valid_currencies() {
        let body = board(&Utc::now(), 30, 0.001);
        let parsed = ratewire_ingest::board::parse(body.as_bytes(), Utc::now()).expect("valid");
        assert_eq!(parsed.rates().len(), 30);
    }
}
