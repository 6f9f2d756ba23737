//! The revision log's and a board's bodies, as pure functions of what
//! [`super::store`] read: numbers with their published digits, times to
//! the millisecond in UTC, as every view writes them.

use std::fmt::Write;

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode, Source};
use serde::Serialize;
use uuid::Uuid;

use super::{Board, Revision};
use crate::views::{success, timestamp, Num, OptNum, QuoteJson, ViewStyle};

/// What a page of the log is of, as the request asked.
#[derive(Debug, Clone, Copy)]
pub struct RevisionsOf<'a> {
    pub bank: Option<BankId>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// The link to the next page, when there is one.
    pub next: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RevisionsJson<'a> {
    bank_id: Option<i64>,
    from: Option<String>,
    to: Option<String>,
    next: Option<&'a str>,
    revisions: Vec<RevisionJson<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RevisionJson<'a> {
    event_id: Uuid,
    kind: &'static str,
    revised_event_id: Uuid,
    bank_id: i64,
    as_of: String,
    known_at: String,
    reason: Option<&'a str>,
    changes: Vec<ChangeJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChangeJson {
    currency_code: CurrencyCode,
    field: &'static str,
    before: OptNum,
    after: OptNum,
}

impl<'a> RevisionJson<'a> {
    fn new(revision: &'a Revision) -> Self {
        RevisionJson {
            event_id: revision.event_id,
            kind: revision.kind.name(),
            revised_event_id: revision.revised_event_id,
            bank_id: revision.bank_id.get(),
            as_of: timestamp(revision.as_of),
            known_at: timestamp(revision.known_at),
            reason: revision.reason.as_deref(),
            changes: revision
                .changes
                .iter()
                .map(|c| ChangeJson {
                    currency_code: c.currency,
                    field: c.field.key(),
                    before: OptNum(c.before),
                    after: OptNum(c.after),
                })
                .collect(),
        }
    }
}

/// `GET /api/v1/revisions` as JSON.
pub fn revisions_json(of: RevisionsOf<'_>, revisions: &[Revision]) -> String {
    success(RevisionsJson {
        bank_id: of.bank.map(BankId::get),
        from: of.from.map(timestamp),
        to: of.to.map(timestamp),
        next: of.next,
        revisions: revisions.iter().map(RevisionJson::new).collect(),
    })
}

/// `GET /api/v1/revisions` as CSV: a header row, then one row per change
/// (a revision that changed no value has one row with empty change
/// cells); empty cells for what is null.
pub fn revisions_csv(revisions: &[Revision]) -> String {
    let mut csv = String::from(
        "eventId,kind,revisedEventId,bankId,asOf,knownAt,reason,currencyCode,field,before,after\n",
    );
    let number = |v: Option<rust_decimal::Decimal>| v.map(|d| d.to_string()).unwrap_or_default();
    for r in revisions {
        let head = format!(
            "{},{},{},{},{},{},{}",
            r.event_id,
            r.kind.name(),
            r.revised_event_id,
            r.bank_id,
            timestamp(r.as_of),
            timestamp(r.known_at),
            cell(r.reason.as_deref().unwrap_or_default())
        );
        if r.changes.is_empty() {
            let _ = writeln!(csv, "{head},,,,");
        }
        for c in &r.changes {
            let _ = writeln!(
                csv,
                "{head},{},{},{},{}",
                c.currency,
                c.field.key(),
                number(c.before),
                number(c.after)
            );
        }
    }
    csv
}

/// A text cell (RFC 4180): quoted, quotes doubled, when it holds a comma,
/// a quote or a line break.
fn cell(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BoardJson<'a> {
    event_id: Uuid,
    bank_id: i64,
    as_of: String,
    rates: Vec<QuoteJson<'a>>,
    received_at: Option<String>,
    known_at: Option<String>,
    log: Option<LogJson<'a>>,
    source: Option<&'a Source>,
    reason: Option<&'a str>,
    status: &'static str,
    revisions: Vec<RevisionJson<'a>>,
    outliers: Vec<OutlierJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutlierJson {
    currency_code: CurrencyCode,
    field: &'static str,
    value: Num,
    previous: OptNum,
    median: OptNum,
}

#[derive(Serialize)]
struct LogJson<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
}

/// `GET /api/v1/boards/{eventId}`: the board's rates as /history shows a
/// record, its provenance, status and revisions.
pub fn board_json(board: &Board, style: &ViewStyle) -> String {
    success(BoardJson {
        event_id: board.event_id,
        bank_id: board.bank_id.get(),
        as_of: timestamp(board.as_of),
        rates: board
            .rates
            .iter()
            .map(|r| QuoteJson {
                cash_buying: r.cash_buying,
                cash_selling: r.cash_selling,
                transactional_buying: r.transactional_buying,
                transactional_selling: r.transactional_selling,
                time_key: "timestamp",
                at: r.as_of,
                currency: r.currency,
                style,
            })
            .collect(),
        received_at: board.received_at.map(timestamp),
        known_at: board.known_at.map(timestamp),
        log: board.log.as_ref().map(|l| LogJson {
            topic: &l.topic,
            partition: l.partition,
            offset: l.offset,
        }),
        source: board.source.as_ref(),
        reason: board.reason.as_deref(),
        status: board.status.name(),
        revisions: board.revisions.iter().map(RevisionJson::new).collect(),
        outliers: board
            .outliers
            .iter()
            .map(|o| OutlierJson {
                currency_code: o.currency,
                field: o.field.key(),
                value: Num(o.value),
                previous: OptNum(o.previous),
                median: OptNum(o.median),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::revisions::{changes, Kind, LogPosition, Status};
    use crate::views::HistoryRecord;
    use std::str::FromStr;

    fn usd(buying: &str) -> HistoryRecord {
        HistoryRecord {
            currency: CurrencyCode::parse("USD").unwrap(),
            as_of: "2026-11-20T08:00:00Z".parse().unwrap(),
            cash_buying: rust_decimal::Decimal::from_str(buying).unwrap(),
            cash_selling: rust_decimal::Decimal::from_str("158.20").unwrap(),
            transactional_buying: None,
            transactional_selling: None,
        }
    }

    fn correction(reason: Option<&str>) -> Revision {
        Revision {
            event_id: Uuid::from_u128(2),
            kind: Kind::Correction,
            revised_event_id: Uuid::from_u128(1),
            bank_id: BankId::new(7).unwrap(),
            as_of: "2026-11-20T08:00:00Z".parse().unwrap(),
            known_at: "2026-11-20T09:15:00.123456Z".parse().unwrap(),
            reason: reason.map(str::to_owned),
            changes: changes(&[usd("155.10")], &[usd("155.60")]),
        }
    }

    #[test]
    fn a_page_keeps_published_digits_and_names_its_next_page() {
        let of = RevisionsOf {
            bank: None,
            from: None,
            to: Some("2026-11-21T00:00:00Z".parse().unwrap()),
            next: Some("/api/v1/revisions?after=x"),
        };
        let body = revisions_json(of, &[correction(Some("typo"))]);
        assert!(body.contains(r#""before":155.10,"after":155.60"#), "{body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["message"], "success");
        assert_eq!(json["data"]["bankId"], serde_json::Value::Null);
        assert_eq!(json["data"]["to"], "2026-11-21T00:00:00.000Z");
        assert_eq!(json["data"]["next"], "/api/v1/revisions?after=x");
        let revision = &json["data"]["revisions"][0];
        assert_eq!(revision["eventId"], Uuid::from_u128(2).to_string());
        assert_eq!(revision["kind"], "correction");
        assert_eq!(revision["bankId"], 7);
        assert_eq!(revision["knownAt"], "2026-11-20T09:15:00.123Z");
        assert_eq!(revision["changes"][0]["currencyCode"], "USD");
        assert_eq!(revision["changes"][0]["field"], "cashBuying");
    }

    #[test]
    fn csv_has_a_row_per_change_and_quotes_a_reason_that_needs_it() {
        let csv = revisions_csv(&[correction(Some("rates, \"typed\" wrong"))]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 2, "{csv}");
        assert!(
            lines[1].ends_with(r#","rates, ""typed"" wrong",USD,cashBuying,155.10,155.60"#),
            "{csv}"
        );
        let mut unchanged = correction(None);
        unchanged.changes.clear();
        assert!(revisions_csv(&[unchanged])
            .lines()
            .nth(1)
            .unwrap()
            .ends_with(",,,,,"));
    }

    #[test]
    fn a_board_shows_its_rates_as_history_does_and_its_provenance() {
        let board = Board {
            event_id: Uuid::from_u128(1),
            bank_id: BankId::new(7).unwrap(),
            as_of: "2026-11-20T08:00:00Z".parse().unwrap(),
            rates: vec![usd("155.10")],
            received_at: Some("2026-11-20T08:00:01Z".parse().unwrap()),
            known_at: Some("2026-11-20T08:00:01.5Z".parse().unwrap()),
            log: Some(LogPosition {
                topic: "ratewire.events".into(),
                partition: 3,
                offset: 42,
            }),
            source: Some(
                Source::new(
                    ratewire_proto::Method::Page,
                    Some("https://bank.example/r"),
                    None,
                    None,
                )
                .unwrap(),
            ),
            reason: None,
            status: Status::Corrected,
            revisions: vec![correction(None)],
            outliers: Vec::new(),
        };
        let style = ViewStyle {
            currency_image_base: "https://i.test".into(),
            outliers: crate::quality::OutlierRule::default(),
        };
        let json: serde_json::Value = serde_json::from_str(&board_json(&board, &style)).unwrap();
        let data = &json["data"];
        assert_eq!(data["rates"][0]["timestamp"], "2026-11-20T08:00:00.000Z");
        assert_eq!(data["rates"][0]["currency"]["symbol"], "USD");
        assert_eq!(data["knownAt"], "2026-11-20T08:00:01.500Z");
        assert_eq!(
            data["log"],
            serde_json::json!({"topic": "ratewire.events", "partition": 3, "offset": 42})
        );
        assert_eq!(
            data["source"],
            serde_json::json!({"url": "https://bank.example/r", "method": "page"})
        );
        assert_eq!(data["reason"], serde_json::Value::Null);
        assert_eq!(data["status"], "corrected");
        assert_eq!(
            data["revisions"][0]["revisedEventId"],
            Uuid::from_u128(1).to_string()
        );
    }
}
