//! What tests do with a running stack, typed: register banks and take
//! tokens, push boards, create keys, call the API (each response checked
//! against the served OpenAPI document), read the database, wait for what
//! was published to be applied and served.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::stack::flush_prefix;
use crate::support::eventually;
use crate::{made_up_key, Stack, ADMIN_TOKEN, VISIBLE_WITHIN};

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
    /// Pushes are retried as [`Stack::spawn_stream`] does.
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
            // A bank's boards go one at a time, in order: each bank has its
            // own queue of pushes.
            let (queues, workers): (Vec<_>, Vec<_>) = banks
                .into_iter()
                .map(|(bank, token)| {
                    let (tx, mut rx) = tokio::sync::mpsc::channel::<usize>(10_000);
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

    /// Waits until the active generation has applied `expected` events.
    pub async fn wait_applied(&self, expected: i64, timeout: Duration) -> Result<()> {
        let schema = self.active_generation().await?;
        let query = format!("SELECT count(*) FROM {schema}.applied_events");
        self.wait_count("every event applied", &query, expected, timeout)
            .await
    }

    /// Waits until `query` (a count) yields `expected`; the error names the
    /// last count seen.
    pub async fn wait_count(
        &self,
        what: &str,
        query: &str,
        expected: i64,
        timeout: Duration,
    ) -> Result<()> {
        let waited = eventually(what, timeout, || async {
            let count = self.sql_number(query).await.ok()??;
            (count == expected).then_some(())
        })
        .await;
        if waited.is_err() {
            let seen = self.sql_number(query).await?;
            bail!("{what}: expected {expected}, saw {seen:?}");
        }
        Ok(())
    }

    /// Waits until `/api/v1/rates?bankId={bank}` answers 200 with a body
    /// containing `needle`.
    pub async fn wait_served(&self, what: &str, bank: i64, key: &str, needle: &str) -> Result<()> {
        let path = format!("/api/v1/rates?bankId={bank}");
        eventually(what, VISIBLE_WITHIN, || async {
            let (status, raw) = self.get_raw(&path, Some(key)).await.ok()?;
            (status == 200 && raw.contains(needle)).then_some(())
        })
        .await
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// GET `url` (any process's endpoint) as JSON; `None` while it does not
    /// answer with JSON, for polling.
    pub async fn json_at(&self, url: &str) -> Option<Value> {
        self.http.get(url).send().await.ok()?.json().await.ok()
    }

    /// GET `url` as text; `None` while it does not answer, for polling.
    pub async fn text_at(&self, url: &str) -> Option<String> {
        self.http.get(url).send().await.ok()?.text().await.ok()
    }

    /// Registers a bank through the operator endpoint; returns its id.
    pub async fn register_bank(&self, code: &str, name: &str) -> Result<i64> {
        let response = self
            .http
            .post(format!("{}/v1/admin/banks", self.ingest_operator_url))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({
                "code": code,
                "name": name,
                "imageUrl": format!("https://img.test/{code}.png"),
                "socialLinks": [{"platform": "telegram", "url": format!("https://t.me/{code}")}],
            }))
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if status != 201 {
            bail!("registering {code}: {status} {body}");
        }
        body["id"].as_i64().context("no id")
    }

    /// Changes a bank through the operator endpoint (`{"active": false}`
    /// deactivates it).
    pub async fn update_bank(&self, bank_id: i64, patch: Value) -> Result<Value> {
        let response = self
            .http
            .patch(format!(
                "{}/v1/admin/banks/{bank_id}",
                self.ingest_operator_url
            ))
            .bearer_auth(ADMIN_TOKEN)
            .json(&patch)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if status != 200 {
            bail!("updating bank {bank_id}: {status} {body}");
        }
        Ok(body)
    }

    /// Registers a bank and takes a publisher token for it.
    pub async fn bank_with_token(&self, code: &str, name: &str) -> Result<(i64, String)> {
        let id = self.register_bank(code, name).await?;
        Ok((id, self.publisher_token(id).await?))
    }

    pub async fn publisher_token(&self, bank_id: i64) -> Result<String> {
        let body: Value = self
            .http
            .post(format!(
                "{}/v1/admin/banks/{bank_id}/tokens",
                self.ingest_operator_url
            ))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(body["token"].as_str().context("no token")?.to_owned())
    }

    /// Pushes a board body (JSON text, so numbers keep their digits).
    pub async fn publish_board(
        &self,
        bank_id: i64,
        token: &str,
        board: &str,
    ) -> Result<(u16, Value)> {
        let response = self
            .http
            .post(format!("{}/v1/banks/{bank_id}/boards", self.ingest_url))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(board.to_owned())
            .send()
            .await?;
        Ok((response.status().as_u16(), response.json().await?))
    }

    /// A key on the enterprise plan, so that polling never hits a limit.
    pub async fn api_key(&self, name: &str) -> Result<String> {
        self.api_key_on(name, "enterprise").await
    }

    pub async fn api_key_on(&self, name: &str, plan: &str) -> Result<String> {
        let body: Value = self
            .http
            .post(format!("{}/v1/admin/keys", self.api_operator_url))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"name": name, "plan": plan}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(body["key"].as_str().context("no key")?.to_owned())
    }

    /// Revokes the key named by `prefix` on the API's operator listener;
    /// returns the status.
    pub async fn revoke_key(&self, prefix: &str) -> Result<u16> {
        let answer = self
            .http
            .delete(format!("{}/v1/admin/keys/{prefix}", self.api_operator_url))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await?;
        Ok(answer.status().as_u16())
    }

    /// `count` requests to `/api/v1/currencies`, each with a made-up key,
    /// `concurrency` at a time, all from this machine's address; their
    /// statuses (0 for no answer).
    pub async fn made_up_key_flood(&self, count: usize, concurrency: usize) -> Vec<u16> {
        use futures_util::stream::{self, StreamExt};
        let url = format!("{}/api/v1/currencies", self.api_url);
        stream::iter(0..count)
            .map(|_| {
                let request = self.http.get(&url).header("x-api-key", made_up_key());
                async move {
                    request
                        .send()
                        .await
                        .map(|r| r.status().as_u16())
                        .unwrap_or(0)
                }
            })
            .buffer_unordered(concurrency)
            .collect()
            .await
    }

    /// The API's `/metrics` text (its operator listener).
    pub async fn api_metrics(&self) -> Result<String> {
        Ok(self
            .http
            .get(format!("{}/metrics", self.api_operator_url))
            .send()
            .await?
            .text()
            .await?)
    }

    /// GET on the API; returns the status and the body as raw text.
    pub async fn get_raw(&self, path_and_query: &str, key: Option<&str>) -> Result<(u16, String)> {
        let mut request = self.http.get(format!("{}{path_and_query}", self.api_url));
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        let response = request.send().await?;
        Ok((response.status().as_u16(), response.text().await?))
    }

    /// GET on the API, parsed, and checked against the served OpenAPI
    /// document. A response the document does not describe panics, so the
    /// test fails at once even inside a polling loop.
    pub async fn get(&self, path_and_query: &str, key: Option<&str>) -> Result<(u16, Value)> {
        let (status, text) = self.get_raw(path_and_query, key).await?;
        let body = serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))?;
        self.conforms(path_and_query, status, &body);
        Ok((status, body))
    }

    /// Panics when a response of `GET path_and_query` does not match the
    /// served OpenAPI document.
    pub fn conforms(&self, path_and_query: &str, status: u16, body: &Value) {
        self.conforms_as("get", path_and_query, status, body)
    }

    /// [`Stack::conforms`] for a request of any method.
    pub fn conforms_as(&self, method: &str, path_and_query: &str, status: u16, body: &Value) {
        if let Some(contract) = &self.contract {
            let path = path_and_query.split('?').next().unwrap_or_default();
            if let Err(violation) = contract.check_method(method, path, status, body) {
                panic!("{violation:#}");
            }
        }
    }

    /// Runs one SQL statement in this stack's database (to break things on
    /// purpose).
    pub async fn sql(&self, statement: &str) -> Result<()> {
        let pool = sqlx::PgPool::connect(&format!("{}/{}", self.postgres, self.database)).await?;
        sqlx::query(statement).execute(&pool).await?;
        pool.close().await;
        Ok(())
    }

    /// The first column of the first row of `query` as a number, if any.
    pub async fn sql_number(&self, query: &str) -> Result<Option<i64>> {
        let pool = sqlx::PgPool::connect(&format!("{}/{}", self.postgres, self.database)).await?;
        let value: Option<i64> = sqlx::query_scalar(query).fetch_optional(&pool).await?;
        pool.close().await;
        Ok(value)
    }

    /// Deletes every Redis key of this stack, as a flush would.
    pub async fn flush_redis(&self) -> Result<()> {
        flush_prefix(&self.redis_prefix).await
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
    let rates: Vec<String> = STREAM_CURRENCIES
        .iter()
        .take(currencies)
        .enumerate()
        .map(|(c, code)| {
            let buying = 100 + (bank as usize * 7 + i * 3 + c) % 50;
            format!(
                r#"{{"currency":"{code}","cashBuying":{buying}.25,"cashSelling":{}.75}}"#,
                buying + 2
            )
        })
        .collect();
    format!(r#"{{"asOf":"{as_of}","rates":[{}]}}"#, rates.join(","))
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
