//! The views of banks whose boards changed are written by a task of their
//! own, beside the fold, so the next batch never waits for Redis: the fold
//! hands the banks over and goes on; the task takes every change waiting,
//! writes each bank once and records when its events became visible.
//!
//! One task writes every bank view, rebuilds included, one write at a time:
//! each write reads Postgres after the one before it reached Redis, so an
//! older rendering never lands over a newer one. Each written view then
//! goes to the task of the views over all banks ([`crate::views::aggregates`]),
//! with the currencies whose history the fold changed, so best rates and
//! /currencies follow it at once. The all-banks lists are joined by the
//! API from the elements written here.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::error::Result;
use crate::metrics as report;
use crate::views::aggregates::{Aggregates, Work};
use crate::views::redis::{Target, ViewUpdate};

/// Most events remembered for the visibility delay while Redis is away;
/// beyond it the delay is known well enough from the ones kept.
const UNSEEN_KEPT: usize = 100_000;

/// How soon a failed write is tried again when nothing new arrives.
const RETRY_AFTER: Duration = Duration::from_secs(1);

enum Message {
    /// Banks whose boards changed in a committed batch, the currencies
    /// whose history it changed, and the `occurredAt` of its events.
    Changed {
        target: Target,
        banks: BTreeSet<BankId>,
        currencies: BTreeSet<CurrencyCode>,
        occurred: Vec<DateTime<Utc>>,
    },
    /// Every view from Postgres; answers with the number of banks.
    Rebuild {
        target: Target,
        done: oneshot::Sender<Result<usize>>,
    },
}

/// The fold's handle on the task.
pub struct BankViews {
    messages: mpsc::UnboundedSender<Message>,
    task: JoinHandle<()>,
}

impl BankViews {
    /// Starts the task; what it writes goes on to `aggregates`.
    pub fn spawn(aggregates: Aggregates) -> Self {
        let (messages, inbox) = mpsc::unbounded_channel();
        Self {
            messages,
            task: tokio::spawn(run(inbox, aggregates)),
        }
    }

    /// Queues the views of `banks` for writing, and the best rates of
    /// `currencies` for recomputing after them; returns at once.
    pub fn changed(
        &self,
        target: &Target,
        banks: BTreeSet<BankId>,
        currencies: BTreeSet<CurrencyCode>,
        occurred: Vec<DateTime<Utc>>,
    ) {
        if banks.is_empty() && currencies.is_empty() {
            return;
        }
        let _ = self.messages.send(Message::Changed {
            target: target.clone(),
            banks,
            currencies,
            occurred,
        });
    }

    /// Rebuilds every view of `target` from Postgres, after the writes
    /// already queued and before any queued later.
    pub async fn rebuild(&self, target: &Target) -> Result<usize> {
        let (done, answer) = oneshot::channel();
        let _ = self.messages.send(Message::Rebuild {
            target: target.clone(),
            done,
        });
        answer
            .await
            .unwrap_or_else(|_| Err(crate::Error::Stopped("bank views")))
    }

    /// Writes what is still queued (one try) and ends the task.
    pub async fn finish(self) {
        drop(self.messages);
        let _ = self.task.await;
    }
}

/// The changes not yet in Redis, for one generation.
struct Pending {
    target: Target,
    banks: BTreeSet<BankId>,
    currencies: BTreeSet<CurrencyCode>,
    unseen: Vec<DateTime<Utc>>,
}

impl Pending {
    fn add(
        &mut self,
        banks: BTreeSet<BankId>,
        currencies: BTreeSet<CurrencyCode>,
        occurred: Vec<DateTime<Utc>>,
    ) {
        self.banks.extend(banks);
        self.currencies.extend(currencies);
        let room = UNSEEN_KEPT.saturating_sub(self.unseen.len());
        self.unseen.extend(occurred.into_iter().take(room));
    }
}

async fn run(mut inbox: mpsc::UnboundedReceiver<Message>, aggregates: Aggregates) {
    let mut pending: Option<Pending> = None;
    let mut failed = false;
    loop {
        // `None`: the fold is gone; `Some(None)`: time to retry.
        let woken = if failed {
            tokio::select! {
                message = inbox.recv() => message.map(Some),
                _ = tokio::time::sleep(RETRY_AFTER) => Some(None),
            }
        } else {
            inbox.recv().await.map(Some)
        };
        let Some(mut next) = woken else { break };
        // Everything that waited goes into one write.
        let mut open = true;
        loop {
            if let Some(message) = next.take() {
                take(&mut pending, &aggregates, message).await;
            }
            match inbox.try_recv() {
                Ok(message) => next = Some(message),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        failed = !write_pending(&mut pending, &aggregates).await;
        if !open {
            break;
        }
    }
    if failed && !write_pending(&mut pending, &aggregates).await {
        info!("stopping with bank views unwritten; the next start rebuilds them");
    }
}

async fn take(pending: &mut Option<Pending>, aggregates: &Aggregates, message: Message) {
    match message {
        Message::Changed {
            target,
            banks,
            currencies,
            occurred,
        } => {
            // A switch to another generation leaves the old one's views
            // behind.
            let same = pending
                .as_ref()
                .is_some_and(|p| p.target.generation == target.generation);
            if !same {
                *pending = Some(Pending {
                    target,
                    banks: BTreeSet::new(),
                    currencies: BTreeSet::new(),
                    unseen: Vec::new(),
                });
            }
            if let Some(pending) = pending {
                pending.add(banks, currencies, occurred);
            }
        }
        Message::Rebuild { target, done } => {
            let mut views = target.views.clone();
            let rebuilt = crate::views::rebuild::rebuild_views(&target.pool, &mut views).await;
            if rebuilt.is_ok() {
                // It read every bank after the changes queued before it.
                if let Some(p) = pending.take() {
                    report::visible(&p.unseen, Utc::now());
                }
                aggregates.send(Work::Resync { target });
            }
            let _ = done.send(rebuilt);
        }
    }
}

/// Writes the pending views, then hands them on to the views over all
/// banks; false when that failed (they stay pending).
async fn write_pending(pending: &mut Option<Pending>, aggregates: &Aggregates) -> bool {
    let Some(waiting) = pending.as_mut() else {
        return true;
    };
    match write(waiting).await {
        Ok(updates) => {
            report::visible(&waiting.unseen, Utc::now());
            if let Some(written) = pending.take() {
                hand_on(aggregates, written, updates);
            }
            true
        }
        Err(e) => {
            report::view_error(&e);
            warn!(error = %e, banks = waiting.banks.len(), "bank views not refreshed; will retry");
            false
        }
    }
}

/// The views just written, with the currencies whose history changed and
/// the events behind them, to the task of the views over all banks.
fn hand_on(aggregates: &Aggregates, written: Pending, updates: Vec<ViewUpdate>) {
    let Pending {
        target,
        currencies,
        unseen,
        ..
    } = written;
    let mut currencies: Vec<CurrencyCode> = currencies.into_iter().collect();
    let mut occurred = unseen;
    for update in updates {
        aggregates.send(Work::Banks {
            target: target.clone(),
            version: update.version,
            banks: update.banks,
            currencies: std::mem::take(&mut currencies),
            occurred: std::mem::take(&mut occurred),
        });
    }
    if !currencies.is_empty() {
        // No bank view to write (a backfill behind the latest boards).
        aggregates.send(Work::Currencies { target, currencies });
    }
}

async fn write(pending: &mut Pending) -> Result<Vec<ViewUpdate>> {
    let banks: Vec<BankId> = pending.banks.iter().copied().collect();
    let started = Instant::now();
    let updates = ViewUpdate::load_banks(&pending.target.pool, &banks).await?;
    let read = started.elapsed();
    for update in &updates {
        pending.target.views.apply(update).await?;
    }
    debug!(
        banks = banks.len(),
        read_ms = read.as_secs_f64() * 1e3,
        write_ms = (started.elapsed() - read).as_secs_f64() * 1e3,
        "bank views refreshed"
    );
    Ok(updates)
}
