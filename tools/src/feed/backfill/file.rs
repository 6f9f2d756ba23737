//! Reading a backfill file into boards: CSV rows grouped by bank and as-of
//! time, or JSON boards (an array or JSON Lines), each keeping the numbers
//! exactly as written and where in the file it came from, so problems can
//! be reported in the file's terms.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context};
use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use ratewire_proto::BankId;
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    /// A JSON array of boards, or JSON Lines.
    Json,
}

impl Format {
    /// The format a file name suggests.
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "csv" => Some(Format::Csv),
            "json" | "jsonl" | "ndjson" => Some(Format::Json),
            _ => None,
        }
    }
}

/// One board read from the file.
#[derive(Debug, Clone)]
pub struct FileBoard {
    pub bank_id: i64,
    pub as_of: DateTime<Utc>,
    /// The push body, numbers exactly as the file wrote them.
    pub body: String,
    /// Where the board came from, e.g. `lines 2-13` or `item 4`.
    pub origin: String,
    /// Where each rate entry came from, when entries are rows (CSV).
    pub entry_origins: Option<Vec<String>>,
    pub entries: usize,
}

impl FileBoard {
    pub(super) fn label(&self) -> String {
        format!(
            "bank {} as of {} ({})",
            self.bank_id,
            self.as_of.to_rfc3339_opts(SecondsFormat::AutoSi, true),
            self.origin
        )
    }

    /// Ingest's field name (`rates[3].cashSelling`) said in terms of the
    /// file (`line 17: cashSelling`).
    pub(super) fn locate(&self, field: &str) -> String {
        if let Some(origins) = &self.entry_origins {
            if let Some((index, rest)) =
                field.strip_prefix("rates[").and_then(|r| r.split_once(']'))
            {
                if let Some(origin) = index.parse::<usize>().ok().and_then(|i| origins.get(i)) {
                    let rest = rest.trim_start_matches('.');
                    return if rest.is_empty() {
                        origin.clone()
                    } else {
                        format!("{origin}: {rest}")
                    };
                }
            }
        }
        format!("{}: {field}", self.origin)
    }

    /// The key that makes pushing this board again harmless.
    pub(super) fn idempotency_key(&self) -> String {
        let digest = Sha256::digest(format!("{}\n{}", self.bank_id, self.body));
        format!("backfill-{}", &hex::encode(digest)[..40])
    }
}

/// The file read: boards, and rows that could not be placed in any board.
#[derive(Debug, Default)]
pub struct FileContents {
    pub boards: Vec<FileBoard>,
    /// `(origin, problem)` of rows without a usable bank or as-of time.
    pub unplaced: Vec<(String, String)>,
}

const CSV_REQUIRED: [&str; 5] = ["bankId", "asOf", "currency", "cashBuying", "cashSelling"];
const CSV_OPTIONAL: [&str; 2] = ["transactionalBuying", "transactionalSelling"];

fn parse_bank(text: &str) -> Result<i64, String> {
    text.trim()
        .parse::<BankId>()
        .map(BankId::get)
        .map_err(|_| "bankId: must be a positive integer".to_owned())
}

fn parse_as_of(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc).trunc_subsecs(6))
        .map_err(|_| "asOf: must be an RFC 3339 timestamp such as 2026-11-23T08:00:00Z".to_owned())
}

/// A cell as JSON: a number stays the exact digits written, anything else
/// becomes a string, which ingest's rules then name as the problem.
fn json_number_or_string(cell: &str) -> String {
    if serde_json::from_str::<serde_json::Number>(cell).is_ok() {
        cell.to_owned()
    } else {
        serde_json::Value::String(cell.to_owned()).to_string()
    }
}

/// A board's body as ingest takes it: `rates` is the JSON array's text.
pub fn board_body(as_of: &DateTime<Utc>, rates: &str) -> String {
    format!(
        r#"{{"asOf":"{}","rates":{rates}}}"#,
        as_of.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    )
}

/// The rows of one CSV board: where each came from, and its JSON entry.
#[derive(Default)]
struct CsvBoard {
    origins: Vec<String>,
    entries: Vec<String>,
}

pub fn read_csv(text: &[u8]) -> anyhow::Result<FileContents> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text);
    let headers = reader.headers().context("reading the CSV header")?.clone();
    if let Some(unknown) = headers
        .iter()
        .find(|h| !CSV_REQUIRED.contains(h) && !CSV_OPTIONAL.contains(h))
    {
        bail!(
            "unknown CSV column `{unknown}`: the columns are {} and optionally {}",
            CSV_REQUIRED.join(", "),
            CSV_OPTIONAL.join(", ")
        );
    }
    let column = |name: &str| headers.iter().position(|h| h == name);
    let missing: Vec<&str> = CSV_REQUIRED
        .into_iter()
        .filter(|name| column(name).is_none())
        .collect();
    if !missing.is_empty() {
        bail!("the CSV header lacks {}", missing.join(", "));
    }
    let [bank, as_of, currency, cash_buying, cash_selling] =
        CSV_REQUIRED.map(|n| column(n).unwrap_or_default());
    let [tx_buying, tx_selling] = CSV_OPTIONAL.map(column);

    let mut contents = FileContents::default();
    // (bank, as of) -> (origins, entries); BTreeMap so each bank's boards
    // come out in as-of order.
    let mut boards: BTreeMap<(i64, DateTime<Utc>), CsvBoard> = BTreeMap::new();
    for record in reader.records() {
        let record = match record {
            Ok(record) => record,
            Err(e) => {
                let line = e.position().map(|p| p.line()).unwrap_or_default();
                contents
                    .unplaced
                    .push((format!("line {line}"), format!("unreadable row: {e}")));
                continue;
            }
        };
        let origin = format!(
            "line {}",
            record.position().map(|p| p.line()).unwrap_or_default()
        );
        let cell = |i: usize| record.get(i).unwrap_or_default();
        let key = match (parse_bank(cell(bank)), parse_as_of(cell(as_of))) {
            (Ok(bank), Ok(as_of)) => (bank, as_of),
            (Err(problem), _) | (_, Err(problem)) => {
                contents.unplaced.push((origin, problem));
                continue;
            }
        };
        let mut entry = format!(
            r#"{{"currency":{},"cashBuying":{},"cashSelling":{}"#,
            serde_json::Value::String(cell(currency).to_owned()),
            json_number_or_string(cell(cash_buying)),
            json_number_or_string(cell(cash_selling)),
        );
        for (name, index) in [
            ("transactionalBuying", tx_buying),
            ("transactionalSelling", tx_selling),
        ] {
            if let Some(value) = index.map(cell).filter(|v| !v.is_empty()) {
                entry.push_str(&format!(r#","{name}":{}"#, json_number_or_string(value)));
            }
        }
        entry.push('}');
        let board = boards.entry(key).or_default();
        board.origins.push(origin);
        board.entries.push(entry);
    }
    contents.boards = boards
        .into_iter()
        .map(
            |((bank_id, as_of), CsvBoard { origins, entries })| FileBoard {
                bank_id,
                as_of,
                body: board_body(&as_of, &format!("[{}]", entries.join(","))),
                origin: span_of(&origins),
                entries: entries.len(),
                entry_origins: Some(origins),
            },
        )
        .collect();
    Ok(contents)
}

/// `line 4`, or `lines 2-13` for a board made of several rows.
fn span_of(origins: &[String]) -> String {
    let lines: Vec<&str> = origins
        .iter()
        .filter_map(|o| o.strip_prefix("line "))
        .collect();
    match (lines.first(), lines.last()) {
        (Some(first), Some(last)) if first != last => format!("lines {first}-{last}"),
        (Some(first), _) => format!("line {first}"),
        _ => String::new(),
    }
}

#[derive(Deserialize)]
struct RawFileBoard<'a> {
    #[serde(rename = "bankId", borrow, default)]
    bank_id: Option<&'a RawValue>,
    #[serde(rename = "asOf", borrow, default)]
    as_of: Option<&'a RawValue>,
    #[serde(borrow, default)]
    rates: Option<&'a RawValue>,
    #[serde(borrow, default)]
    source: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reason: Option<&'a RawValue>,
}

pub fn read_json(text: &str) -> anyhow::Result<FileContents> {
    let items: Vec<(String, &str)> = if text.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<&RawValue>>(text)
            .context("reading the JSON array of boards")?
            .into_iter()
            .enumerate()
            .map(|(i, item)| (format!("item {}", i + 1), item.get()))
            .collect()
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| (format!("line {}", i + 1), line))
            .collect()
    };

    let mut contents = FileContents::default();
    for (origin, item) in items {
        let raw = match serde_json::from_str::<RawFileBoard<'_>>(item) {
            Ok(raw) if item.trim_start().starts_with('{') => raw,
            _ => {
                contents.unplaced.push((
                    origin,
                    "must be a JSON object with bankId, asOf and rates".into(),
                ));
                continue;
            }
        };
        let bank = raw
            .bank_id
            .ok_or_else(|| "bankId: is required".to_owned())
            .and_then(|v| parse_bank(v.get()));
        let as_of = raw
            .as_of
            .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
            .ok_or_else(|| "asOf: is required in a backfill, as a timestamp string".to_owned())
            .and_then(|t| parse_as_of(&t));
        let (bank_id, as_of) = match (bank, as_of) {
            (Ok(bank), Ok(as_of)) => (bank, as_of),
            (Err(problem), _) | (_, Err(problem)) => {
                contents.unplaced.push((origin, problem));
                continue;
            }
        };
        let rates = raw.rates.map(RawValue::get).unwrap_or("null");
        let entries = serde_json::from_str::<Vec<&RawValue>>(rates)
            .map(|r| r.len())
            .unwrap_or(1);
        // The board's source and reason go as written; ingest's rules
        // check them with the rest.
        let mut body = board_body(&as_of, rates);
        for (name, value) in [("source", raw.source), ("reason", raw.reason)] {
            if let Some(value) = value {
                body.pop();
                body.push_str(&format!(r#","{name}":{}}}"#, value.get()));
            }
        }
        contents.boards.push(FileBoard {
            bank_id,
            as_of,
            body,
            origin,
            entry_origins: None,
            entries,
        });
    }
    // Each bank's boards in as-of order, file order among equals.
    contents
        .boards
        .sort_by_key(|board| (board.bank_id, board.as_of));
    Ok(contents)
}

pub fn read_file(path: &Path, format: Option<Format>) -> anyhow::Result<FileContents> {
    let format = format.or_else(|| Format::of(path)).with_context(|| {
        format!(
            "cannot tell the format of {} from its name; give --format csv or --format json",
            path.display()
        )
    })?;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    match format {
        Format::Csv => read_csv(&bytes),
        Format::Json => read_json(
            std::str::from_utf8(&bytes)
                .with_context(|| format!("{} is not UTF-8", path.display()))?,
        ),
    }
    .with_context(|| format!("in {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str =
        "bankId,asOf,currency,cashBuying,cashSelling,transactionalBuying,transactionalSelling
1,2026-10-01T08:00:00Z,USD,155.10,158.20,155.00,158.00
1,2026-10-01T08:00:00Z,EUR,180.40,184.00,,
2,2026-10-01T08:00:00Z,USD,154.90,158.00,,
1,2026-09-30T08:00:00Z,USD,154.00,157.00,,
x,2026-10-01T08:00:00Z,USD,1,2,,
";

    #[test]
    fn csv_rows_of_one_bank_and_time_form_one_board_in_as_of_order() {
        let contents = read_csv(CSV.as_bytes()).unwrap();
        let summary: Vec<(i64, String, usize, &str)> = contents
            .boards
            .iter()
            .map(|b| {
                (
                    b.bank_id,
                    b.as_of.to_rfc3339(),
                    b.entries,
                    b.origin.as_str(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (1, "2026-09-30T08:00:00+00:00".into(), 1, "line 5"),
                (1, "2026-10-01T08:00:00+00:00".into(), 2, "lines 2-3"),
                (2, "2026-10-01T08:00:00+00:00".into(), 1, "line 4"),
            ]
        );
        assert_eq!(
            contents.boards[1].body,
            r#"{"asOf":"2026-10-01T08:00:00Z","rates":[{"currency":"USD","cashBuying":155.10,"cashSelling":158.20,"transactionalBuying":155.00,"transactionalSelling":158.00},{"currency":"EUR","cashBuying":180.40,"cashSelling":184.00}]}"#
        );
        assert_eq!(
            contents.unplaced,
            [("line 6".into(), "bankId: must be a positive integer".into())]
        );
    }

    #[test]
    fn a_json_board_keeps_its_source_and_reason() {
        let line = r#"{"bankId": 1, "asOf": "2026-10-01T08:00:00Z", "rates": [{"currency": "USD", "cashBuying": 1, "cashSelling": 2}], "source": {"method": "file", "url": "https://bank.example/2026.pdf"}, "reason": "from the annual report"}"#;
        let contents = read_json(line).unwrap();
        let body: serde_json::Value = serde_json::from_str(&contents.boards[0].body).unwrap();
        assert_eq!(body["source"]["method"], "file");
        assert_eq!(body["reason"], "from the annual report");
        let board =
            ratewire_ingest::board::parse(contents.boards[0].body.as_bytes(), Utc::now()).unwrap();
        assert_eq!(board.source().map(|s| s.method().as_str()), Some("file"));
    }

    #[test]
    fn a_csv_without_the_required_columns_is_refused_whole() {
        let error = read_csv(b"bankId,currency,cashBuying\n1,USD,1\n").unwrap_err();
        assert!(error.to_string().contains("asOf"), "{error}");
        let error = read_csv(b"bankId,asOf,currency,cashBuying,cashSelling,mid\n").unwrap_err();
        assert!(error.to_string().contains("mid"), "{error}");
    }

    #[test]
    fn json_arrays_and_json_lines_both_read_and_keep_the_numbers_written() {
        let lines = r#"{"bankId": 2, "asOf": "2026-10-02T08:00:00Z", "rates": [{"currency": "USD", "cashBuying": 155.10, "cashSelling": 158.20}]}

{"bankId": 2, "asOf": "2026-10-01T08:00:00Z", "rates": [{"currency": "USD", "cashBuying": 154.10, "cashSelling": 157.20}]}
{"bankId": 2, "rates": []}
"#;
        let contents = read_json(lines).unwrap();
        assert_eq!(contents.boards.len(), 2);
        assert_eq!(contents.boards[0].origin, "line 3");
        assert!(contents.boards[1].body.contains("155.10"));
        assert_eq!(contents.unplaced[0].0, "line 4");

        let array = format!(
            "[{}]",
            lines
                .lines()
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(",")
        );
        let contents = read_json(&array).unwrap();
        assert_eq!(contents.boards.len(), 2);
        assert_eq!(contents.boards[0].origin, "item 2");
    }

    #[test]
    fn the_idempotency_key_depends_on_bank_and_body_only() {
        let board = read_csv(CSV.as_bytes()).unwrap().boards.remove(0);
        let mut same = board.clone();
        same.origin = "elsewhere".into();
        assert_eq!(board.idempotency_key(), same.idempotency_key());
        same.bank_id = 9;
        assert_ne!(board.idempotency_key(), same.idempotency_key());
        assert!(ratewire_ingest::idempotency::check_key(&board.idempotency_key()).is_ok());
    }
}
