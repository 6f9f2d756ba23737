//! The checks that read the public API: the raw series, each board by its
//! event id, /history, /rates, best rates and /banks.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use futures_util::StreamExt;
use serde_json::Value;

use super::{stamp, Violations, FOLD, HISTORY, ONCE};
use crate::nemesis::publish::{Bank, Board, Quote};

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
