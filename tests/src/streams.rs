//! Load a test puts on a stack: boards streamed by many banks at once
//! (as fast as ingest takes them, or at a steady pace) and the National
//! Bank's reference days, each pushed again until accepted as a careful
//! publisher would.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::{Board, Stack, ADMIN_TOKEN};

impl Stack {
    /// Publishes `boards` boards for each of `banks` (id, token), banks in
    /// parallel, each board quoting `currencies` currencies at its own past
    /// as-of. A push answered 503 or not at all is retried with its
    /// Idempotency-Key until accepted, as a careful publisher would. The
    /// task yields the number of boards accepted.
    pub fn spawn_stream(
        &self,
        banks: Vec<(i64, String)>,
        boards: usize,
        currencies: usize,
    ) -> tokio::task::JoinHandle<Result<usize>> {
        let http = self.http.clone();
        let ingest = self.ingest_url.clone();
        tokio::spawn(async move {
            let base = chrono::Utc::now() - chrono::Duration::days(2);
            let pushes = banks.into_iter().map(|(bank, token)| {
                let (http, ingest) = (http.clone(), ingest.clone());
                async move {
                    for i in 0..boards {
                        let body = stream_board(base, bank, i, currencies);
                        push_until_accepted(&http, &ingest, bank, &token, &format!("s-{i}"), body)
                            .await?;
                    }
                    anyhow::Ok(boards)
                }
            });
            let done = futures_util::future::try_join_all(pushes).await?;
            Ok(done.into_iter().sum())
        })
    }

    /// Imports `days` weekdays of the National Bank's reference rates (from
    /// 2026-01-05), each third one corrected after it, through ingest's
    /// operator endpoint, retried while it answers 503 or not at all. The
    /// task yields the number of events published (days and corrections).
    pub fn spawn_reference_days(&self, days: usize) -> tokio::task::JoinHandle<Result<usize>> {
        let http = self.http.clone();
        let url = format!("{}/v1/admin/reference-rates", self.ingest_operator_url);
        tokio::spawn(async move {
            let mut published = 0;
            let mut date = chrono::NaiveDate::from_ymd_opt(2026, 1, 5).context("a date")?;
            for i in 0..days {
                let mut bodies = vec![reference_day(date, 150.0 + i as f64 / 10.0)];
                if i % 3 == 0 {
                    bodies.push(reference_day(date, 151.0 + i as f64 / 10.0));
                }
                for body in bodies {
                    loop {
                        let sent = http
                            .post(&url)
                            .bearer_auth(ADMIN_TOKEN)
                            .header("content-type", "application/json")
                            .body(body.clone())
                            .send()
                            .await;
                        // 200: taken by an earlier try whose answer was lost.
                        match sent.map(|r| r.status().as_u16()) {
                            Ok(200 | 202) => break,
                            Ok(status) if status < 500 => {
                                bail!("a reference day answered {status}")
                            }
                            _ => tokio::time::sleep(Duration::from_millis(200)).await,
                        }
                    }
                    published += 1;
                }
                date = next_weekday(date);
            }
            Ok(published)
        })
    }

    /// Publishes boards for `banks` in turn at a steady `per_second` (the
    /// pushes run concurrently, so a slow answer does not slow the pace)
    /// until `stop` is cancelled; the task yields the number accepted.
    /// Each bank keeps at most two seconds of its pushes waiting: on a
    /// machine where ingest takes fewer, the pace falls to what it takes
    /// instead of a backlog growing behind it. Pushes are retried as
    /// [`Stack::spawn_stream`] does.
    pub fn spawn_paced_stream(
        &self,
        banks: Vec<(i64, String)>,
        per_second: u32,
        currencies: usize,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<Result<usize>> {
        let http = self.http.clone();
        let ingest = self.ingest_url.clone();
        tokio::spawn(async move {
            let base = chrono::Utc::now() - chrono::Duration::days(2);
            let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let waiting = (2 * per_second as usize / banks.len().max(1)).max(4);
            // A bank's boards go one at a time, in order: each bank has its
            // own queue of pushes.
            let (queues, workers): (Vec<_>, Vec<_>) = banks
                .into_iter()
                .map(|(bank, token)| {
                    let (tx, mut rx) = tokio::sync::mpsc::channel::<usize>(waiting);
                    let (http, ingest) = (http.clone(), ingest.clone());
                    let worker = tokio::spawn(async move {
                        let mut accepted = 0usize;
                        while let Some(i) = rx.recv().await {
                            let body = stream_board(base, bank, i, currencies);
                            push_until_accepted(
                                &http,
                                &ingest,
                                bank,
                                &token,
                                &format!("p-{i}"),
                                body,
                            )
                            .await?;
                            accepted += 1;
                        }
                        anyhow::Ok(accepted)
                    });
                    (tx, worker)
                })
                .unzip();
            let mut sent = 0usize;
            while !stop.is_cancelled() {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let queue = &queues[sent % queues.len()];
                queue
                    .send(sent / queues.len())
                    .await
                    .context("a bank's pusher stopped")?;
                sent += 1;
            }
            drop(queues);
            let mut accepted = 0;
            for worker in workers {
                accepted += worker.await??;
            }
            Ok(accepted)
        })
    }
}

/// Currencies the stream quotes, in order.
const STREAM_CURRENCIES: [&str; 10] = [
    "USD", "EUR", "GBP", "SAR", "AED", "CNY", "CHF", "JPY", "CAD", "KES",
];

/// The stream's `i`th board of `bank`: as of `i` seconds after `base`,
/// quoting the first `currencies` of the stream's currencies.
fn stream_board(
    base: chrono::DateTime<chrono::Utc>,
    bank: i64,
    i: usize,
    currencies: usize,
) -> String {
    let as_of = (base + chrono::Duration::seconds(i as i64))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    STREAM_CURRENCIES
        .iter()
        .take(currencies)
        .enumerate()
        .fold(Board::at(as_of), |board, (c, code)| {
            let buying = 100 + (bank as usize * 7 + i * 3 + c) % 50;
            board.rate(code, format!("{buying}.25"), format!("{}.75", buying + 2))
        })
        .body()
}

/// Pushes a board until ingest accepts it (retrying 503s and lost
/// connections with the same Idempotency-Key, for up to two minutes).
async fn push_until_accepted(
    http: &reqwest::Client,
    ingest: &str,
    bank: i64,
    token: &str,
    key: &str,
    body: String,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let answer = http
            .post(format!("{ingest}/v1/banks/{bank}/boards"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(body.clone())
            .send()
            .await;
        match answer {
            Ok(response) if response.status() == 202 => return Ok(()),
            Ok(response) if response.status() != 503 => {
                let status = response.status();
                bail!(
                    "push refused: {status} {}",
                    response.text().await.unwrap_or_default()
                );
            }
            _ if Instant::now() > deadline => bail!("push not accepted within two minutes"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// A day of the National Bank's reference rates as it publishes them.
pub fn reference_day(date: chrono::NaiveDate, usd: f64) -> String {
    format!(
        r#"{{"success":true,"message":"OK","status":200,"data":[{{"id":"a","currency_id":"u","buying":"{usd:.4}","selling":"{:.4}","date":"{date}","weighted_average":"{usd:.4}","currency":{{"id":"u","name":"US DOLLAR","code":"USD"}}}},{{"id":"b","currency_id":"e","buying":"170.1000","selling":"171.8010","date":"{date}","weighted_average":"170.9500","currency":{{"id":"e","name":"EURO","code":"EUR"}}}}]}}"#,
        usd * 1.01
    )
}

fn next_weekday(date: chrono::NaiveDate) -> chrono::NaiveDate {
    use chrono::Datelike;
    let mut next = date.succ_opt().expect("a next day");
    while matches!(next.weekday(), chrono::Weekday::Sat | chrono::Weekday::Sun) {
        next = next.succ_opt().expect("a next day");
    }
    next
}
