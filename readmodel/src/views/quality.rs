//! The quality reports' JSON bodies (no I/O).

use std::collections::BTreeMap;

use ratewire_proto::Schedule;
use rust_decimal::Decimal;
use serde::Serialize;

use super::{success, timestamp, Num};
use crate::quality::report::Report;

/// The most missed spans a report lists: the latest ones
/// (`publishesMissed` counts them all).
pub const MOST_MISSED_SPANS: usize = 1_000;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReportJson<'a> {
    bank_id: i64,
    days: u32,
    from: String,
    to: String,
    schedule: Option<&'a Schedule>,
    publishes_expected: u64,
    publishes_missed: u64,
    missed: Vec<Span>,
    boards: u64,
    corrections: u64,
    retractions: u64,
    outliers: u64,
    spread_cap_percent: Num,
    spread_cap_breaches: Vec<BreachJson>,
    last_board_at: Option<String>,
    median_delay_seconds: Option<i64>,
    score: u8,
    score_components: BTreeMap<&'static str, ComponentJson>,
}

#[derive(Serialize)]
struct Span {
    from: String,
    to: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BreachJson {
    currency_code: String,
    pair: &'static str,
    from: String,
    to: Option<String>,
    max_spread_percent: Num,
}

#[derive(Serialize)]
struct ComponentJson {
    weight: u8,
    share: Num,
    points: Num,
}

/// A float shown to four fraction digits.
fn four_digits(value: f64) -> Num {
    Num(Decimal::from_f64_retain(value)
        .unwrap_or_default()
        .round_dp(4)
        .normalize())
}

impl<'a> ReportJson<'a> {
    fn new(report: &'a Report, spread_cap: Decimal) -> Self {
        let spans = &report.slots.missed_spans;
        let latest = spans.len().saturating_sub(MOST_MISSED_SPANS);
        Self {
            bank_id: report.bank_id.get(),
            days: report.days,
            from: timestamp(report.from),
            to: timestamp(report.to),
            schedule: report.schedule.as_ref(),
            publishes_expected: report.slots.expected,
            publishes_missed: report.slots.missed,
            missed: spans[latest..]
                .iter()
                .map(|(from, to)| Span {
                    from: timestamp(*from),
                    to: timestamp(*to),
                })
                .collect(),
            boards: report.tally.boards,
            corrections: report.tally.corrections,
            retractions: report.tally.retractions,
            outliers: report.tally.outliers,
            spread_cap_percent: Num(spread_cap.normalize()),
            spread_cap_breaches: report
                .breaches
                .iter()
                .map(|b| BreachJson {
                    currency_code: b.currency.as_str().to_owned(),
                    pair: b.pair.name(),
                    from: timestamp(b.from),
                    to: b.to.map(timestamp),
                    max_spread_percent: Num(b.max_spread_percent),
                })
                .collect(),
            last_board_at: report.tally.last_board_at.map(timestamp),
            median_delay_seconds: report.median_delay_seconds,
            score: report.score.value,
            score_components: report
                .score
                .components
                .iter()
                .map(|c| {
                    (
                        c.name,
                        ComponentJson {
                            weight: c.weight,
                            share: four_digits(c.share),
                            points: four_digits(c.points()),
                        },
                    )
                })
                .collect(),
        }
    }
}

/// `GET /api/v1/banks/{id}/quality`.
pub fn report_json(report: &Report, spread_cap: Decimal) -> String {
    success(ReportJson::new(report, spread_cap))
}

/// `GET /api/v1/quality`: the reports, worst score first (ties by bank id).
pub fn reports_json(reports: &[Report], spread_cap: Decimal) -> String {
    let mut sorted: Vec<&Report> = reports.iter().collect();
    sorted.sort_by_key(|r| (r.score.value, r.bank_id));
    success(
        sorted
            .into_iter()
            .map(|r| ReportJson::new(r, spread_cap))
            .collect::<Vec<_>>(),
    )
}
