//! What tests do with a running stack, typed: register banks and take
//! tokens, push boards, create keys, call the API (each response checked
//! against the served OpenAPI document), read the database, wait for what
//! was published to be applied and served.

use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use crate::stack::flush_prefix;
use crate::support::{eventually, sample};
use crate::{made_up_key, Board, Stack, ADMIN_TOKEN, VISIBLE_WITHIN};

/// Ingest's count of events the broker acknowledged.
const PUBLISHED: &str = r#"ratewire_ingest_publish_total{result="acknowledged"}"#;

impl Stack {
    /// Waits until the active generation has applied `expected` events.
    pub async fn wait_applied(&self, expected: i64, timeout: Duration) -> Result<()> {
        let schema = self.active_generation().await?;
        let query = format!("SELECT count(*) FROM {schema}.applied_events");
        self.wait_count("every event applied", &query, expected, timeout)
            .await
    }

    /// Waits until the active generation has applied at least `count`
    /// events: a point part-way through a stream, reached whatever the
    /// machine's speed.
    pub async fn wait_applied_at_least(&self, count: i64, timeout: Duration) -> Result<()> {
        let schema = self.active_generation().await?;
        let query = format!("SELECT count(*) FROM {schema}.applied_events");
        eventually(&format!("{count} events applied"), timeout, || async {
            let applied = self.sql_number(&query).await.ok()??;
            (applied >= count).then_some(())
        })
        .await
    }

    /// Events the active generation has applied so far.
    pub async fn applied_events(&self) -> Result<i64> {
        let schema = self.active_generation().await?;
        let query = format!("SELECT count(*) FROM {schema}.applied_events");
        Ok(self.sql_number(&query).await?.unwrap_or(0))
    }

    /// Waits until the projector has written the views over all banks
    /// (/currencies, best rates) for every event whose bank views it
    /// wrote, as its `/metrics` counts them: what a client reads of them
    /// then follows from every board served.
    pub async fn wait_aggregates_written(&self) -> Result<()> {
        let url = format!("{}/metrics", self.projector_url);
        eventually(
            "the views over all banks written",
            VISIBLE_WITHIN,
            || async {
                let metrics = self.text_at(&url).await?;
                let banks = sample(&metrics, "ratewire_projector_visible_delay_seconds_count");
                let all = sample(
                    &metrics,
                    "ratewire_projector_aggregates_delay_seconds_count",
                );
                (banks > 0.0 && all >= banks).then_some(())
            },
        )
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
        let new = json!({
            "code": code,
            "name": name,
            "imageUrl": format!("https://img.test/{code}.png"),
            "socialLinks": [{"platform": "telegram", "url": format!("https://t.me/{code}")}],
        });
        let (status, body) = self
            .ingest_admin(reqwest::Method::POST, "/v1/admin/banks", Some(new))
            .await?;
        if status != 201 {
            bail!("registering {code}: {status} {body}");
        }
        body["id"].as_i64().context("no id")
    }

    /// Changes a bank through the operator endpoint (`{"active": false}`
    /// deactivates it).
    pub async fn update_bank(&self, bank_id: i64, patch: Value) -> Result<Value> {
        let path = format!("/v1/admin/banks/{bank_id}");
        let (status, body) = self
            .ingest_admin(reqwest::Method::PATCH, &path, Some(patch))
            .await?;
        if status != 200 {
            bail!("updating bank {bank_id}: {status} {body}");
        }
        Ok(body)
    }

    /// Sends `body` (if any) to ingest's operator endpoint `path` with the
    /// admin token: the status and the JSON answer (null when it has none).
    pub async fn ingest_admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value)> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.ingest_operator_url))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// Registers a bank and takes a publisher token for it.
    pub async fn bank_with_token(&self, code: &str, name: &str) -> Result<(i64, String)> {
        let id = self.register_bank(code, name).await?;
        Ok((id, self.publisher_token(id).await?))
    }

    pub async fn publisher_token(&self, bank_id: i64) -> Result<String> {
        let path = format!("/v1/admin/banks/{bank_id}/tokens");
        let (status, body) = self
            .ingest_admin(reqwest::Method::POST, &path, None)
            .await?;
        if status != 201 {
            bail!("a token for bank {bank_id}: {status} {body}");
        }
        Ok(body["token"].as_str().context("no token")?.to_owned())
    }

    /// Pushes a board: a [`Board`], or a body written by hand (JSON text,
    /// so numbers keep their digits); ingest's status and answer.
    pub async fn publish_board(
        &self,
        bank_id: i64,
        token: &str,
        board: impl std::fmt::Display,
    ) -> Result<(u16, Value)> {
        self.publish_keyed(bank_id, token, None, board).await
    }

    /// [`Stack::publish_board`] with an `Idempotency-Key`, when given.
    pub async fn publish_keyed(
        &self,
        bank_id: i64,
        token: &str,
        idempotency_key: Option<&str>,
        board: impl std::fmt::Display,
    ) -> Result<(u16, Value)> {
        let mut request = self
            .http
            .post(format!("{}/v1/banks/{bank_id}/boards", self.ingest_url))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(board.to_string());
        if let Some(key) = idempotency_key {
            request = request.header("idempotency-key", key);
        }
        let response = request.send().await?;
        Ok((response.status().as_u16(), response.json().await?))
    }

    /// Pushes `board` for `bank`, requires it accepted, and waits until the
    /// API serves it as the bank's latest board; ingest's answer (its
    /// `eventId`).
    pub async fn push_and_wait(&self, bank: i64, token: &str, board: &Board) -> Result<Value> {
        let (status, answer) = self.publish_board(bank, token, board).await?;
        ensure!(status == 202, "pushing {board}: {status} {answer}");
        self.wait_board_served(bank, board).await?;
        Ok(answer)
    }

    /// Waits until `/api/v1/rates?bankId={bank}` serves `board` as the
    /// bank's latest: every currency at the board's rates and, when the
    /// board has one, as of its time.
    pub async fn wait_board_served(&self, bank: i64, board: &Board) -> Result<()> {
        let key = self.harness_key().await?;
        let path = format!("/api/v1/rates?bankId={bank}&transactional=true");
        eventually(&format!("{board} served"), VISIBLE_WITHIN, || async {
            let (status, body) = self.get(&path, Some(&key)).await.ok()?;
            (status == 200 && serves(&body["data"][0]["data"][0], board)).then_some(())
        })
        .await
    }

    /// A key of the harness's own (on the enterprise plan), made when first
    /// needed, for its waits on the API.
    async fn harness_key(&self) -> Result<String> {
        self.harness_key
            .get_or_try_init(|| self.api_key("harness"))
            .await
            .cloned()
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

    /// The sample of `series` (a metric name with its labels, as
    /// Prometheus writes them) on `process`'s `/metrics`: one of
    /// [`crate::PROCESSES`]; 0 while it is absent or nobody answers.
    pub async fn metric(&self, process: &str, series: &str) -> f64 {
        let url = match process {
            "ratewire-ingest" => format!("{}/metrics", self.ingest_operator_url),
            "ratewire-api" => format!("{}/metrics", self.api_operator_url),
            "ratewire-projector" => format!("{}/metrics", self.projector_url),
            other => panic!("{other} is not one of the stack's processes"),
        };
        sample(&self.text_at(&url).await.unwrap_or_default(), series)
    }

    /// Waits until `series` on `process`'s `/metrics` reaches `value`.
    pub async fn wait_metric(
        &self,
        process: &str,
        series: &str,
        value: f64,
        within: Duration,
    ) -> Result<()> {
        eventually(&format!("{series} at {value}"), within, || async {
            (self.metric(process, series).await >= value).then_some(())
        })
        .await
    }

    /// Events ingest has had acknowledged by the broker so far (boards,
    /// bank changes, reference days).
    pub async fn published(&self) -> f64 {
        self.metric("ratewire-ingest", PUBLISHED).await
    }

    /// Waits until ingest has had `count` events acknowledged in all: a
    /// point part-way through a stream of pushes.
    pub async fn wait_published(&self, count: f64, within: Duration) -> Result<()> {
        self.wait_metric("ratewire-ingest", PUBLISHED, count, within)
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

    /// The first column of the first row of `query`, if there is a row.
    async fn sql_scalar<T>(&self, query: &str) -> Result<Option<T>>
    where
        T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Send + Unpin,
    {
        let pool = sqlx::PgPool::connect(&format!("{}/{}", self.postgres, self.database)).await?;
        let value = sqlx::query_scalar(query).fetch_optional(&pool).await?;
        pool.close().await;
        Ok(value)
    }

    /// The first column of the first row of `query` as a number, if any.
    pub async fn sql_number(&self, query: &str) -> Result<Option<i64>> {
        self.sql_scalar(query).await
    }

    /// The first column of the first row of `query` as JSON (`None`
    /// without a row).
    pub async fn sql_json(&self, query: &str) -> Result<Option<Value>> {
        let value: Option<Option<Value>> = self.sql_scalar(query).await?;
        Ok(value.map(|v| v.unwrap_or(Value::Null)))
    }

    /// Waits until `query`'s first column is `expected` (see [`Self::sql_json`]).
    pub async fn wait_json(&self, what: &str, query: &str, expected: &Value) -> Result<()> {
        eventually(what, VISIBLE_WITHIN, || async {
            (self.sql_json(query).await.ok()?.as_ref() == Some(expected)).then_some(())
        })
        .await
    }

    /// Deletes every Redis key of this stack, as a flush would.
    pub async fn flush_redis(&self) -> Result<()> {
        flush_prefix(&self.redis_prefix).await
    }
}

/// Whether `bank` (an element of a /rates answer, with transactional
/// rates) shows `board` as its latest: each currency at the board's rates,
/// compared as numbers, and the board's as-of time as its last update.
pub(crate) fn serves(bank: &Value, board: &Board) -> bool {
    let same = |served: &Value, published: &str| {
        served.as_f64().is_some() && served.as_f64() == published.parse::<f64>().ok()
    };
    let at = |text: &str| chrono::DateTime::parse_from_rfc3339(text).ok();
    if let Some(as_of) = board.as_of_time() {
        if bank["lastRatesUpdatedAt"].as_str().and_then(at) != at(as_of) {
            return false;
        }
    }
    let Some(rates) = bank["exchangeRates"].as_array() else {
        return false;
    };
    board.quotes().iter().all(|quote| {
        rates.iter().any(|rate| {
            rate["currency"]["symbol"] == quote.currency.as_str()
                && same(&rate["cashBuying"], &quote.cash_buying)
                && same(&rate["cashSelling"], &quote.cash_selling)
                && quote
                    .transactional
                    .as_ref()
                    .is_none_or(|(buying, selling)| {
                        same(&rate["transactionalBuying"], buying)
                            && same(&rate["transactionalSelling"], selling)
                    })
        })
    })
}
