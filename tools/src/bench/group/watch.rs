//! Boards published by many banks, and when /rates first showed each: a
//! watcher reads every bank's `lastRatesUpdatedAt` on the all-banks
//! /rates every few milliseconds. A bank's boards are folded in order, so
//! once it shows an as-of time every board of that bank up to it is
//! visible.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::feed::client::{new_bank, IngestClient, Pushed};
use crate::feed::load::board;

/// How often the watcher reads /rates.
const POLL: Duration = Duration::from_millis(2);

/// Currencies on each board.
const CURRENCIES: usize = 5;

/// A board's 202 and the first moment /rates showed it.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// The bank's number (0-based), and the board's as-of time (ms).
    pub bank: usize,
    pub as_of: i64,
    pub accepted: Instant,
    pub visible: Instant,
}

impl Seen {
    pub fn ms(&self) -> f64 {
        self.visible.duration_since(self.accepted).as_secs_f64() * 1000.0
    }
}

struct Bank {
    id: i64,
    token: String,
    /// The last as-of time given to a board (ms), so each is later.
    last_as_of: Mutex<i64>,
}

#[derive(Default)]
struct Book {
    /// Per bank: the newest as-of time /rates showed (ms).
    shown: Vec<i64>,
    /// Per bank: boards accepted and not yet shown, oldest first.
    pending: Vec<VecDeque<(i64, Instant)>>,
    seen: Vec<Seen>,
}

/// The banks, their boards in flight and what was seen of them.
#[derive(Clone)]
pub struct Boards {
    ingest: IngestClient,
    banks: Arc<Vec<Bank>>,
    book: Arc<Mutex<Book>>,
}

impl Boards {
    /// Registers `count` banks (`GRP0`..) with a token each.
    pub async fn register(ingest: IngestClient, count: usize) -> anyhow::Result<Self> {
        let mut banks = Vec::with_capacity(count);
        for i in 0..count {
            let id = ingest
                .register_bank(new_bank(
                    &format!("GRP{i}"),
                    &format!("Group Bank {i}"),
                    "https://img.test/group.png",
                    &[],
                ))
                .await?;
            let (token, _) = ingest.create_token(id).await?.context("a token")?;
            banks.push(Bank {
                id,
                token,
                last_as_of: Mutex::new(0),
            });
        }
        let book = Book {
            shown: vec![0; count],
            pending: vec![VecDeque::new(); count],
            seen: Vec::new(),
        };
        Ok(Self {
            ingest,
            banks: Arc::new(banks),
            book: Arc::new(Mutex::new(book)),
        })
    }

    pub fn len(&self) -> usize {
        self.banks.len()
    }

    /// Publishes one board of bank number `bank` (its as-of time now, and
    /// later than its last), and notes its 202.
    pub async fn publish(&self, bank: usize) -> anyhow::Result<Instant> {
        let bank_ = &self.banks[bank];
        let as_of = {
            let mut last = bank_.last_as_of.lock().expect("as-of");
            *last = Utc::now().timestamp_millis().max(*last + 1);
            *last
        };
        let at = Utc.timestamp_millis_opt(as_of).single().context("a time")?;
        let wobble = (as_of % 1000) as f64 / 10_000.0;
        let body = board(&at, CURRENCIES, wobble);
        match self
            .ingest
            .push_board(bank_.id, &bank_.token, body, None)
            .await
        {
            Pushed::Accepted { .. } => {
                let accepted = Instant::now();
                let mut book = self.book.lock().expect("book");
                if book.shown[bank] >= as_of {
                    // Folded before its 202 reached us.
                    book.seen.push(Seen {
                        bank,
                        as_of,
                        accepted,
                        visible: accepted,
                    });
                } else {
                    book.pending[bank].push_back((as_of, accepted));
                }
                Ok(accepted)
            }
            other => bail!("a board was not accepted: {other:?}"),
        }
    }

    /// Boards accepted and not yet seen.
    pub fn pending(&self) -> usize {
        let book = self.book.lock().expect("book");
        book.pending.iter().map(VecDeque::len).sum()
    }

    /// What was seen since the last call.
    pub fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut self.book.lock().expect("book").seen)
    }

    /// Waits until every accepted board is seen (at most `within`).
    pub async fn settled(&self, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        while self.pending() > 0 {
            if Instant::now() > deadline {
                bail!(
                    "{} boards were not shown on /rates within {within:?}",
                    self.pending()
                );
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    /// Reads /rates every [`POLL`] until `stop`, noting when each board
    /// is first shown.
    pub fn watch(&self, api: String, key: String, stop: CancellationToken) {
        let this = self.clone();
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let url = format!("{api}/api/v1/rates");
            while !stop.is_cancelled() {
                if let Ok(answer) = http.get(&url).header("x-api-key", &key).send().await {
                    if let Ok(body) = answer.json::<Value>().await {
                        this.note(&body, Instant::now());
                    }
                }
                tokio::time::sleep(POLL).await;
            }
        });
    }

    fn note(&self, body: &Value, now: Instant) {
        let Some(outer) = body["data"].as_array() else {
            return;
        };
        let mut book = self.book.lock().expect("book");
        let book = &mut *book;
        for bank in outer.iter().filter_map(|o| o["data"][0].as_object()) {
            let Some(index) = self
                .banks
                .iter()
                .position(|b| Some(b.id) == bank["id"].as_i64())
            else {
                continue;
            };
            let Some(updated) = bank["lastRatesUpdatedAt"]
                .as_str()
                .and_then(|t| t.parse::<DateTime<Utc>>().ok())
            else {
                continue;
            };
            let shown = updated.timestamp_millis();
            if shown <= book.shown[index] {
                continue;
            }
            book.shown[index] = shown;
            while let Some(&(as_of, accepted)) = book.pending[index].front() {
                if as_of > shown {
                    break;
                }
                book.pending[index].pop_front();
                book.seen.push(Seen {
                    bank: index,
                    as_of,
                    accepted,
                    visible: now,
                });
            }
        }
    }
}
