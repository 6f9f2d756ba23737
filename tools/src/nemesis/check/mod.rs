//! The checker: once the faults are healed and the system has settled, it
//! holds what users and operators can see (the public API, the topic, the
//! receivers) against what the publishers were told: every board answered
//! 202 is there once, in order, and the views equal the checker's own fold
//! of those boards.

mod api;
mod log;

pub use api::{check_boards, check_history, check_views, settle, Api};
pub use log::check_log;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use anyhow::Context;
use chrono::{DateTime, SecondsFormat, Utc};

use super::publish::{Board, Push};
use super::receive::Delivery;
use super::Alert;

/// What went wrong, by invariant: each a line of the report.
#[derive(Debug, Default)]
pub struct Violations(BTreeMap<&'static str, Vec<String>>);

impl Violations {
    pub fn add(&mut self, invariant: &'static str, what: impl Into<String>) {
        self.0.entry(invariant).or_default().push(what.into());
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn by_invariant(&self) -> &BTreeMap<&'static str, Vec<String>> {
        &self.0
    }
}

pub const DURABLE: &str = "every 202 is on the log, once and in order";
pub const ANSWERED: &str = "every push answered 202, or 503 with Retry-After";
pub const ACCEPTED: &str = "every push accepted in the end";
pub const ONCE: &str = "every accepted board once in the raw series and /boards";
pub const HISTORY: &str = "/history shows each day's last board";
pub const FOLD: &str = "/rates, best-rates and /banks equal the checker's fold";
pub const REPLAY: &str = "the read model equals a replay";
pub const ALERTS: &str = "every crossing delivered, under one message id";
pub const READS: &str = "reads through the balancer 2xx at least 99.9% of the time";

/// The boards accepted, per bank, in the order they were accepted.
pub fn accepted(pushes: &[Push]) -> BTreeMap<i64, Vec<(Board, String)>> {
    let mut by_bank: BTreeMap<i64, Vec<(Instant, Board, String)>> = BTreeMap::new();
    for push in pushes {
        if let Some((at, id)) = push.accepted() {
            by_bank.entry(push.board.bank).or_default().push((
                at,
                push.board.clone(),
                id.to_owned(),
            ));
        }
    }
    by_bank
        .into_iter()
        .map(|(bank, mut boards)| {
            boards.sort_by_key(|(at, _, _)| *at);
            (bank, boards.into_iter().map(|(_, b, id)| (b, id)).collect())
        })
        .collect()
}

pub fn check_answers(pushes: &[Push], start: Instant, violations: &mut Violations) {
    let mut wrong: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for push in pushes {
        for attempt in &push.attempts {
            if let super::publish::Answer::Wrong(what) = &attempt.answer {
                let kind: String = what.chars().take(160).collect();
                wrong
                    .entry(kind)
                    .or_default()
                    .push((attempt.at - start).as_secs_f64());
            }
        }
        if push.accepted().is_none() {
            violations.add(
                ACCEPTED,
                format!(
                    "bank {} board {} ({}) was never accepted after {} attempts",
                    push.board.bank,
                    push.board.seq,
                    stamp(push.board.as_of),
                    push.attempts.len()
                ),
            );
        }
    }
    for (what, at) in wrong {
        let count = at.len();
        let at: Vec<String> = at.iter().take(5).map(|t| format!("{t:.1} s")).collect();
        let more = if count > 5 { ", ..." } else { "" };
        violations.add(
            ANSWERED,
            format!(
                "{count} pushes answered: {what} (at {}{more})",
                at.join(", ")
            ),
        );
    }
}

pub fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// An alert and the event id of the board that crossed it.
pub type Crossing = (String, String);

/// The crossings the accepted boards imply: a board fires an alert when
/// its value meets the condition and the bank's board before did not (or
/// there was none).
pub fn crossings(
    alerts: &[Alert],
    boards: &BTreeMap<i64, Vec<(Board, String)>>,
) -> BTreeSet<Crossing> {
    let mut expected = BTreeSet::new();
    for alert in alerts {
        let mut before: Option<bool> = None;
        for (board, id) in boards.get(&alert.bank).into_iter().flatten() {
            let Some(value) = board
                .quote(&alert.currency)
                .and_then(|q| q.field(&alert.field))
            else {
                continue;
            };
            let now = if alert.above {
                value > alert.threshold
            } else {
                value < alert.threshold
            };
            if now && before != Some(true) {
                expected.insert((alert.id.clone(), id.clone()));
            }
            before = Some(now);
        }
    }
    expected
}

/// Whether every crossing has had a call.
pub fn all_called(expected: &BTreeSet<Crossing>, deliveries: &[Delivery]) -> bool {
    let called: BTreeSet<Crossing> = deliveries
        .iter()
        .map(|d| (d.alert_id.clone(), d.event_id.clone()))
        .collect();
    expected.is_subset(&called)
}

/// Each expected crossing delivered under exactly one message id, every
/// call signed, and nothing else delivered.
pub fn check_alerts(
    expected: &BTreeSet<Crossing>,
    deliveries: &[Delivery],
    violations: &mut Violations,
) {
    let mut messages: BTreeMap<Crossing, BTreeSet<String>> = BTreeMap::new();
    for d in deliveries
        .iter()
        .filter(|d| d.kind == "rate.threshold_crossed")
    {
        if let Some(problem) = &d.refused {
            violations.add(
                ALERTS,
                format!("message {} did not verify: {problem}", d.message_id),
            );
        }
        messages
            .entry((d.alert_id.clone(), d.event_id.clone()))
            .or_default()
            .insert(d.message_id.clone());
    }
    for crossing in expected {
        match messages.get(crossing).map(BTreeSet::len) {
            None => violations.add(
                ALERTS,
                format!(
                    "alert {} crossed by board {}: never delivered",
                    crossing.0, crossing.1
                ),
            ),
            Some(1) => {}
            Some(n) => violations.add(
                ALERTS,
                format!(
                    "alert {} crossed by board {}: {n} different message ids",
                    crossing.0, crossing.1
                ),
            ),
        }
    }
    for (crossing, _) in messages.iter().filter(|(c, _)| !expected.contains(*c)) {
        violations.add(
            ALERTS,
            format!(
                "alert {} called for board {}, which crossed nothing",
                crossing.0, crossing.1
            ),
        );
    }
}

/// `ratewire-projector verify`: a replay of the whole log into a fresh
/// schema, compared table by table and view by view with the live one.
pub async fn check_replay(
    bin: &std::path::Path,
    violations: &mut Violations,
) -> anyhow::Result<()> {
    let output = tokio::process::Command::new(bin.join("ratewire-projector"))
        .arg("verify")
        .output()
        .await
        .context("ratewire-projector verify")?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stdout);
        let why = String::from_utf8_lossy(&output.stderr);
        let why: String = why.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        violations.add(REPLAY, format!("{} {}", said.trim(), why));
    }
    Ok(())
}
