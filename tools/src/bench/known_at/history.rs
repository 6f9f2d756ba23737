//! The history the known-at bench reads: 50 banks of 30 currencies, each
//! publishing a board every hour over the bench's days (a year: 438,000
//! boards), loaded through the backfill as a publisher loading its past
//! would (ingest, the log, the fold), a stretch of days at a time. Between
//! the stretches come ten corrections and five retractions of boards of
//! the stretch just loaded, so that both their as-of times and the times
//! they became known are spread over the history.
//!
//! Every board is made from the demo's market (tools/src/feed/market.rs)
//! in the bank's style with a little noise of its own per hour, the same
//! on every run.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use anyhow::{bail, Context};
use chrono::{DateTime, Duration, DurationRound, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use super::super::say;
use crate::feed::backfill::{self, board_body, FileBoard, FileContents, Sending};
use crate::feed::client::{new_bank, IngestClient, Pushed};
use crate::feed::market::{self, Style};
use crate::feed::DEMO_CURRENCIES;

/// Banks publishing.
pub const BANKS: usize = 50;
/// Corrections and retractions spread over the history.
const CORRECTIONS: usize = 10;
const RETRACTIONS: usize = 5;
/// The stretches the history is loaded in (fewer for a history of fewer
/// hours).
const STRETCHES: usize = 12;

/// Twelve currencies beyond the demo's eighteen, for boards of 30 as the
/// other benches' load publishes (tools/src/feed/load.rs).
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

/// The 30 currencies every board quotes.
pub fn currencies() -> impl Iterator<Item = (&'static str, f64)> {
    DEMO_CURRENCIES.iter().copied().chain(MORE_CURRENCIES)
}

/// A bank of the history and its publisher token.
pub struct Bank {
    pub id: i64,
    code: String,
    token: String,
    style: Style,
}

/// Registers the banks (`HIST1`..`HIST50`) and takes a token for each.
pub async fn register(client: &IngestClient) -> anyhow::Result<Vec<Bank>> {
    let mut banks = Vec::with_capacity(BANKS);
    for i in 1..=BANKS {
        let code = format!("HIST{i}");
        let id = client
            .register_bank(new_bank(
                &code,
                &format!("History Bank {i}"),
                &format!("https://assets.ratewire.example/banks/hist{i}.png"),
                &[],
            ))
            .await?;
        let (token, _) = client.create_token(id).await?.context("bank vanished")?;
        banks.push(Bank {
            id,
            style: Style::of(&code),
            code,
            token,
        });
    }
    Ok(banks)
}

/// What loading the history did.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Boards accepted (each once), and their rate entries.
    pub boards: usize,
    pub entries: usize,
    pub corrections: usize,
    pub retractions: usize,
    /// From the first push to the last answer.
    pub seconds: f64,
    /// The as-of times of the first and the last hour.
    pub first_as_of: DateTime<Utc>,
    pub last_as_of: DateTime<Utc>,
}

/// A board revised later: a bank's (index) board of an hour (index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Pick {
    bank: usize,
    hour: usize,
}

/// Which stretch each correction and retraction falls in, and its board:
/// corrections in the middle of their stretch, retractions a quarter in,
/// each of another bank.
fn picks(stretches: &[(usize, usize)], count: usize, salt: usize) -> Vec<(usize, Pick)> {
    (0..count)
        .map(|i| {
            let stretch = (2 * i + salt) * stretches.len() / (2 * count);
            let (from, to) = stretches[stretch.min(stretches.len() - 1)];
            let into = if salt == 0 { 2 } else { 4 };
            let hour = (from + (to - from) / into + i).min(to - 1);
            let bank = (7 * i + 3 + 11 * salt) % BANKS;
            (stretch, Pick { bank, hour })
        })
        .collect()
}

/// The hours `[from, to)` of each stretch.
fn stretches(hours: usize, count: usize) -> Vec<(usize, usize)> {
    let count = count.clamp(1, hours.max(1));
    (0..count)
        .map(|k| (k * hours / count, (k + 1) * hours / count))
        .collect()
}

/// A bank's board at `as_of`, its mids moved by `nudge` (a correction's).
fn board_at(bank: &Bank, as_of: DateTime<Utc>, nudge: f64) -> String {
    let stamp = as_of.timestamp().to_string();
    let mut rng = StdRng::seed_from_u64(market::seed(&["hour", &bank.code, &stamp]));
    let date = as_of.date_naive();
    let rates: Vec<String> = currencies()
        .map(|(code, base)| {
            let noise = rng.gen_range(-0.0015..0.0015);
            let mid = market::mid(code, base, date) * (1.0 + bank.style.offset + noise + nudge);
            bank.style.entry(code, mid)
        })
        .collect();
    board_body(&as_of, &format!("[{}]", rates.join(",")))
}

/// `body` with a `reason`.
fn with_reason(body: &str, reason: &str) -> String {
    let reason = serde_json::Value::from(reason).to_string();
    format!(
        "{},\"reason\":{reason}}}",
        body.strip_suffix('}').unwrap_or(body)
    )
}

/// Publishes `days` days of hourly boards of every bank, ending with the
/// last whole hour, stretch by stretch, with the corrections and
/// retractions between the stretches.
pub async fn load(
    client: &IngestClient,
    ingest_url: &str,
    banks: &[Bank],
    days: u64,
) -> anyhow::Result<Loaded> {
    let hours = usize::try_from(days)? * 24;
    let last = Utc::now().duration_trunc(Duration::hours(1))? - Duration::hours(1);
    let as_of = |hour: usize| last - Duration::hours((hours - 1 - hour) as i64);
    let stretches = stretches(hours, STRETCHES);
    let corrections = picks(&stretches, CORRECTIONS, 0);
    let retractions = picks(&stretches, RETRACTIONS, 1);
    let retracted: HashSet<Pick> = retractions.iter().map(|(_, p)| *p).collect();
    let tokens: HashMap<i64, String> = banks.iter().map(|b| (b.id, b.token.clone())).collect();
    let http = reqwest::Client::new();
    let mut loaded = Loaded {
        first_as_of: as_of(0),
        last_as_of: as_of(hours - 1),
        ..Loaded::default()
    };
    let started = Instant::now();
    for (k, &(from, to)) in stretches.iter().enumerate() {
        say(format!(
            "history: stretch {}/{} ({} to {})",
            k + 1,
            stretches.len(),
            as_of(from).format("%Y-%m-%d %H:00"),
            as_of(to - 1).format("%Y-%m-%d %H:00")
        ));
        // The boards to be retracted go first, so that they are in force
        // while the stretch loads; their event ids are needed.
        let mut to_retract = Vec::new();
        for (_, pick) in retractions.iter().filter(|(s, _)| *s == k) {
            let bank = &banks[pick.bank];
            let body = board_at(bank, as_of(pick.hour), 0.0);
            let event_id = accepted(client.push_board(bank.id, &bank.token, body, None).await)?;
            loaded.boards += 1;
            to_retract.push((bank, event_id));
        }
        let boards: Vec<FileBoard> = (from..to)
            .flat_map(|hour| (0..banks.len()).map(move |bank| Pick { bank, hour }))
            .filter(|pick| !retracted.contains(pick))
            .map(|pick| {
                let bank = &banks[pick.bank];
                let at = as_of(pick.hour);
                FileBoard {
                    bank_id: bank.id,
                    as_of: at,
                    body: board_at(bank, at, 0.0),
                    origin: format!("hour {}", pick.hour),
                    entry_origins: None,
                    entries: 30,
                }
            })
            .collect();
        let sending = Sending {
            tokens: tokens.clone(),
            concurrency: banks.len(),
            attempts: 6,
            dry_run: false,
        };
        let contents = FileContents {
            boards,
            unplaced: Vec::new(),
        };
        let summary = backfill::publish(
            "known-at history",
            contents,
            sending,
            client.clone(),
            CancellationToken::new(),
        )
        .await?;
        if !summary.complete() {
            bail!("the history was not all published:\n{}", summary.render());
        }
        loaded.boards += summary.accepted.boards;
        for (i, (_, pick)) in corrections.iter().enumerate().filter(|(_, (s, _))| *s == k) {
            let bank = &banks[pick.bank];
            let body = with_reason(
                &board_at(bank, as_of(pick.hour), 0.002),
                &format!(
                    "bench correction {}: the published board was mistyped",
                    i + 1
                ),
            );
            accepted(client.push_board(bank.id, &bank.token, body, None).await)?;
            loaded.corrections += 1;
        }
        for (bank, event_id) in to_retract {
            retract(&http, ingest_url, bank, &event_id).await?;
            loaded.retractions += 1;
        }
    }
    loaded.entries = loaded.boards * 30;
    loaded.seconds = started.elapsed().as_secs_f64();
    Ok(loaded)
}

/// The event id of an accepted push.
fn accepted(pushed: Pushed) -> anyhow::Result<String> {
    match pushed {
        Pushed::Accepted { event_id } => Ok(event_id),
        Pushed::Rejected {
            status,
            message,
            errors,
        } => bail!("a board was refused: {status} {message} {errors:?}"),
        Pushed::Unavailable { cause } => bail!("ingest did not take a board: {cause}"),
    }
}

/// Retracts a board, with a reason.
async fn retract(
    http: &reqwest::Client,
    ingest_url: &str,
    bank: &Bank,
    event_id: &str,
) -> anyhow::Result<()> {
    let answer = http
        .delete(format!(
            "{ingest_url}/v1/banks/{}/boards/{event_id}",
            bank.id
        ))
        .bearer_auth(&bank.token)
        .json(&serde_json::json!({"reason": "bench retraction: published by mistake"}))
        .send()
        .await?;
    if answer.status() != reqwest::StatusCode::ACCEPTED {
        bail!(
            "retracting {event_id} was answered {}: {}",
            answer.status(),
            answer.text().await.unwrap_or_default()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bank() -> Bank {
        Bank {
            id: 1,
            code: "HIST1".into(),
            token: String::new(),
            style: Style::of("HIST1"),
        }
    }

    #[test]
    fn a_board_of_the_history_is_valid_for_ingest_with_thirty_currencies() {
        let at = Utc::now().duration_trunc(Duration::hours(1)).unwrap() - Duration::hours(5);
        let body = with_reason(&board_at(&bank(), at, 0.002), "mistyped");
        let parsed = ratewire_ingest::board::parse(body.as_bytes(), Utc::now()).expect("valid");
        assert_eq!(parsed.rates().len(), 30);
        assert_eq!(board_at(&bank(), at, 0.0), board_at(&bank(), at, 0.0));
        assert_ne!(board_at(&bank(), at, 0.0), board_at(&bank(), at, 0.002));
    }

    #[test]
    fn revisions_are_spread_over_the_stretches_and_never_revise_one_board_twice() {
        for days in [1usize, 7, 365] {
            let stretches = stretches(days * 24, STRETCHES);
            assert_eq!(stretches.last().unwrap().1, days * 24);
            let corrections = picks(&stretches, CORRECTIONS, 0);
            let retractions = picks(&stretches, RETRACTIONS, 1);
            let all: HashSet<Pick> = corrections
                .iter()
                .chain(&retractions)
                .map(|(_, p)| *p)
                .collect();
            assert_eq!(all.len(), CORRECTIONS + RETRACTIONS, "{days} days");
            for (stretch, pick) in corrections.iter().chain(&retractions) {
                let (from, to) = stretches[*stretch];
                assert!((from..to).contains(&pick.hour), "{days} days: {pick:?}");
            }
        }
        let year = stretches(365 * 24, STRETCHES);
        let used: HashSet<usize> = picks(&year, CORRECTIONS, 0)
            .iter()
            .map(|(s, _)| *s)
            .collect();
        assert!(used.len() >= 8, "corrections in {used:?}");
    }
}
