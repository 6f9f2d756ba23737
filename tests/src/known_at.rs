//! Answers as known at an instant: what every endpoint answered live at a
//! recorded instant ([`Moment`]), asked again later with `asKnownAt`, and
//! compared byte for byte once what is volatile is taken out
//! ([`without_volatile`]).
//!
//! Bodies are compared as the API wrote them: a number keeps its digits
//! (155.10 is not 155.1) and fields keep their order, so the comparison is
//! made on the text, parsed only far enough to take fields out (see
//! [`raw`]), not through `serde_json::Value`, which would round numbers
//! to `f64`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, SubsecRound, Utc};

use crate::Stack;

/// How long every answer must stay the same to count as settled.
pub const QUIET: Duration = Duration::from_millis(300);

/// The projector's count of bank views written (see
/// [`Stack::wait_aggregates_written`]).
const BANK_VIEWS_WRITTEN: &str = "ratewire_projector_visible_delay_seconds_count";

/// What one endpoint answered: its status and its body with the volatile
/// fields taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub path: String,
    pub status: u16,
    pub body: String,
}

/// An instant of the test's story and what every endpoint answered live
/// then.
#[derive(Debug, Clone)]
pub struct Moment {
    /// The step just taken ("Awash retracts its board").
    pub step: String,
    /// The instant, to the millisecond, after the step was visible.
    pub at: DateTime<Utc>,
    pub answers: Vec<Answer>,
}

impl Moment {
    /// The instant as `asKnownAt` takes it and the envelope gives it back:
    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub fn instant(&self) -> String {
        instant(self.at)
    }
}

/// `at` as RFC 3339 in UTC with milliseconds, as the API writes times.
pub fn instant(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `path` with `asKnownAt=at` added to its query.
pub fn as_known_at(path: &str, at: &str) -> String {
    let joiner = if path.contains('?') { '&' } else { '?' };
    format!("{path}{joiner}asKnownAt={at}")
}

/// A body without what differs between two renderings of the same
/// knowledge: the envelope's `asKnownAt` (only the asking has it), ages
/// (`ageSeconds`, which grow by the second) and the best rates' render
/// time (`timestamp` beside a `price`: when the view was computed, not a
/// fact of the data). Anything else, numbers' digits and fields' order
/// included, is kept as written. A body that is not JSON is kept whole.
pub fn without_volatile(text: &str) -> String {
    match raw::parse(text) {
        Ok(mut json) => {
            json.remove_top("asKnownAt");
            json.strip(&|object: &[raw::Field], key: &str| {
                key == "ageSeconds"
                    || (key == "timestamp" && object.iter().any(|(k, _)| k == "price"))
            });
            json.to_string()
        }
        Err(_) => text.to_owned(),
    }
}

/// Where two texts first differ, shown with some context on each side.
pub fn first_difference(expected: &str, got: &str) -> String {
    let at = expected
        .bytes()
        .zip(got.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(got.len()));
    let around = |text: &str| {
        let (mut start, mut end) = (at.saturating_sub(120), (at + 120).min(text.len()));
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        while !text.is_char_boundary(end) {
            end += 1;
        }
        format!("…{}…", &text[start..end])
    };
    format!(
        "first difference at byte {at}:\n      live: {}\n    as-of: {}",
        around(expected),
        around(got)
    )
}

impl Stack {
    /// GETs each of `paths` (with `asKnownAt` when given) from the API at
    /// `base`, checking every answer against the OpenAPI document.
    pub async fn answers_from(
        &self,
        base: &str,
        key: &str,
        paths: &[String],
        at: Option<&str>,
    ) -> Result<Vec<Answer>> {
        let mut answers = Vec::with_capacity(paths.len());
        for path in paths {
            let asked = match at {
                Some(at) => as_known_at(path, at),
                None => path.clone(),
            };
            let response = self
                .http()
                .get(format!("{base}{asked}"))
                .header("x-api-key", key)
                .send()
                .await
                .with_context(|| format!("GET {asked}"))?;
            let status = response.status().as_u16();
            let text = response.text().await?;
            if let Ok(parsed) = serde_json::from_str::<serde_json::Value>(&text) {
                self.conforms(&asked, status, &parsed);
            }
            answers.push(Answer {
                path: path.clone(),
                status,
                body: without_volatile(&text),
            });
        }
        Ok(answers)
    }

    /// Every path's live answer once it has settled: the projector has
    /// written the views over all banks for every bank view it wrote, and
    /// no answer has changed for [`QUIET`] (an API instance drops a view
    /// it keeps a millisecond or two after the projector wrote it).
    pub async fn settled_answers(
        &self,
        base: &str,
        key: &str,
        paths: &[String],
    ) -> Result<Vec<Answer>> {
        if self.metric("ratewire-projector", BANK_VIEWS_WRITTEN).await > 0.0 {
            self.wait_aggregates_written().await?;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = self.answers_from(base, key, paths, None).await?;
        let mut since = Instant::now();
        loop {
            let now = self.answers_from(base, key, paths, None).await?;
            if now != last {
                (last, since) = (now, Instant::now());
            } else if since.elapsed() >= QUIET {
                return Ok(now);
            }
            if Instant::now() > deadline {
                bail!("the answers did not settle within 20 s");
            }
        }
    }

    /// Records `step`: once every answer has settled, the instant (just
    /// past the step's known-at time) and what each path answered live
    /// then.
    pub async fn record_moment(&self, step: &str, key: &str, paths: &[String]) -> Result<Moment> {
        let base = self.api_url.clone();
        let settled = self.settled_answers(&base, key, paths).await?;
        // Visible means folded, and folded means known (the broker's
        // append time is before the fold read it): a few milliseconds
        // more keep the instant clear of it at the millisecond the API
        // truncates to.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let at = Utc::now().trunc_subsecs(3);
        let answers = self.answers_from(&base, key, paths, None).await?;
        if answers != settled {
            bail!("{step}: the answers changed while nothing was published");
        }
        Ok(Moment {
            step: step.to_owned(),
            at,
            answers,
        })
    }

    /// Asks every moment's paths of the API at `base` as known at the
    /// moment's instant; every difference from what was answered live
    /// then, described (none: the answers are the same).
    pub async fn differences_as_known_at(
        &self,
        base: &str,
        key: &str,
        moments: &[Moment],
    ) -> Result<Vec<String>> {
        let mut differences = Vec::new();
        for moment in moments {
            let at = moment.instant();
            let paths: Vec<String> = moment.answers.iter().map(|a| a.path.clone()).collect();
            let asked = self.answers_from(base, key, &paths, Some(&at)).await?;
            for (live, then) in moment.answers.iter().zip(&asked) {
                let place = format!("{} as known at {at} ({})", live.path, moment.step);
                if (live.status, &live.body) != (then.status, &then.body) {
                    differences.push(format!(
                        "{place}: live {} vs as-of {}\n    {}",
                        live.status,
                        then.status,
                        first_difference(&live.body, &then.body)
                    ));
                }
            }
            // The envelope says which instant was answered.
            let first = &paths[0];
            let (status, body) = self.get_from(base, &as_known_at(first, &at), key).await?;
            if status == 200 && body["asKnownAt"] != at.as_str() {
                differences.push(format!(
                    "{first} as known at {at}: envelope asKnownAt is {}",
                    body["asKnownAt"]
                ));
            }
        }
        Ok(differences)
    }

    /// GET on the API at `base`, parsed and checked against the OpenAPI
    /// document.
    pub async fn get_from(
        &self,
        base: &str,
        path_and_query: &str,
        key: &str,
    ) -> Result<(u16, serde_json::Value)> {
        let response = self
            .http()
            .get(format!("{base}{path_and_query}"))
            .header("x-api-key", key)
            .send()
            .await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        let body = serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))?;
        self.conforms(path_and_query, status, &body);
        Ok((status, body))
    }

    /// Each partition's fold as the active generation records it (next
    /// offset, last known-at time, settled time), for messages about
    /// finality.
    pub async fn fold_positions(&self) -> Result<String> {
        let schema = self.active_generation().await?;
        let pool = sqlx::PgPool::connect(&format!("{}/{}", self.postgres, self.database)).await?;
        let rows: Vec<(i32, i64, Option<String>, Option<String>)> = sqlx::query_as(&format!(
            "SELECT partition, next_offset, known_at::text, settled_at::text
             FROM {schema}.consumer_offsets ORDER BY partition"
        ))
        .fetch_all(&pool)
        .await?;
        pool.close().await;
        Ok(rows
            .iter()
            .map(|(partition, next, known, settled)| {
                format!("partition {partition}: next offset {next}, known at {known:?}, settled {settled:?}")
            })
            .collect::<Vec<_>>()
            .join("; "))
    }

    /// Where each event is on the stack's topic, by event id: read from
    /// the start of every partition.
    pub fn log_positions(&self) -> Result<BTreeMap<String, LogPosition>> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        use rdkafka::message::Message;
        use rdkafka::{ClientConfig, Offset, TopicPartitionList};

        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.kafka_brokers())
            .set("group.id", format!("known-at-{}", uuid::Uuid::now_v7()))
            .set("enable.auto.commit", "false")
            .create()?;
        let timeout = Duration::from_secs(5);
        let metadata = consumer.fetch_metadata(Some(&self.topic), timeout)?;
        let mut assignment = TopicPartitionList::new();
        let mut total = 0;
        for partition in metadata.topics()[0].partitions() {
            let (low, high) = consumer.fetch_watermarks(&self.topic, partition.id(), timeout)?;
            total += high - low;
            assignment.add_partition_offset(&self.topic, partition.id(), Offset::Beginning)?;
        }
        consumer.assign(&assignment)?;
        let mut positions = BTreeMap::new();
        let mut read = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while read < total && Instant::now() < deadline {
            let Some(message) = consumer.poll(Duration::from_millis(200)) else {
                continue;
            };
            let message = message?;
            read += 1;
            let Some(payload) = message.payload() else {
                continue;
            };
            let envelope: serde_json::Value = serde_json::from_slice(payload)?;
            if let Some(event) = envelope["eventId"].as_str() {
                positions.insert(
                    event.to_owned(),
                    LogPosition {
                        partition: message.partition(),
                        offset: message.offset(),
                        timestamp_ms: message.timestamp().to_millis(),
                    },
                );
            }
        }
        if read < total {
            bail!("read {read} of the topic's {total} messages");
        }
        Ok(positions)
    }
}

/// Where an event is on the log, and the time the broker gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPosition {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
}

/// JSON parsed only into its structure: scalars (numbers, strings,
/// literals) keep their text, objects their fields' order.
pub mod raw {
    use anyhow::{bail, Result};

    /// A field of an object: its key (unquoted; keys the API writes have
    /// no escapes) and its value.
    pub type Field = (String, Json);

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Json {
        /// Fields in their order.
        Object(Vec<Field>),
        Array(Vec<Json>),
        /// A number, string or literal, exactly as written.
        Scalar(String),
    }

    /// Parses one JSON value (and nothing after it but whitespace).
    pub fn parse(text: &str) -> Result<Json> {
        let mut parser = Parser {
            bytes: text.as_bytes(),
            at: 0,
        };
        let value = parser.value()?;
        parser.whitespace();
        if parser.at != parser.bytes.len() {
            bail!("text after the value at byte {}", parser.at);
        }
        Ok(value)
    }

    struct Parser<'a> {
        bytes: &'a [u8],
        at: usize,
    }

    impl Parser<'_> {
        fn whitespace(&mut self) {
            while self.at < self.bytes.len() && self.bytes[self.at].is_ascii_whitespace() {
                self.at += 1;
            }
        }

        fn peek(&mut self) -> Option<u8> {
            self.whitespace();
            self.bytes.get(self.at).copied()
        }

        fn expect(&mut self, byte: u8) -> Result<()> {
            if self.peek() != Some(byte) {
                bail!("expected {:?} at byte {}", byte as char, self.at);
            }
            self.at += 1;
            Ok(())
        }

        fn text(&self, from: usize) -> String {
            String::from_utf8_lossy(&self.bytes[from..self.at]).into_owned()
        }

        fn string(&mut self) -> Result<String> {
            let start = self.at;
            self.expect(b'"')?;
            while let Some(&byte) = self.bytes.get(self.at) {
                self.at += 1;
                match byte {
                    b'\\' => self.at += 1,
                    b'"' => return Ok(self.text(start)),
                    _ => {}
                }
            }
            bail!("unterminated string from byte {start}")
        }

        fn value(&mut self) -> Result<Json> {
            match self.peek() {
                Some(b'{') => {
                    self.at += 1;
                    let mut fields = Vec::new();
                    if self.peek() == Some(b'}') {
                        self.at += 1;
                        return Ok(Json::Object(fields));
                    }
                    loop {
                        self.whitespace();
                        let key = self.string()?;
                        self.expect(b':')?;
                        let value = self.value()?;
                        fields.push((key.trim_matches('"').to_owned(), value));
                        match self.peek() {
                            Some(b',') => self.at += 1,
                            Some(b'}') => {
                                self.at += 1;
                                return Ok(Json::Object(fields));
                            }
                            _ => bail!("expected , or }} at byte {}", self.at),
                        }
                    }
                }
                Some(b'[') => {
                    self.at += 1;
                    let mut items = Vec::new();
                    if self.peek() == Some(b']') {
                        self.at += 1;
                        return Ok(Json::Array(items));
                    }
                    loop {
                        items.push(self.value()?);
                        match self.peek() {
                            Some(b',') => self.at += 1,
                            Some(b']') => {
                                self.at += 1;
                                return Ok(Json::Array(items));
                            }
                            _ => bail!("expected , or ] at byte {}", self.at),
                        }
                    }
                }
                Some(b'"') => Ok(Json::Scalar(self.string()?)),
                Some(_) => {
                    let start = self.at;
                    while let Some(&byte) = self.bytes.get(self.at) {
                        if matches!(byte, b',' | b'}' | b']') || byte.is_ascii_whitespace() {
                            break;
                        }
                        self.at += 1;
                    }
                    if start == self.at {
                        bail!("expected a value at byte {start}");
                    }
                    Ok(Json::Scalar(self.text(start)))
                }
                None => bail!("expected a value at the end"),
            }
        }
    }

    impl Json {
        /// Removes `key` from the top-level object.
        pub fn remove_top(&mut self, key: &str) {
            if let Json::Object(fields) = self {
                fields.retain(|(k, _)| k != key);
            }
        }

        /// Removes, at every level, the fields `volatile` says of (given
        /// the object they are in and their key).
        pub fn strip(&mut self, volatile: &dyn Fn(&[Field], &str) -> bool) {
            match self {
                Json::Object(fields) => {
                    let doomed: Vec<bool> = fields
                        .iter()
                        .map(|(key, _)| volatile(fields, key))
                        .collect();
                    let mut doomed = doomed.into_iter();
                    fields.retain(|_| !doomed.next().unwrap_or(false));
                    fields.iter_mut().for_each(|(_, v)| v.strip(volatile));
                }
                Json::Array(items) => items.iter_mut().for_each(|v| v.strip(volatile)),
                Json::Scalar(_) => {}
            }
        }
    }

    impl std::fmt::Display for Json {
        /// Compact JSON: no whitespace between tokens.
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                Json::Object(fields) => {
                    f.write_str("{")?;
                    for (i, (key, value)) in fields.iter().enumerate() {
                        if i > 0 {
                            f.write_str(",")?;
                        }
                        write!(f, "\"{key}\":{value}")?;
                    }
                    f.write_str("}")
                }
                Json::Array(items) => {
                    f.write_str("[")?;
                    for (i, value) in items.iter().enumerate() {
                        if i > 0 {
                            f.write_str(",")?;
                        }
                        write!(f, "{value}")?;
                    }
                    f.write_str("]")
                }
                Json::Scalar(text) => f.write_str(text),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volatile_fields_go_and_the_digits_and_order_stay() {
        let body = r#"{"message":"success","status":200,"asKnownAt":"2026-11-29T00:00:00.000Z",
            "data":{"cashBuying":{"price":155.10,"updatedAt":"u","timestamp":"render",
            "rates":[{"value":155.10,"timestamp":"board"}]},
            "results":[{"amount":15510.00,"ageSeconds":4,"stale":false}]}}"#;
        assert_eq!(
            without_volatile(body),
            r#"{"message":"success","status":200,"data":{"cashBuying":{"price":155.10,"updatedAt":"u","rates":[{"value":155.10,"timestamp":"board"}]},"results":[{"amount":15510.00,"stale":false}]}}"#
        );
    }

    #[test]
    fn a_series_point_keeps_its_timestamp_and_escapes_survive() {
        let body = r#"{"points":[{"timestamp":"t","updatedAt":"u"}],"name":"a \"b\" ,}"}"#;
        assert_eq!(without_volatile(body), body);
    }

    #[test]
    fn what_is_not_json_is_kept_whole() {
        assert_eq!(without_volatile("timestamp,value\n"), "timestamp,value\n");
    }
}
