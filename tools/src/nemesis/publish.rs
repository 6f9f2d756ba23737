//! The publishers: one per bank, each pushing a board every interval and
//! the next only once the last was accepted, every push under its own
//! `Idempotency-Key` and retried with it until ingest answers 202, as
//! docs/publishers.md asks of a bank's feed. Every answer is kept.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// How long a publisher waits for an answer before it calls it silence.
pub const SILENCE: Duration = Duration::from_secs(10);

/// The currencies on every board, with the level each bank's cash buying
/// rate wanders around, and the alert threshold each crosses.
pub const CURRENCIES: [(&str, f64); 3] = [("USD", 150.0), ("EUR", 170.0), ("GBP", 190.0)];

/// A bank the nemesis registered, with its publisher token.
#[derive(Debug, Clone)]
pub struct Bank {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub token: String,
}

/// One board's four rates of one currency, in hundredths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    pub cash_buying: i64,
    pub cash_selling: i64,
    pub transactional_buying: i64,
    pub transactional_selling: i64,
}

impl Quote {
    fn around(buying: i64) -> Self {
        Self {
            cash_buying: buying,
            cash_selling: buying + 120,
            transactional_buying: buying + 10,
            transactional_selling: buying + 110,
        }
    }

    /// By the API's field name.
    pub fn field(&self, field: &str) -> Option<i64> {
        match field {
            "cashBuying" => Some(self.cash_buying),
            "cashSelling" => Some(self.cash_selling),
            "transactionalBuying" => Some(self.transactional_buying),
            "transactionalSelling" => Some(self.transactional_selling),
            _ => None,
        }
    }
}

/// Hundredths as the JSON number a publisher writes (two decimals).
pub fn decimal(hundredths: i64) -> String {
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

/// A board as sent.
#[derive(Debug, Clone)]
pub struct Board {
    pub bank: i64,
    pub seq: u64,
    pub as_of: DateTime<Utc>,
    pub quotes: Vec<(&'static str, Quote)>,
}

impl Board {
    pub fn body(&self) -> String {
        let rates: Vec<Value> = self
            .quotes
            .iter()
            .map(|(currency, q)| {
                let number =
                    |v: i64| -> Value { serde_json::from_str(&decimal(v)).expect("a number") };
                json!({"currency": currency,
                       "cashBuying": number(q.cash_buying), "cashSelling": number(q.cash_selling),
                       "transactionalBuying": number(q.transactional_buying),
                       "transactionalSelling": number(q.transactional_selling)})
            })
            .collect();
        json!({"asOf": self.as_of.to_rfc3339_opts(SecondsFormat::Millis, true), "rates": rates})
            .to_string()
    }

    pub fn quote(&self, currency: &str) -> Option<Quote> {
        self.quotes
            .iter()
            .find(|(c, _)| *c == currency)
            .map(|(_, q)| *q)
    }
}

/// What one push was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Accepted {
        event_id: String,
    },
    /// 503 with Retry-After: the promised answer while something is down.
    Unavailable {
        retry_after: Duration,
    },
    /// Anything else: another status, 503 without Retry-After, silence
    /// past [`SILENCE`], no connection.
    Wrong(String),
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub at: Instant,
    pub took: Duration,
    pub answer: Answer,
}

/// A board and every answer its pushes got.
#[derive(Debug, Clone)]
pub struct Push {
    pub board: Board,
    pub attempts: Vec<Attempt>,
}

impl Push {
    pub fn first(&self) -> Instant {
        self.attempts
            .first()
            .map(|a| a.at)
            .unwrap_or_else(Instant::now)
    }

    /// When it was accepted, and its event id.
    pub fn accepted(&self) -> Option<(Instant, &str)> {
        self.attempts.iter().find_map(|a| match &a.answer {
            Answer::Accepted { event_id } => Some((a.at + a.took, event_id.as_str())),
            _ => None,
        })
    }
}

/// Every push of every bank, in the order they were made.
pub type Pushes = Arc<Mutex<Vec<Push>>>;

pub struct Publisher {
    pub http: reqwest::Client,
    pub ingest: String,
    pub interval: Duration,
}

impl Publisher {
    /// Publishes for `bank` until `stop`; the board in flight then is
    /// pushed until accepted or `give_up`.
    pub async fn run(
        &self,
        bank: Bank,
        seed: u64,
        pushes: Pushes,
        stop: CancellationToken,
        give_up: CancellationToken,
    ) {
        let mut rng = StdRng::seed_from_u64(seed ^ bank.id as u64);
        let mut levels: Vec<i64> = CURRENCIES
            .iter()
            .map(|(_, level)| (*level * 100.0) as i64 + rng.gen_range(-150..=150))
            .collect();
        let mut last_as_of = Utc::now() - chrono::Duration::seconds(1);
        for seq in 0.. {
            if stop.is_cancelled() {
                return;
            }
            for (level, (_, centre)) in levels.iter_mut().zip(CURRENCIES) {
                let centre = (centre * 100.0) as i64;
                *level = (*level + rng.gen_range(-60..=60)).clamp(centre - 200, centre + 200);
            }
            // Each board's asOf is its own millisecond, as the API writes it.
            let as_of = Utc::now()
                .trunc_subsecs(3)
                .max(last_as_of + chrono::Duration::milliseconds(1));
            last_as_of = as_of;
            let board = Board {
                bank: bank.id,
                seq,
                as_of,
                quotes: CURRENCIES
                    .iter()
                    .zip(&levels)
                    .map(|((c, _), l)| (*c, Quote::around(*l)))
                    .collect(),
            };
            let index = {
                let mut all = pushes.lock().expect("pushes");
                all.push(Push {
                    board: board.clone(),
                    attempts: Vec::new(),
                });
                all.len() - 1
            };
            let started = Instant::now();
            let key = format!("nemesis-{}-{}-{seq}", bank.id, seed);
            let body = board.body();
            loop {
                let attempt = self.push(&bank, &key, &body).await;
                let wait = match &attempt.answer {
                    Answer::Accepted { .. } => None,
                    Answer::Unavailable { retry_after } => {
                        Some((*retry_after).min(Duration::from_secs(2)))
                    }
                    Answer::Wrong(_) => Some(Duration::from_millis(500)),
                };
                pushes.lock().expect("pushes")[index].attempts.push(attempt);
                let Some(wait) = wait else { break };
                if give_up.is_cancelled() {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = give_up.cancelled() => return,
                }
            }
            let spent = started.elapsed();
            if spent < self.interval {
                tokio::select! {
                    _ = tokio::time::sleep(self.interval - spent) => {}
                    _ = stop.cancelled() => return,
                }
            }
        }
    }

    async fn push(&self, bank: &Bank, key: &str, body: &str) -> Attempt {
        let at = Instant::now();
        let sent = self
            .http
            .post(format!("{}/v1/banks/{}/boards", self.ingest, bank.id))
            .bearer_auth(&bank.token)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .timeout(SILENCE)
            .body(body.to_owned())
            .send()
            .await;
        let answer = match sent {
            Err(e) if e.is_timeout() => Answer::Wrong(format!("no answer within {SILENCE:?}")),
            Err(e) => Answer::Wrong(format!(
                "no answer: {}",
                super::read::causes(&e.without_url())
            )),
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok());
                let text = response.text().await.unwrap_or_default();
                let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                match (status, retry_after) {
                    (202, _) => match body["eventId"].as_str() {
                        Some(id) => Answer::Accepted {
                            event_id: id.to_owned(),
                        },
                        None => Answer::Wrong(format!("202 without an eventId: {text}")),
                    },
                    (503, Some(secs)) => Answer::Unavailable {
                        retry_after: Duration::from_secs(secs),
                    },
                    (503, None) => Answer::Wrong(format!("503 without Retry-After: {text}")),
                    _ => Answer::Wrong(format!(
                        "{status}: {}",
                        text.chars().take(200).collect::<String>()
                    )),
                }
            }
        };
        Attempt {
            at,
            took: at.elapsed(),
            answer,
        }
    }
}
