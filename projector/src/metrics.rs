//! What the projector reports on `GET /metrics` (Prometheus text format)
//! and, every few seconds, in its log: how far behind the log it is and how
//! fresh the newest applied event is.
//!
//! - `ratewire_projector_events_applied_total`, `_events_skipped_total`
//!   (redelivered or repeated), `_events_ignored_total` (unknown types),
//!   `_dead_letters_total{rule}` (the rule each message broke)
//! - `ratewire_projector_dead_letters_unresolved`: dead letters no operator
//!   has re-driven or resolved yet (read from Postgres every few seconds)
//! - `ratewire_projector_batch_seconds` (histogram): one batch's Postgres
//!   transaction
//! - `ratewire_projector_consumer_lag{partition}`: messages on the broker not
//!   yet applied
//! - `ratewire_projector_visible_delay_seconds` (histogram): from an event's
//!   `occurredAt` (its acceptance by ingest) to its bank's views written to
//!   Redis, i.e. the freshness readers get; it includes time spent in the
//!   log, so it grows during a backlog or a replay
//! - `ratewire_projector_aggregates_delay_seconds` (histogram): the same,
//!   to the views over all banks (best rates, /currencies) written after
//!   the event's bank views
//! - `ratewire_projector_newest_event_age_seconds`: now minus the newest
//!   applied event's `occurredAt` (grows on a quiet topic; alert on lag)
//! - `ratewire_projector_partitions_stalled`: partitions of the topic,
//!   owned here or not, whose events wait with their position unmoved
//!   (`stalls`)
//! - `ratewire_projector_postgres_errors_total`, `_redis_errors_total`
//! - `ratewire_projector_reads_paused`: 1 while the partitions are not
//!   fetched for a quiet log (see `idle`), and
//!   `ratewire_projector_reads_resumed_total{cause}`: read again because
//!   ingest said the log had new events (`notice`), the lag report showed
//!   them (`lag`), or the partitions were assigned anew (`assignment`)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use metrics::{counter, gauge, histogram};
use ratewire_service::metrics::Documented;

use crate::consumer::LogQueries;
use tracing::{debug, info};

use crate::fold::BatchOutcome;

/// Every metric the projector reports besides the requests every process
/// counts (docs/operations.md, "Metrics"), registered at start so each
/// reads 0 until its first event, with the values of its labels.
/// `consumer_lag{partition}` is left out: its series are the partitions
/// this instance owns, each reported once assigned.
pub const DOCUMENTED: &[Documented] = &[
    Documented::counter("ratewire_projector_events_applied_total"),
    Documented::counter("ratewire_projector_events_skipped_total"),
    Documented::counter("ratewire_projector_events_ignored_total"),
    Documented::counter("ratewire_projector_dead_letters_total")
        .by(&[("rule", &DEAD_LETTER_RULES)]),
    Documented::gauge("ratewire_projector_dead_letters_unresolved"),
    Documented::histogram("ratewire_projector_batch_seconds"),
    Documented::gauge("ratewire_projector_newest_event_age_seconds"),
    Documented::histogram("ratewire_projector_visible_delay_seconds"),
    Documented::histogram("ratewire_projector_aggregates_delay_seconds"),
    Documented::histogram("ratewire_projector_aggregates_stage_seconds")
        .by(&[("stage", &["catch_up", "resync", "render", "write", "check"])]),
    Documented::gauge("ratewire_projector_reads_paused"),
    Documented::counter("ratewire_projector_reads_resumed_total")
        .by(&[("cause", &["notice", "lag", "assignment"])]),
    Documented::counter("ratewire_projector_partition_changes_total")
        .by(&[("change", &["assigned", "revoked", "lost"])]),
    Documented::gauge("ratewire_projector_partitions_owned"),
    Documented::gauge("ratewire_projector_partitions_stalled"),
    Documented::counter("ratewire_projector_alerts_fired_total"),
    Documented::counter("ratewire_projector_publications_missed_total"),
    Documented::counter("ratewire_webhook_messages_total"),
    Documented::counter("ratewire_webhook_deliveries_total")
        .by(&[("outcome", &["delivered", "failed"])]),
    Documented::counter("ratewire_projector_postgres_errors_total"),
    Documented::counter("ratewire_projector_redis_errors_total"),
];

/// Every rule a dead letter is filed under: the contract's
/// (`ratewire_proto::Rule`) and the read model's (`fold::core`, `fold`).
const DEAD_LETTER_RULES: [&str; 20] = [
    "envelope",
    "payload",
    "version",
    "key",
    "rate",
    "selling-below-buying",
    "transactional-pair",
    "currency",
    "duplicate-currency",
    "board-size",
    "as-of",
    "occurred-at",
    "retraction",
    "source",
    "reason",
    "schedule",
    crate::fold::core::UNKNOWN_BANK,
    crate::fold::core::BANK_REGISTERED,
    crate::fold::DATA,
    crate::fold::UNSUPPORTED_VERSION,
];

pub fn batch_applied(outcome: &BatchOutcome, took: Duration) {
    counter!("ratewire_projector_events_applied_total").increment(outcome.applied as u64);
    counter!("ratewire_projector_events_skipped_total").increment(outcome.skipped as u64);
    counter!("ratewire_projector_events_ignored_total").increment(outcome.ignored as u64);
    for rule in &outcome.refused {
        counter!("ratewire_projector_dead_letters_total", "rule" => rule.clone()).increment(1);
    }
    counter!("ratewire_projector_alerts_fired_total").increment(outcome.alerts_fired);
    histogram!("ratewire_projector_batch_seconds").record(took.as_secs_f64());
}

/// Events whose bank views reached Redis at `now`.
pub fn visible(occurred: &[DateTime<Utc>], now: DateTime<Utc>) {
    let delay = histogram!("ratewire_projector_visible_delay_seconds");
    for at in occurred {
        delay.record((now - *at).num_microseconds().unwrap_or(i64::MAX).max(0) as f64 / 1e6);
    }
}

/// Events whose views over all banks reached Redis at `now`.
pub fn aggregated(occurred: &[DateTime<Utc>], now: DateTime<Utc>) {
    let delay = histogram!("ratewire_projector_aggregates_delay_seconds");
    for at in occurred {
        delay.record((now - *at).num_microseconds().unwrap_or(i64::MAX).max(0) as f64 / 1e6);
    }
}

/// How long a stage of a round of the views over all banks took (see
/// `aggregates::recompute`).
pub fn aggregates_stage(stage: &'static str, took: Duration) {
    histogram!("ratewire_projector_aggregates_stage_seconds", "stage" => stage)
        .record(took.as_secs_f64());
}

pub fn reads_paused(paused: bool) {
    gauge!("ratewire_projector_reads_paused").set(if paused { 1.0 } else { 0.0 });
}

/// Reads of a quiet log start again, for `cause`.
pub fn reads_resumed(cause: &'static str) {
    counter!("ratewire_projector_reads_resumed_total", "cause" => cause).increment(1);
}

pub fn postgres_error() {
    counter!("ratewire_projector_postgres_errors_total").increment(1);
}

pub fn redis_error() {
    counter!("ratewire_projector_redis_errors_total").increment(1);
}

/// A view that was not written: its reads from Postgres or its write to
/// Redis failed.
pub fn view_error(e: &crate::Error) {
    match e {
        crate::Error::Postgres(_) => postgres_error(),
        _ => redis_error(),
    }
}

/// Where this projector stands, kept between ticks.
#[derive(Debug, Default)]
pub struct Progress {
    /// Next offset to apply, per owned partition.
    pub positions: BTreeMap<i32, i64>,
    /// Each partition's high watermark at the last report (empty while
    /// the broker does not answer).
    highs: BTreeMap<i32, i64>,
    pub newest_event: Option<DateTime<Utc>>,
    applied_since_log: u64,
    last_log: Option<Instant>,
}

/// How often the position goes to the log while there is something to say.
const LOG_EVERY: Duration = Duration::from_secs(10);

impl Progress {
    pub fn record(&mut self, outcome: &BatchOutcome) {
        self.positions.extend(&outcome.positions);
        self.newest_event = self.newest_event.max(outcome.newest_event());
        self.applied_since_log += outcome.applied as u64;
    }

    /// Updates the lag and age gauges (asking the broker for its
    /// watermarks, briefly), and logs them now and then. Runs beside the
    /// fold, so a batch stuck on Postgres still shows as growing lag.
    /// `also` are partitions asked about besides those owned, in the same
    /// request. Returns the total lag over the owned partitions (`None`
    /// when the broker did not answer) and every high watermark it gave.
    pub async fn report(
        progress: &std::sync::Mutex<Progress>,
        queries: &LogQueries,
        topic: &str,
        also: &[i32],
    ) -> (Option<i64>, BTreeMap<i32, i64>) {
        let mut partitions: Vec<i32> = {
            let progress = progress.lock().expect("progress lock");
            progress.positions.keys().copied().collect()
        };
        partitions.extend(also);
        partitions.sort_unstable();
        partitions.dedup();
        let marks = queries
            .highs(topic, &partitions, Duration::from_millis(500))
            .await
            .ok();
        let known = marks.is_some();
        let marks = marks.unwrap_or_default();
        let lag = progress
            .lock()
            .expect("progress lock")
            .publish(&marks)
            .filter(|_| known);
        (lag, marks)
    }

    /// Whether every event the last report saw is applied (false while no
    /// report has been made, or the broker did not answer the last one).
    pub fn caught_up(&self) -> bool {
        !self.positions.is_empty()
            && self
                .positions
                .iter()
                .all(|(p, position)| self.highs.get(p).is_some_and(|high| position >= high))
    }

    /// Each partition's high watermark at the last report.
    pub fn highs(&self) -> &BTreeMap<i32, i64> {
        &self.highs
    }

    fn publish(&mut self, highs: &BTreeMap<i32, i64>) -> Option<i64> {
        // Only the owned: settling another member's partitions here would
        // take its position rows' locks against its batches.
        self.highs = highs
            .iter()
            .filter(|(p, _)| self.positions.contains_key(p))
            .map(|(p, h)| (*p, *h))
            .collect();
        let mut lags = BTreeMap::new();
        for (partition, position) in &self.positions {
            if let Some(high) = highs.get(partition) {
                let lag = (high - position).max(0);
                gauge!("ratewire_projector_consumer_lag", "partition" => partition.to_string())
                    .set(lag as f64);
                lags.insert(*partition, lag);
            }
        }
        let age = self
            .newest_event
            .map(|t| (Utc::now() - t).num_milliseconds().max(0) as f64 / 1000.0);
        if let Some(age) = age {
            gauge!("ratewire_projector_newest_event_age_seconds").set(age);
        }
        let lag: i64 = lags.values().sum();
        let due = self.last_log.is_none_or(|t| t.elapsed() >= LOG_EVERY);
        if !due {
            return Some(lag);
        }
        if lag > 0 || self.applied_since_log > 0 {
            info!(
                lag,
                ?lags,
                applied = self.applied_since_log,
                newest_event_age_s = age,
                "projector position"
            );
        } else {
            debug!(
                ?lags,
                newest_event_age_s = age,
                "projector idle and caught up"
            );
        }
        self.applied_since_log = 0;
        self.last_log = Some(Instant::now());
        Some(lag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_of_the_contract_is_a_dead_letter_rule() {
        for rule in ratewire_proto::Rule::ALL {
            assert!(DEAD_LETTER_RULES.contains(&rule.code()), "{rule}");
        }
    }

    #[test]
    fn caught_up_once_every_position_reaches_the_last_reported_high_watermark() {
        let mut progress = Progress::default();
        assert!(!progress.caught_up(), "nothing assigned yet");
        progress.positions = BTreeMap::from([(0, 5), (1, 7)]);
        assert!(!progress.caught_up(), "no report yet");
        progress.publish(&BTreeMap::from([(0, 5), (1, 9)]));
        assert!(!progress.caught_up());
        progress.positions.insert(1, 9);
        assert!(progress.caught_up());
        // The broker did not answer: unknown, so not caught up.
        progress.publish(&BTreeMap::new());
        assert!(!progress.caught_up());
    }
}
