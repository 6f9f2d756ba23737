//! The National Bank's published reference rates, taken as the bank
//! publishes them (its `filter-exchange-rates` JSON), checked by every
//! rule of a reference board, and put on the log once per change.

use chrono::{DateTime, NaiveDate, Utc};
use ratewire_proto::board::check_entries;
use ratewire_proto::reference::{check_day_received, EntryNames, ReferenceParts, NATIONAL_BANK};
use ratewire_proto::rules::earliest_as_of;
use ratewire_proto::{CurrencyCode, Envelope, ReferenceBoardPublished, ReferenceEntry};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

use crate::error::{Error, FieldErrors, Result};
use crate::publisher::Publisher;

/// What the published response calls an entry's fields.
const PUBLISHED_NAMES: EntryNames = EntryNames {
    currency: "currency.code",
    buying: "buying",
    selling: "selling",
    weighted_average: "weighted_average",
};

/// The fields of the published response, of one of its entries and of an
/// entry's currency. Any other is refused under its own name: a misspelt
/// or unexpected field would otherwise be dropped without a word.
const RESPONSE_FIELDS: [&str; 4] = ["success", "message", "status", "data"];
const ENTRY_FIELDS: [&str; 7] = [
    "id",
    "currency_id",
    "buying",
    "selling",
    "date",
    "weighted_average",
    "currency",
];
const CURRENCY_FIELDS: [&str; 3] = ["id", "name", "code"];

/// The names of `object` that are not `known`.
fn unknown<'a>(
    object: &'a Map<String, Value>,
    known: &'static [&'static str],
) -> impl Iterator<Item = &'a String> {
    object
        .keys()
        .filter(move |name| !known.contains(&name.as_str()))
}

/// Where the published response has what a reference board's rule names
/// (`rates[1].currency` is `data[1].currency.code`; the day is every
/// entry's `date`).
fn published_field(field: String) -> String {
    match field.strip_prefix("rates") {
        Some(rest) => format!("data{}", rest.replace(".currency", ".currency.code")),
        None if field == "date" => "data[0].date".into(),
        None => field,
    }
}

/// Reads a published response (`{"success", "message", "status", "data":
/// [...]}`) into one day's board, or every problem with it, each under its
/// path (`data[2].buying`, `data[0].currency.mid`). Names are ignored
/// (they are misspelt at the source; ours come from ISO 4217), and so are
/// the source's ids.
pub fn parse(body: &[u8], now: DateTime<Utc>) -> Result<ReferenceBoardPublished, FieldErrors> {
    let mut errors = FieldErrors::new();
    let mut add = |field: String, message: String| errors.entry(field).or_default().push(message);
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => {
            add("body".into(), format!("is not JSON: {e}"));
            return Err(errors);
        }
    };
    let Some(object) = value.as_object() else {
        add("body".into(), "must be the published JSON object".into());
        return Err(errors);
    };
    for name in unknown(object, &RESPONSE_FIELDS) {
        add(
            name.clone(),
            format!(
                "is not a field of the published response ({})",
                RESPONSE_FIELDS.join(", ")
            ),
        );
    }
    match object.get("success") {
        None | Some(Value::Null) | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => add(
            "success".into(),
            "is false: the source reports a failure".into(),
        ),
        Some(_) => add("success".into(), "must be a boolean".into()),
    }
    match object.get("status") {
        None | Some(Value::Null) => {}
        Some(status) if status.as_u64() == Some(200) => {}
        Some(status) => add("status".into(), format!("must be 200 (found {status})")),
    }
    let Some(data) = object.get("data").and_then(Value::as_array) else {
        add("data".into(), "must be an array of the day's rates".into());
        return Err(errors);
    };
    if data.is_empty() {
        add(
            "data".into(),
            "has no rates (the source publishes none on weekends and holidays)".into(),
        );
    }
    let horizon = earliest_as_of().date_naive();
    let mut day: Option<NaiveDate> = None;
    let mut entries: Vec<ReferenceEntry> = Vec::with_capacity(data.len());
    // Each entry's currency when it reads as one, for the rule that each
    // is there once, which holds whatever else is wrong with the entries.
    let mut currencies: Vec<Option<CurrencyCode>> = Vec::with_capacity(data.len());
    for (i, item) in data.iter().enumerate() {
        let at = |field: &str| format!("data[{i}].{field}");
        let Some(entry) = item.as_object() else {
            add(
                format!("data[{i}]"),
                "must be an object: one currency's rates".into(),
            );
            currencies.push(None);
            continue;
        };
        for name in unknown(entry, &ENTRY_FIELDS) {
            add(
                at(name),
                format!(
                    "is not a field of a published rate ({})",
                    ENTRY_FIELDS.join(", ")
                ),
            );
        }
        let text = |field: &str| entry.get(field).and_then(Value::as_str);
        let mut wrong_type = Vec::new();
        for field in ["buying", "selling", "weighted_average", "date"] {
            if entry
                .get(field)
                .is_some_and(|v| !v.is_string() && !v.is_null())
            {
                wrong_type.push(field);
            }
        }
        for field in &wrong_type {
            add(
                at(field),
                "must be a string (decimals are published as strings, kept exactly)".into(),
            );
        }
        let currency = match entry.get("currency") {
            None | Some(Value::Null) => None,
            Some(Value::Object(currency)) => {
                for name in unknown(currency, &CURRENCY_FIELDS) {
                    add(
                        at(&format!("currency.{name}")),
                        format!(
                            "is not a field of a published currency ({})",
                            CURRENCY_FIELDS.join(", ")
                        ),
                    );
                }
                Some(currency)
            }
            Some(_) => {
                add(
                    at("currency"),
                    "must be an object with the currency's code".into(),
                );
                wrong_type.push("currency.code");
                None
            }
        };
        match text("date").map(|d| d.parse::<NaiveDate>()) {
            None if !wrong_type.contains(&"date") => add(at("date"), "is required".into()),
            None => {}
            Some(Err(_)) => add(at("date"), "must be a date (YYYY-MM-DD)".into()),
            Some(Ok(date)) if date < horizon => {
                add(at("date"), format!("must not be before {horizon}"));
            }
            Some(Ok(date)) => match day {
                None => {
                    day = Some(date);
                    if let Err(v) = check_day_received(date, now) {
                        add(at("date"), v.message);
                    }
                }
                Some(first) if first != date => add(
                    at("date"),
                    format!(
                        "must be the same day as every other entry ({first}): one day per body"
                    ),
                ),
                Some(_) => {}
            },
        }
        let parts = ReferenceParts {
            currency: currency.and_then(|c| c.get("code")).and_then(Value::as_str),
            buying: text("buying"),
            selling: text("selling"),
            weighted_average: text("weighted_average"),
        };
        currencies.push(parts.currency.and_then(|c| CurrencyCode::parse(c).ok()));
        match parts.check(&PUBLISHED_NAMES) {
            Ok(entry) => entries.push(entry),
            Err(problems) => {
                for problem in problems {
                    let name = problem.field.trim_start_matches("data.");
                    if wrong_type.contains(&name) {
                        continue;
                    }
                    add(at(name), problem.message);
                }
            }
        }
    }
    if !data.is_empty() {
        for problem in check_entries(currencies.into_iter()) {
            add(published_field(problem.field), problem.message);
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let date = day.expect("a non-empty list of dated entries has a day");
    // Every rule was checked above, entry by entry; the contract's type
    // checks them again as a whole.
    ReferenceBoardPublished::new(NATIONAL_BANK, date, entries)
        .map(ReferenceBoardPublished::canonical)
        .map_err(|problems| {
            let mut errors = FieldErrors::new();
            for problem in problems {
                errors
                    .entry(published_field(problem.field))
                    .or_default()
                    .push(problem.message);
            }
            errors
        })
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct Imported {
    pub source: String,
    pub date: NaiveDate,
    /// The event that carries the day's values: the new one, or, when
    /// nothing changed, the one published before.
    pub event_id: Uuid,
    pub currencies: usize,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A day not published before.
    Published,
    /// Other values for a day published before: it replaces them.
    Corrected,
    /// The same values as published before: nothing was published.
    Unchanged,
}

/// Publishes `board` unless the same day was published with the same
/// values. The day's row is locked until the broker acknowledged, so two
/// imports of one day publish in the order they are recorded.
pub async fn import(
    pool: &PgPool,
    publisher: &Publisher,
    board: ReferenceBoardPublished,
) -> Result<Imported> {
    let stored = serde_json::to_value(&board).expect("a board serializes");
    let mut tx = pool.begin().await?;
    // One import of a day at a time, whether or not it has a row yet.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('reference:' || $1 || ':' || $2::text))")
        .bind(board.source())
        .bind(board.date())
        .execute(&mut *tx)
        .await?;
    let before: Option<(Value, Uuid)> = sqlx::query_as(
        "SELECT board, event_id FROM reference_imports WHERE source = $1 AND date = $2",
    )
    .bind(board.source())
    .bind(board.date())
    .fetch_optional(&mut *tx)
    .await?;
    let imported = |event_id, outcome| Imported {
        source: board.source().to_owned(),
        date: board.date(),
        event_id,
        currencies: board.rates().len(),
        outcome,
    };
    if let Some((ref previous, event_id)) = before {
        if *previous == stored {
            return Ok(imported(event_id, Outcome::Unchanged));
        }
    }
    let outcome = if before.is_some() {
        Outcome::Corrected
    } else {
        Outcome::Published
    };
    let mut envelope = Envelope::reference(Utc::now(), board.clone());
    envelope.event_id = event_id(&stored, before.as_ref().map(|(_, id)| *id));
    publisher.publish(&envelope).await?;
    sqlx::query(
        "INSERT INTO reference_imports (source, date, board, event_id, published_at)
         VALUES ($1, $2, $3, $4, now())
         ON CONFLICT (source, date) DO UPDATE
         SET board = EXCLUDED.board, event_id = EXCLUDED.event_id, published_at = now()",
    )
    .bind(board.source())
    .bind(board.date())
    .bind(&stored)
    .bind(envelope.event_id)
    .execute(&mut *tx)
    .await?;
    // Committed after the broker's ack: a failed commit makes the next
    // import publish the day again, which replaces it with the same values.
    tx.commit().await?;
    Ok(imported(envelope.event_id, outcome))
}

/// The event id of a day's values, made from them and from the event they
/// replace: an import retried after its record failed to commit (the
/// broker took it, Postgres did not) publishes the same event again, which
/// the projector applies once; the same values after others are a new
/// event.
fn event_id(board: &Value, replaces: Option<Uuid>) -> Uuid {
    let mut hash = Sha256::new();
    hash.update(board.to_string().as_bytes());
    hash.update(replaces.unwrap_or_default().as_bytes());
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

impl From<FieldErrors> for Error {
    fn from(errors: FieldErrors) -> Self {
        Error::Validation(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: &str = r#"{"success":true,"message":"OK","status":200,"data":[
      {"id":"01kr1","currency_id":"01hc1","buying":"157.227","selling":"158.7993","date":"2026-05-18",
       "weighted_average":"157.227","currency":{"id":"01hc1","name":"US DOLLAR","code":"USD"}},
      {"id":"01kr2","currency_id":"01hc2","buying":"20.1208","selling":"20.5232","date":"2026-05-18",
       "weighted_average":"20.3220","currency":{"id":"01hc2","name":"DANISH KNRONER","code":"DKK"}}]}"#;

    fn now() -> DateTime<Utc> {
        "2026-05-18T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn the_published_shape_is_taken_as_it_is() {
        let board = parse(DAY.as_bytes(), now()).unwrap();
        assert_eq!(board.date().to_string(), "2026-05-18");
        assert_eq!(board.source(), "NBE");
        // In currency order, with the published digits.
        assert_eq!(board.rates()[0].currency().as_str(), "DKK");
        assert_eq!(board.rates()[0].weighted_average().to_string(), "20.3220");
        assert_eq!(board.rates()[1].selling().to_string(), "158.7993");
    }

    #[test]
    fn every_problem_is_named_under_its_field() {
        let body = r#"{"success":true,"data":[
          {"buying":"-1","selling":"2","date":"2026-05-18","weighted_average":"1","currency":{"code":"USD"}},
          {"buying":"3","selling":"2","date":"2026-05-19","weighted_average":1.5,"currency":{"code":"QQQ"}},
          {"buying":"1","selling":"2","weighted_average":"1","currency":{}}]}"#;
        let errors = parse(body.as_bytes(), now()).unwrap_err();
        let fields: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(
            fields,
            [
                "data[0].buying",
                "data[1].currency.code",
                "data[1].date",
                "data[1].selling",
                "data[1].weighted_average",
                "data[2].currency.code",
                "data[2].date",
            ]
        );
    }

    #[test]
    fn a_day_to_come_and_a_reported_failure_are_refused() {
        let later = DAY.replace("2026-05-18", "2026-05-20");
        assert!(parse(later.as_bytes(), now())
            .unwrap_err()
            .contains_key("data[0].date"));
        let failed = r#"{"success":false,"message":"error","status":500,"data":[]}"#;
        let errors = parse(failed.as_bytes(), now()).unwrap_err();
        assert!(errors.contains_key("success") && errors.contains_key("status"));
        assert!(parse(b"[1]", now()).unwrap_err().contains_key("body"));
    }

    #[test]
    fn a_day_published_again_after_other_values_is_another_event() {
        let a = serde_json::json!({"rates": [1]});
        let b = serde_json::json!({"rates": [2]});
        let first = event_id(&a, None);
        assert_eq!(event_id(&a, None), first, "a retry is the same event");
        let second = event_id(&b, Some(first));
        assert_ne!(event_id(&a, Some(second)), first);
    }

    #[test]
    fn a_field_the_published_shape_lacks_is_refused_under_its_path() {
        let body = DAY
            .replace(r#""message":"OK","#, r#""message":"OK","page":1,"#)
            .replace(
                r#""weighted_average":"157.227","#,
                r#""weighted_average":"157.227","mid":"2","#,
            )
            .replace(
                r#""name":"DANISH KNRONER","#,
                r#""name":"DANISH KNRONER","symbol":"kr","#,
            );
        let errors = parse(body.as_bytes(), now()).unwrap_err();
        let fields: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(fields, ["data[0].mid", "data[1].currency.symbol", "page"]);
        assert!(errors["data[0].mid"][0].starts_with("is not a field of a published rate"));
    }

    #[test]
    fn selling_below_buying_and_a_currency_twice_are_both_named() {
        let body = DAY
            .replace(r#""selling":"158.7993""#, r#""selling":"150""#)
            .replace(r#""code":"DKK""#, r#""code":"usd""#);
        let errors = parse(body.as_bytes(), now()).unwrap_err();
        let fields: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(fields, ["data[0].selling", "data[1].currency.code"]);
        assert_eq!(
            errors["data[1].currency.code"],
            ["USD appears more than once"]
        );
    }

    #[test]
    fn a_day_before_the_horizon_is_named_under_its_entry() {
        let old = DAY.replace("2026-05-18", "1989-12-29");
        let errors = parse(old.as_bytes(), now()).unwrap_err();
        let fields: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(fields, ["data[0].date", "data[1].date"]);
        assert_eq!(errors["data[0].date"], ["must not be before 1990-01-01"]);
    }
}
