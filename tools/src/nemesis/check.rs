//! The checker: once the faults are healed and the system has settled, it
//! holds what users and operators can see (the public API, the topic, the
//! receivers) against what the publishers were told: every board answered
//! 202 is there once, in order, and the views equal the checker's own fold
//! of those boards.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use futures_util::StreamExt;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::Value;

use ratewire_proto::envelope::{decode, Decoded};
use ratewire_proto::event::Event;

use super::publish::{Bank, Board, Push, Quote};
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

/// Hundredths of a JSON number.
fn cents(v: &Value) -> Option<i64> {
    v.as_f64().map(|x| (x * 100.0).round() as i64)
}

fn quote_of(rate: &Value) -> Option<Quote> {
    Some(Quote {
        cash_buying: cents(&rate["cashBuying"])?,
        cash_selling: cents(&rate["cashSelling"])?,
        transactional_buying: cents(&rate["transactionalBuying"])?,
        transactional_selling: cents(&rate["transactionalSelling"])?,
    })
}

/// The API as the checker reads it: its own key, with patience for a
/// system that has just settled.
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
    pub key: String,
}

impl Api {
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, Value)> {
        let mut last = None;
        for _ in 0..5 {
            match self
                .http
                .get(format!("{}{path}", self.base))
                .header("x-api-key", &self.key)
                .query(&[("transactional", "true")])
                .timeout(Duration::from_secs(20))
                .send()
                .await
            {
                Ok(r) if r.status().is_server_error() => last = Some(format!("{}", r.status())),
                Ok(r) => {
                    let status = r.status().as_u16();
                    return Ok((status, r.json().await.unwrap_or(Value::Null)));
                }
                Err(e) => last = Some(e.to_string()),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        anyhow::bail!("GET {path}: {}", last.unwrap_or_default())
    }

    /// The bank's board on /rates?bankId: its as-of and quotes.
    pub async fn rates(
        &self,
        bank: i64,
    ) -> anyhow::Result<(Option<String>, BTreeMap<String, Quote>)> {
        let (status, body) = self.get(&format!("/api/v1/rates?bankId={bank}")).await?;
        anyhow::ensure!(status == 200, "/rates?bankId={bank}: {status} {body}");
        let entry = &body["data"][0]["data"][0];
        let mut quotes = BTreeMap::new();
        for rate in entry["exchangeRates"].as_array().into_iter().flatten() {
            if let (Some(c), Some(q)) = (rate["currency"]["id"].as_str(), quote_of(rate)) {
                quotes.insert(c.to_owned(), q);
            }
        }
        Ok((
            entry["lastRatesUpdatedAt"].as_str().map(str::to_owned),
            quotes,
        ))
    }
}

/// Waits until every bank's last accepted board is on /rates?bankId.
pub async fn settle(
    api: &Api,
    boards: &BTreeMap<i64, Vec<(Board, String)>>,
    limit: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        let mut all = true;
        for (bank, list) in boards {
            let Some((last, _)) = list.last() else {
                continue;
            };
            match api.rates(*bank).await {
                Ok((Some(at), _)) if at == stamp(last.as_of) => {}
                _ => {
                    all = false;
                    break;
                }
            }
        }
        if all {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Each accepted board once in the bank's raw series and under its event id.
pub async fn check_boards(
    api: &Api,
    boards: &BTreeMap<i64, Vec<(Board, String)>>,
    violations: &mut Violations,
) -> anyhow::Result<()> {
    for (bank, list) in boards {
        let (Some((first, _)), Some((last, _))) = (list.first(), list.last()) else {
            continue;
        };
        let mut path = Some(format!(
            "/api/v1/rates/series?bankId={bank}&currencyCode=USD&interval=raw&from={}&to={}",
            stamp(first.as_of),
            stamp(last.as_of + chrono::Duration::milliseconds(1))
        ));
        let mut seen: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        while let Some(p) = path.take() {
            let (status, body) = api.get(&p).await?;
            anyhow::ensure!(status == 200, "{p}: {status} {body}");
            for point in body["data"]["points"].as_array().into_iter().flatten() {
                let at = point["timestamp"].as_str().unwrap_or_default().to_owned();
                seen.entry(at)
                    .or_default()
                    .push(cents(&point["cashBuying"]).unwrap_or(-1));
            }
            path = body["data"]["next"].as_str().map(str::to_owned);
        }
        let sent: HashMap<String, &Board> = list.iter().map(|(b, _)| (stamp(b.as_of), b)).collect();
        for (board, _) in list {
            let at = stamp(board.as_of);
            let want = board.quote("USD").map(|q| q.cash_buying);
            match seen.get(&at) {
                None => violations.add(ONCE, format!("bank {bank}: the board of {at} is not in the raw series")),
                Some(values) if values.len() > 1 => {
                    violations.add(ONCE, format!("bank {bank}: the board of {at} is {} times in the raw series", values.len()))
                }
                Some(values) if Some(values[0]) != want => violations.add(
                    ONCE,
                    format!("bank {bank}: the raw series has {} for the board of {at}, published {want:?}", values[0]),
                ),
                Some(_) => {}
            }
        }
        for at in seen.keys().filter(|at| !sent.contains_key(*at)) {
            violations.add(
                ONCE,
                format!("bank {bank}: the raw series has a board of {at} no publisher sent"),
            );
        }
    }
    // Every board under its event id, as published.
    let all: Vec<(&Board, &String)> = boards.values().flatten().map(|(b, id)| (b, id)).collect();
    let answers =
        futures_util::stream::iter(all)
            .map(|(board, id)| async move {
                (board, id, api.get(&format!("/api/v1/boards/{id}")).await)
            })
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
    for (board, id, answer) in answers {
        let (status, body) = answer?;
        if status != 200 {
            violations.add(
                ONCE,
                format!(
                    "/boards/{id} (bank {}, {}): {status}",
                    board.bank,
                    stamp(board.as_of)
                ),
            );
            continue;
        }
        let data = &body["data"];
        let quotes: BTreeMap<String, Quote> = data["rates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| Some((r["currency"]["id"].as_str()?.to_owned(), quote_of(r)?)))
            .collect();
        let want: BTreeMap<String, Quote> = board
            .quotes
            .iter()
            .map(|(c, q)| (c.to_string(), *q))
            .collect();
        if data["asOf"].as_str() != Some(&stamp(board.as_of))
            || data["bankId"].as_i64() != Some(board.bank)
            || quotes != want
        {
            violations.add(
                ONCE,
                format!("/boards/{id} differs from the board published: {data}"),
            );
        }
    }
    Ok(())
}

/// /history for each day: the day's last accepted board.
pub async fn check_history(
    api: &Api,
    boards: &BTreeMap<i64, Vec<(Board, String)>>,
    violations: &mut Violations,
) -> anyhow::Result<()> {
    for (bank, list) in boards {
        let mut last_of_day: BTreeMap<NaiveDate, &Board> = BTreeMap::new();
        for (board, _) in list {
            last_of_day.insert(board.as_of.date_naive(), board);
        }
        for (day, board) in last_of_day {
            let (status, body) = api
                .get(&format!(
                    "/api/v1/history?bankId={bank}&date={day}&currencyCode=EUR"
                ))
                .await?;
            let shown = (
                body["data"]["timestamp"].as_str().map(str::to_owned),
                quote_of(&body["data"]),
            );
            let want = (Some(stamp(board.as_of)), board.quote("EUR"));
            if status != 200 || shown != want {
                violations.add(HISTORY, format!("bank {bank} on {day}: /history shows {shown:?} ({status}), the last board was {want:?}"));
            }
        }
    }
    Ok(())
}

/// /rates, best-rates and /banks against the checker's fold: each bank's
/// last accepted board, and the best of them.
pub async fn check_views(
    api: &Api,
    banks: &[Bank],
    boards: &BTreeMap<i64, Vec<(Board, String)>>,
    violations: &mut Violations,
) -> anyhow::Result<()> {
    let mut latest: BTreeMap<i64, &Board> = BTreeMap::new();
    for (bank, list) in boards {
        if let Some((board, _)) = list.last() {
            latest.insert(*bank, board);
        }
    }
    for (bank, board) in &latest {
        let (at, quotes) = api.rates(*bank).await?;
        let want: BTreeMap<String, Quote> = board
            .quotes
            .iter()
            .map(|(c, q)| (c.to_string(), *q))
            .collect();
        if at.as_deref() != Some(&stamp(board.as_of)) || quotes != want {
            violations.add(
                FOLD,
                format!(
                    "/rates?bankId={bank} shows {at:?} {quotes:?}, the last board was {} {want:?}",
                    stamp(board.as_of)
                ),
            );
        }
    }
    let (status, listed) = api.get("/api/v1/banks").await?;
    anyhow::ensure!(status == 200, "/banks: {status}");
    let listed: HashMap<i64, &Value> = listed["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| Some((b["id"].as_str()?.parse().ok()?, b)))
        .collect();
    for bank in banks {
        match listed.get(&bank.id) {
            Some(b)
                if b["code"].as_str() == Some(&bank.code)
                    && b["name"].as_str() == Some(&bank.name)
                    && b["lastRatesUpdatedAt"].as_str()
                        == latest.get(&bank.id).map(|l| stamp(l.as_of)).as_deref() => {}
            other => violations.add(FOLD, format!("/banks shows bank {} as {other:?}", bank.id)),
        }
    }
    // The best rates are the checker's only when its banks are the only
    // ones active (a stack of its own, as the suite and the runs use).
    if listed.len() == banks.len() {
        let (status, best) = api.get("/api/v1/rates/best-rates?currencyCode=USD").await?;
        anyhow::ensure!(status == 200, "best-rates: {status}");
        for (field, highest) in [("cashBuying", true), ("cashSelling", false)] {
            let values: Vec<(i64, i64)> = latest
                .iter()
                .filter_map(|(bank, b)| Some((*bank, b.quote("USD")?.field(field)?)))
                .collect();
            let Some(want) = (if highest {
                values.iter().map(|v| v.1).max()
            } else {
                values.iter().map(|v| v.1).min()
            }) else {
                continue;
            };
            let holders: Vec<i64> = values.iter().filter(|v| v.1 == want).map(|v| v.0).collect();
            let shown = (
                cents(&best["data"][field]["price"]),
                best["data"][field]["bank"]["id"].as_i64(),
            );
            let bank_ok = holders.len() > 1 || shown.1 == holders.first().copied();
            if shown.0 != Some(want) || !bank_ok {
                violations.add(
                    FOLD,
                    format!(
                        "best USD {field}: shown {shown:?}, the fold says {want} at {holders:?}"
                    ),
                );
            }
        }
    }
    Ok(())
}

/// The topic holds each accepted board's event, in the order accepted
/// (a retry of one push may write its event twice, with its one id, which
/// the fold applies once), and no board event of these banks that was
/// never accepted.
pub async fn check_log(
    bootstrap: &str,
    topic: &str,
    boards: &BTreeMap<i64, Vec<(Board, String)>>,
    violations: &mut Violations,
) -> anyhow::Result<()> {
    let (bootstrap, topic_name) = (bootstrap.to_owned(), topic.to_owned());
    let logged: BTreeMap<i64, Vec<String>> =
        tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", "ratewire-nemesis-checker")
                .set("enable.auto.commit", "false")
                .set("log_level", "3")
                .create()?;
            let metadata = consumer.fetch_metadata(Some(&topic_name), Duration::from_secs(20))?;
            let partitions: Vec<i32> = metadata.topics()[0]
                .partitions()
                .iter()
                .map(|p| p.id())
                .collect();
            let mut assignment = TopicPartitionList::new();
            let mut ends = HashMap::new();
            for p in &partitions {
                let (_, high) =
                    consumer.fetch_watermarks(&topic_name, *p, Duration::from_secs(20))?;
                ends.insert(*p, high);
                assignment.add_partition_offset(&topic_name, *p, Offset::Beginning)?;
            }
            consumer.assign(&assignment)?;
            let mut logged: BTreeMap<i64, Vec<String>> = BTreeMap::new();
            let mut done: BTreeSet<i32> = ends
                .iter()
                .filter(|(_, end)| **end == 0)
                .map(|(p, _)| *p)
                .collect();
            let deadline = Instant::now() + Duration::from_secs(120);
            while done.len() < partitions.len() {
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "reading the topic took over 2 minutes"
                );
                let Some(message) = consumer.poll(Duration::from_secs(1)) else {
                    continue;
                };
                let message = message?;
                if message.offset() + 1 >= ends[&message.partition()] {
                    done.insert(message.partition());
                }
                if let Some(Ok(Decoded::Event(envelope))) = message.payload().map(decode) {
                    if let Event::BoardPublished(_) = envelope.event {
                        logged
                            .entry(envelope.bank_id.get())
                            .or_default()
                            .push(envelope.event_id.to_string());
                    }
                }
            }
            Ok(logged)
        })
        .await??;
    for (bank, list) in boards {
        let mut on_log = logged.get(bank).cloned().unwrap_or_default();
        on_log.dedup();
        let sent: Vec<String> = list.iter().map(|(_, id)| id.clone()).collect();
        if on_log != sent {
            let missing = sent.iter().filter(|id| !on_log.contains(id)).count();
            let unknown = on_log.iter().filter(|id| !sent.contains(id)).count();
            violations.add(
                DURABLE,
                format!("bank {bank}: {} accepted, {} on the log ({missing} accepted and missing, {unknown} never accepted, or out of order)", sent.len(), on_log.len()),
            );
        }
    }
    Ok(())
}

/// The crossings the accepted boards imply, each delivered under exactly
/// one message id, and nothing else delivered.
pub fn check_alerts(
    alerts: &[Alert],
    boards: &BTreeMap<i64, Vec<(Board, String)>>,
    deliveries: &[Delivery],
    violations: &mut Violations,
) -> usize {
    let mut expected: BTreeSet<(String, String)> = BTreeSet::new();
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
    let mut messages: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
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
    for crossing in &expected {
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
    expected.len()
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
