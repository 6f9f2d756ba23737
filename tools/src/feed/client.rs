//! ingest over HTTP, as a publisher or an operator sees it: the feed
//! commands use nothing a real bank's publisher could not.

use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

/// What ingest answered to a pushed board.
#[derive(Debug, Clone, PartialEq)]
pub enum Pushed {
    /// 202: the broker acknowledged the event.
    Accepted { event_id: String },
    /// A 4xx: the board is wrong (or the token is) and retrying will not help.
    Rejected {
        status: u16,
        message: String,
        /// Field to problems, as in the 400 envelope.
        errors: Vec<(String, String)>,
    },
    /// A 5xx or no answer: worth retrying with the same idempotency key.
    Unavailable { cause: String },
}

/// What ingest answered to an imported reference day.
#[derive(Debug, Clone, PartialEq)]
pub enum Imported {
    /// 202 (`published`, `corrected`) or 200 (`unchanged`).
    Done {
        date: String,
        outcome: String,
        currencies: u64,
    },
    /// A 4xx: the body is wrong (or the token is).
    Rejected {
        status: u16,
        message: String,
        errors: Vec<(String, String)>,
    },
    /// A 5xx or no answer: worth posting again.
    Unavailable { cause: String },
}

impl Imported {
    pub fn imported(&self) -> bool {
        matches!(self, Imported::Done { .. })
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            Imported::Done {
                date,
                outcome,
                currencies,
            } => format!("{date} {outcome} ({currencies} currencies)"),
            Imported::Rejected {
                status,
                message,
                errors,
            } => {
                let errors: Vec<String> = errors.iter().map(|(f, p)| format!("{f} {p}")).collect();
                format!("rejected ({status} {message}): {}", errors.join("; "))
            }
            Imported::Unavailable { cause } => format!("ingest unavailable: {cause}"),
        }
    }
}

#[derive(Clone)]
pub struct IngestClient {
    http: reqwest::Client,
    /// The public listener: publishers push boards here.
    base: String,
    /// The operator listener: banks and tokens are managed here.
    operator_base: String,
    admin: Option<String>,
}

impl IngestClient {
    pub fn new(
        ingest_url: &str,
        operator_url: &str,
        admin_token: Option<&str>,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?,
            base: ingest_url.trim_end_matches('/').to_owned(),
            operator_base: operator_url.trim_end_matches('/').to_owned(),
            admin: admin_token
                .filter(|t| !t.is_empty())
                .map(|t| format!("Bearer {t}")),
        })
    }

    fn admin(&self) -> anyhow::Result<&str> {
        self.admin
            .as_deref()
            .context("this needs the operator token (RATEWIRE_ADMIN_TOKEN or --admin-token)")
    }

    async fn admin_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.operator_base))
            .header("authorization", self.admin()?);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.with_context(|| {
            format!(
                "ingest's operator listener at {} is not reachable",
                self.operator_base
            )
        })?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    pub async fn banks(&self) -> anyhow::Result<Vec<Value>> {
        match self
            .admin_call(reqwest::Method::GET, "/v1/admin/banks", None)
            .await?
        {
            (200, Value::Array(banks)) => Ok(banks),
            (status, body) => bail!("listing banks failed with {status}: {body}"),
        }
    }

    /// Registers a bank and returns its id.
    pub async fn register_bank(&self, bank: Value) -> anyhow::Result<i64> {
        match self
            .admin_call(reqwest::Method::POST, "/v1/admin/banks", Some(bank))
            .await?
        {
            (201, body) => body["id"].as_i64().context("registered bank without id"),
            (status, body) => bail!("registering a bank failed with {status}: {body}"),
        }
    }

    /// A new publisher token for the bank: `(token, prefix)`, or `None` when
    /// no such bank is registered.
    pub async fn create_token(&self, bank_id: i64) -> anyhow::Result<Option<(String, String)>> {
        match self
            .admin_call(
                reqwest::Method::POST,
                &format!("/v1/admin/banks/{bank_id}/tokens"),
                None,
            )
            .await?
        {
            (201, body) => Ok(Some((
                body["token"].as_str().context("no token")?.to_owned(),
                body["prefix"].as_str().context("no prefix")?.to_owned(),
            ))),
            (404, _) => Ok(None),
            (status, body) => {
                bail!("creating a token for bank {bank_id} failed with {status}: {body}")
            }
        }
    }

    pub async fn revoke_token(&self, prefix: &str) -> anyhow::Result<()> {
        match self
            .admin_call(
                reqwest::Method::DELETE,
                &format!("/v1/admin/tokens/{prefix}"),
                None,
            )
            .await?
        {
            (204 | 404, _) => Ok(()),
            (status, body) => bail!("revoking token {prefix} failed with {status}: {body}"),
        }
    }

    /// Pushes one board body once.
    pub async fn push_board(
        &self,
        bank_id: i64,
        token: &str,
        body: String,
        idempotency_key: Option<&str>,
    ) -> Pushed {
        let mut request = self
            .http
            .post(format!("{}/v1/banks/{bank_id}/boards", self.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body);
        if let Some(key) = idempotency_key {
            request = request.header("idempotency-key", key);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                return Pushed::Unavailable {
                    cause: e.to_string(),
                }
            }
        };
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match status {
            202 => Pushed::Accepted {
                event_id: body["eventId"].as_str().unwrap_or_default().to_owned(),
            },
            400..=499 => Pushed::Rejected {
                status,
                message: body["message"].as_str().unwrap_or_default().to_owned(),
                errors: field_errors(&body["errors"]),
            },
            _ => Pushed::Unavailable {
                cause: format!("{status} {}", body["message"].as_str().unwrap_or_default()),
            },
        }
    }
}

impl IngestClient {
    /// Posts a published reference response, as it is, once.
    pub async fn import_reference(&self, body: Vec<u8>) -> Imported {
        let admin = match self.admin() {
            Ok(admin) => admin.to_owned(),
            Err(e) => {
                return Imported::Rejected {
                    status: 401,
                    message: e.to_string(),
                    errors: Vec::new(),
                }
            }
        };
        let response = match self
            .http
            .post(format!("{}/v1/admin/reference-rates", self.operator_base))
            .header("authorization", admin)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
        {
            Ok(response) => response,
            Err(e) => {
                return Imported::Unavailable {
                    cause: e.to_string(),
                }
            }
        };
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match status {
            200 | 202 => Imported::Done {
                date: body["date"].as_str().unwrap_or_default().to_owned(),
                outcome: body["outcome"].as_str().unwrap_or_default().to_owned(),
                currencies: body["currencies"].as_u64().unwrap_or_default(),
            },
            400..=499 => Imported::Rejected {
                status,
                message: body["message"].as_str().unwrap_or_default().to_owned(),
                errors: field_errors(&body["errors"]),
            },
            _ => Imported::Unavailable {
                cause: format!("{status} {}", body["message"].as_str().unwrap_or_default()),
            },
        }
    }
}

/// `{"field": ["problem", ...]}` flattened, in the order ingest sent it.
fn field_errors(errors: &Value) -> Vec<(String, String)> {
    let Some(fields) = errors.as_object() else {
        return Vec::new();
    };
    fields
        .iter()
        .flat_map(|(field, problems)| {
            problems
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p.as_str())
                .map(move |p| (field.clone(), p.to_owned()))
        })
        .collect()
}

/// The body for a new bank as the operator endpoint takes it.
pub fn new_bank(code: &str, name: &str, image_url: &str, links: &[(&str, &str)]) -> Value {
    json!({
        "code": code,
        "name": name,
        "imageUrl": image_url,
        "socialLinks": links.iter().map(|(p, u)| json!({"platform": p, "url": u})).collect::<Vec<_>>(),
    })
}
