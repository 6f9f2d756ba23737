//! Backfill: publishes past boards from a file through ingest, as the
//! bank's publisher would have, so history fills in exactly as live boards
//! do (the projector files an older board in history without touching the
//! latest one).
//!
//! Two formats (see docs/publishers.md):
//! - CSV with a header naming `bankId, asOf, currency, cashBuying,
//!   cashSelling` and optionally `transactionalBuying, transactionalSelling`;
//!   rows with the same bank and as-of time form one board.
//! - JSON: an array of boards, or one board per line (JSON Lines), each a
//!   push body plus its bank: `{"bankId": 1, "asOf": "...", "rates": [...]}`.
//!
//! Every board is checked with ingest's own rules before it is sent, then
//! pushed with an `Idempotency-Key` derived from its bank and body, so an
//! interrupted backfill can simply be run again. Boards of one bank go in
//! as-of order, one at a time; banks go in parallel.

mod file;

pub use file::{board_body, read_csv, read_file, read_json, FileBoard, FileContents, Format};

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use futures_util::stream::{self, StreamExt};
use ratewire_service::progress::Progress;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::client::{IngestClient, Pushed};

#[derive(Debug, Clone)]
pub struct BackfillSettings {
    pub file: PathBuf,
    /// When `None`, taken from the file's extension.
    pub format: Option<Format>,
    pub sending: Sending,
}

/// How boards are sent, wherever they were read from.
#[derive(Debug, Clone, Default)]
pub struct Sending {
    /// Publisher tokens given on the command line, by bank. Banks without
    /// one get a token made with the operator token, revoked at the end.
    pub tokens: HashMap<i64, String>,
    /// Banks published in parallel.
    pub concurrency: usize,
    /// Tries per board while ingest answers 503 or does not answer.
    pub attempts: u32,
    /// Check the boards and report, sending nothing.
    pub dry_run: bool,
}

/// Boards and rate entries counted together.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub boards: usize,
    pub entries: usize,
}

impl Tally {
    fn add(&mut self, board: &FileBoard) {
        self.boards += 1;
        self.entries += board.entries;
    }
}

/// What a backfill did.
#[derive(Debug, Default)]
pub struct Summary {
    pub file: String,
    pub dry_run: bool,
    pub banks: usize,
    pub accepted: Tally,
    pub rejected: Tally,
    /// Not delivered: ingest kept answering 503, or was not reachable.
    pub failed: Tally,
    /// Not tried: the run was interrupted.
    pub not_sent: Tally,
    /// Rows that could not be read into any board.
    pub unplaced: Vec<(String, String)>,
    /// Each rejected or failed board and why.
    pub problems: Vec<(String, Vec<String>)>,
}

impl Summary {
    /// True when every row of the file was published (or, in a dry run,
    /// would be sent).
    pub fn complete(&self) -> bool {
        self.rejected.boards == 0
            && self.failed.boards == 0
            && self.not_sent.boards == 0
            && self.unplaced.is_empty()
    }

    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let total =
            self.accepted.boards + self.rejected.boards + self.failed.boards + self.not_sent.boards;
        out.push(format!(
            "backfill of {}{}: {total} boards of {} banks",
            self.file,
            if self.dry_run {
                " (dry run: nothing sent)"
            } else {
                ""
            },
            self.banks
        ));
        let line = |name: &str, t: Tally| {
            format!(
                "  {name:<9} {:>7} boards {:>9} rate entries",
                t.boards, t.entries
            )
        };
        out.push(line(
            if self.dry_run { "valid" } else { "accepted" },
            self.accepted,
        ));
        out.push(line("rejected", self.rejected));
        if !self.dry_run {
            out.push(line("failed", self.failed));
        }
        if self.not_sent.boards > 0 {
            out.push(line("not sent", self.not_sent));
        }
        out.push(format!("  unreadable rows: {}", self.unplaced.len()));
        if !self.unplaced.is_empty() {
            out.push("unreadable rows:".into());
            out.extend(self.unplaced.iter().map(|(o, p)| format!("  {o}: {p}")));
        }
        if !self.problems.is_empty() {
            out.push("boards not published:".into());
            for (label, problems) in &self.problems {
                out.push(format!("  {label}"));
                out.extend(problems.iter().map(|p| format!("    {p}")));
            }
        }
        if self.failed.boards > 0 || self.not_sent.boards > 0 {
            out.push("run the same command again to send what is missing: boards already accepted are not published twice (within 24 hours)".into());
        }
        out.join("\n")
    }
}

/// Checks each board with ingest's own rules; invalid ones are rejected
/// here, as ingest would reject them.
fn check(boards: Vec<FileBoard>, summary: &mut Summary) -> Vec<FileBoard> {
    let now = Utc::now();
    boards
        .into_iter()
        .filter(
            |board| match ratewire_ingest::board::parse(board.body.as_bytes(), now) {
                Ok(_) => true,
                Err(fields) => {
                    summary.rejected.add(board);
                    let problems = fields
                        .iter()
                        .flat_map(|(field, problems)| {
                            problems
                                .iter()
                                .map(move |p| format!("{} {p}", board.locate(field)))
                        })
                        .collect();
                    summary.problems.push((board.label(), problems));
                    false
                }
            },
        )
        .collect()
}

/// Reads, checks and (unless a dry run) publishes the file.
pub async fn run(
    settings: BackfillSettings,
    client: IngestClient,
    shutdown: CancellationToken,
) -> anyhow::Result<Summary> {
    let contents = read_file(&settings.file, settings.format)?;
    let source = settings.file.display().to_string();
    publish(&source, contents, settings.sending, client, shutdown).await
}

/// Checks and (unless a dry run) publishes boards read from `source`
/// (a file, or boards made by a program, as the demo's history).
pub async fn publish(
    source: &str,
    contents: FileContents,
    settings: Sending,
    client: IngestClient,
    shutdown: CancellationToken,
) -> anyhow::Result<Summary> {
    let mut summary = Summary {
        file: source.to_owned(),
        dry_run: settings.dry_run,
        unplaced: contents.unplaced,
        ..Summary::default()
    };
    let mut by_bank: BTreeMap<i64, Vec<FileBoard>> = BTreeMap::new();
    for board in contents.boards {
        by_bank.entry(board.bank_id).or_default().push(board);
    }
    summary.banks = by_bank.len();
    let mut valid: Vec<(i64, Vec<FileBoard>)> = Vec::new();
    for (bank, boards) in by_bank {
        let boards = check(boards, &mut summary);
        if !boards.is_empty() {
            valid.push((bank, boards));
        }
    }
    if settings.dry_run {
        for board in valid.iter().flat_map(|(_, b)| b) {
            summary.accepted.add(board);
        }
        return Ok(summary);
    }

    let total: usize = valid.iter().map(|(_, b)| b.len()).sum();
    info!(boards = total, banks = valid.len(), "backfill starting");
    let done = Arc::new(AtomicUsize::new(0));
    let summary = Arc::new(Mutex::new(summary));
    let progress = tokio::spawn(report_progress(done.clone(), total, summary.clone()));
    let settings = Arc::new(settings);
    stream::iter(valid)
        .map(|(bank, boards)| {
            publish_bank(
                bank,
                boards,
                settings.clone(),
                client.clone(),
                summary.clone(),
                done.clone(),
                shutdown.clone(),
            )
        })
        .buffer_unordered(settings.concurrency.max(1))
        .collect::<Vec<()>>()
        .await;
    progress.abort();
    // Wait for the abort to land: the task holds the summary.
    let _ = progress.await;
    let summary = Arc::try_unwrap(summary)
        .map_err(|_| anyhow::anyhow!("backfill tasks outlived the run"))?
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    info!(
        accepted = summary.accepted.boards,
        rejected = summary.rejected.boards,
        failed = summary.failed.boards,
        "backfill finished"
    );
    Ok(summary)
}

/// Every fifth of a second: a bar on a terminal, a log line every few
/// seconds otherwise.
async fn report_progress(done: Arc<AtomicUsize>, total: usize, summary: Arc<Mutex<Summary>>) {
    let progress = Progress::new("backfill", Some(total as u64));
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let report = || {
        let (accepted, rejected, failed) = {
            let s = summary.lock().unwrap_or_else(|p| p.into_inner());
            (s.accepted.boards, s.rejected.boards, s.failed.boards)
        };
        progress.set(
            done.load(Ordering::Relaxed) as u64,
            &format!("accepted {accepted}, rejected {rejected}, failed {failed}"),
        );
    };
    let _finish = Finish(&progress);
    loop {
        tick.tick().await;
        report();
    }
}

/// Ends the bar however the reporting task ends (it is aborted).
struct Finish<'a>(&'a Progress);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// One bank's boards, in as-of order, one at a time.
async fn publish_bank(
    bank: i64,
    boards: Vec<FileBoard>,
    settings: Arc<Sending>,
    client: IngestClient,
    summary: Arc<Mutex<Summary>>,
    done: Arc<AtomicUsize>,
    shutdown: CancellationToken,
) {
    let record = |outcome: Outcome, board: &FileBoard| {
        let mut s = summary.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Outcome::Accepted => s.accepted.add(board),
            Outcome::Rejected(problems) => {
                s.rejected.add(board);
                s.problems.push((board.label(), problems));
            }
            Outcome::Failed(cause) => {
                s.failed.add(board);
                s.problems.push((board.label(), vec![cause]));
            }
            Outcome::NotSent => s.not_sent.add(board),
        }
    };

    // A token given on the command line, or one made for this run.
    let (token, minted) = match settings.tokens.get(&bank) {
        Some(token) => (token.clone(), None),
        None => match client.create_token(bank).await {
            Ok(Some((token, prefix))) => (token, Some(prefix)),
            Ok(None) => {
                for board in &boards {
                    record(
                        Outcome::Rejected(vec![format!("bank {bank} is not registered")]),
                        board,
                    );
                }
                return;
            }
            Err(e) => {
                for board in &boards {
                    record(Outcome::Failed(format!("{e:#}")), board);
                }
                return;
            }
        },
    };

    for board in &boards {
        let outcome = if shutdown.is_cancelled() {
            Outcome::NotSent
        } else {
            push(&client, &token, board, settings.attempts, &shutdown).await
        };
        record(outcome, board);
        done.fetch_add(1, Ordering::Relaxed);
    }

    if let Some(prefix) = minted {
        if let Err(e) = client.revoke_token(&prefix).await {
            warn!(bank, prefix, error = %e, "could not revoke the backfill's token; revoke it by hand");
        }
    }
}

enum Outcome {
    Accepted,
    Rejected(Vec<String>),
    Failed(String),
    NotSent,
}

/// Pushes a board, retrying with the same key while ingest is unavailable.
async fn push(
    client: &IngestClient,
    token: &str,
    board: &FileBoard,
    attempts: u32,
    shutdown: &CancellationToken,
) -> Outcome {
    let key = board.idempotency_key();
    let mut last = String::new();
    for attempt in 0..attempts.max(1) {
        if attempt > 0 {
            let pause = Duration::from_millis(500 * 2u64.pow(attempt.min(5) - 1))
                .min(Duration::from_secs(10));
            tokio::select! {
                _ = shutdown.cancelled() => return Outcome::Failed(format!("interrupted; last answer: {last}")),
                _ = tokio::time::sleep(pause) => {}
            }
        }
        match client
            .push_board(board.bank_id, token, board.body.clone(), Some(&key))
            .await
        {
            Pushed::Accepted { .. } => return Outcome::Accepted,
            Pushed::Rejected {
                status,
                message,
                errors,
            } => {
                let mut problems = vec![format!("{status} {message}")];
                problems.extend(
                    errors
                        .iter()
                        .map(|(field, problem)| format!("{} {problem}", board.locate(field))),
                );
                return Outcome::Rejected(problems);
            }
            Pushed::Unavailable { cause } => {
                warn!(
                    bank = board.bank_id,
                    attempt = attempt + 1,
                    cause,
                    "board not delivered; retrying"
                );
                last = cause;
            }
        }
    }
    Outcome::Failed(format!(
        "not delivered after {attempts} attempts; last answer: {last}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_found_by_ingests_rules_name_the_csv_line() {
        let csv = "bankId,asOf,currency,cashBuying,cashSelling\n3,2026-10-01T08:00:00Z,USD,155,150\n3,2026-10-01T08:00:00Z,EUR,abc,190\n";
        let mut summary = Summary::default();
        let boards = read_csv(csv.as_bytes()).unwrap().boards;
        assert!(check(boards, &mut summary).is_empty());
        assert_eq!(
            summary.rejected,
            Tally {
                boards: 1,
                entries: 2
            }
        );
        let (_, problems) = &summary.problems[0];
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("line 2: cashSelling must not be below")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.starts_with("line 3: cashBuying")),
            "{problems:?}"
        );
    }
}
