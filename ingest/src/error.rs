//! Ingest's one error type and its mapping to responses, in the api-v1
//! envelope: `{"status": N, "message": "...", "errors"?: {...}}`.

use std::collections::BTreeMap;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ratewire_service::postgres::unavailable as is_unavailable;
use serde_json::json;

/// Field name to the problems found with it.
pub type FieldErrors = BTreeMap<String, Vec<String>>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("validation failed: {0:?}")]
    Validation(FieldErrors),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unprocessable(String),
    /// Too many failed authentications from this client; retry after this
    /// many seconds.
    #[error("Too many failed authentications")]
    TooManyFailures(u64),
    /// The body is over `RATEWIRE_INGEST_BODY_LIMIT` (this many bytes).
    #[error("Request body is too large: at most {0} bytes")]
    PayloadTooLarge(usize),
    #[error("Content-Type must be application/json")]
    UnsupportedMediaType,
    /// The broker did not acknowledge in time, or a dependency is down.
    #[error("{what} unavailable: {cause}")]
    Unavailable { what: &'static str, cause: String },
    /// Ingest's record of the bank and the log disagree (see
    /// `log_registry`): anything published for it would land on
    /// the log's bank.
    #[error("bank {bank} disagrees with the log: {reason}")]
    LogConflict { bank: i64, reason: String },
    #[error("postgres: {0}")]
    Postgres(#[from] sqlx::Error),
    #[error("startup: {0}")]
    Startup(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<ratewire_service::Error> for Error {
    fn from(e: ratewire_service::Error) -> Self {
        Error::Startup(e.to_string())
    }
}

/// Seconds a client should wait before retrying a 503.
const RETRY_AFTER_SECS: &str = "1";

impl Error {
    pub fn validation(field: &str, message: impl Into<String>) -> Self {
        Error::Validation(BTreeMap::from([(field.to_owned(), vec![message.into()])]))
    }

    fn status(&self) -> StatusCode {
        match self {
            Error::Validation(_) => StatusCode::BAD_REQUEST,
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::TooManyFailures(_) => StatusCode::TOO_MANY_REQUESTS,
            Error::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::Unavailable { .. } | Error::LogConflict { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Error::Postgres(e) if is_unavailable(e) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Postgres(_) | Error::Startup(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        if let Error::Postgres(_) = &self {
            metrics::counter!("ratewire_ingest_postgres_errors_total").increment(1);
        }
        let body = match &self {
            Error::Validation(errors) => {
                json!({"status": 400, "message": "Validation errors occurred.", "errors": errors})
            }
            Error::TooManyFailures(_) => {
                json!({"status": 429, "message": self.to_string(), "code": "RATE_LIMIT_EXCEEDED"})
            }
            Error::Unavailable { what, cause } => {
                tracing::warn!(what, cause, "answering 503");
                json!({"status": 503, "message": "Service Unavailable"})
            }
            Error::LogConflict { bank, reason } => {
                tracing::error!(
                    bank_id = bank,
                    reason,
                    "refused: the bank disagrees with the log"
                );
                json!({"status": 503, "message": "This bank's record disagrees with the event log; an operator must reconcile it"})
            }
            Error::Postgres(e) if status == StatusCode::SERVICE_UNAVAILABLE => {
                tracing::warn!(error = %e, "postgres unavailable; answering 503");
                json!({"status": 503, "message": "Service Unavailable"})
            }
            Error::Postgres(_) | Error::Startup(_) => {
                // The cause goes to the logs only.
                tracing::error!(error = %self, "internal error");
                json!({"status": 500, "message": "Internal Server Error"})
            }
            other => json!({"status": status.as_u16(), "message": other.to_string()}),
        };
        let mut response = (status, Json(body)).into_response();
        if let Error::TooManyFailures(wait) = self {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_str(&wait.to_string()).expect("digits"),
            );
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        response
    }
}
