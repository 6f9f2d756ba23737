//! The API's one error type, mapped to api-v1's error bodies in one place.

use std::collections::BTreeMap;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ratewire_service::postgres::unavailable as postgres_unavailable;
use serde_json::json;

pub type FieldErrors = BTreeMap<String, Vec<String>>;

/// Why a request is refused while the process prepares Postgres
/// ([`Error::Starting`]).
pub const STILL_STARTING: &str = "Still starting: waiting for Postgres";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("validation failed: {0:?}")]
    Validation(FieldErrors),
    #[error("API key is required")]
    MissingKey,
    #[error("Invalid API key")]
    InvalidKey,
    #[error("{0}")]
    NotFound(&'static str),
    /// A 404 of the same family that says why (`Currency not found: ...`).
    #[error("{0}")]
    NotFoundBecause(String),
    #[error("Method Not Allowed")]
    MethodNotAllowed,
    /// The per-minute window is spent (the gate adds Retry-After).
    #[error("Rate limit exceeded")]
    RateLimited,
    /// The monthly allowance is spent (the gate adds Retry-After).
    #[error("Monthly quota exceeded")]
    QuotaExceeded,
    /// The caller holds as many live streams as its plan allows.
    #[error("Too many concurrent streams")]
    TooManyStreams,
    /// The live stream cannot start while Redis cannot be read.
    #[error("The live stream needs Redis")]
    StreamUnavailable,
    #[error("Content-Type must be application/json")]
    UnsupportedMediaType,
    /// A request body over the limit, this many bytes.
    #[error("Request body is too large: at most {0} bytes")]
    PayloadTooLarge(usize),
    /// A key neither known valid nor known invalid, and not checked now
    /// (see `keys::Lookup::NotChecked`): never answered as invalid.
    #[error("Service Unavailable")]
    KeyUnchecked,
    /// The process is still preparing a dependency (e.g. started while
    /// Postgres was down).
    #[error("{0}")]
    Starting(&'static str),
    #[error("postgres: {0}")]
    Postgres(#[from] sqlx::Error),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A Postgres failure several requests shared (they waited for the
    /// same key lookup or the same render): each gets this copy.
    #[error("postgres ({what}): {message}")]
    Shared {
        what: &'static str,
        unavailable: bool,
        message: String,
    },
    #[error("{0}")]
    Startup(String),
    /// A feature this server was not configured for.
    #[error("{0}")]
    NotConfigured(&'static str),
    /// The caller holds as many of something as it may.
    #[error("{0}")]
    LimitReached(String),
    /// The request does not fit the state of what it names.
    #[error("{0}")]
    Conflict(&'static str),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<ratewire_readmodel::Error> for Error {
    fn from(e: ratewire_readmodel::Error) -> Self {
        match e {
            ratewire_readmodel::Error::Postgres(e) => Error::Postgres(e),
            ratewire_readmodel::Error::Redis(e) => Error::Redis(e),
            other => Error::Startup(other.to_string()),
        }
    }
}

impl From<ratewire_service::Error> for Error {
    fn from(e: ratewire_service::Error) -> Self {
        Error::Startup(e.to_string())
    }
}

impl Error {
    pub fn validation(field: &str, message: impl Into<String>) -> Self {
        Error::Validation(BTreeMap::from([(field.to_owned(), vec![message.into()])]))
    }

    /// A copy for another request that shared this failure (a Postgres
    /// error cannot be cloned): the same answer and the same log line.
    pub fn duplicate(&self, what: &'static str) -> Error {
        match self {
            Error::NotFound(message) => Error::NotFound(message),
            Error::NotFoundBecause(message) => Error::NotFoundBecause(message.clone()),
            Error::Starting(message) => Error::Starting(message),
            other => Error::Shared {
                what,
                unavailable: other.status() == StatusCode::SERVICE_UNAVAILABLE,
                message: other.to_string(),
            },
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Error::Validation(_) => StatusCode::BAD_REQUEST,
            Error::MissingKey | Error::InvalidKey => StatusCode::UNAUTHORIZED,
            Error::NotFound(_) | Error::NotFoundBecause(_) => StatusCode::NOT_FOUND,
            Error::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Error::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::RateLimited | Error::QuotaExceeded | Error::TooManyStreams => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Error::StreamUnavailable | Error::KeyUnchecked => StatusCode::SERVICE_UNAVAILABLE,
            Error::NotConfigured(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::LimitReached(_) | Error::Conflict(_) => StatusCode::CONFLICT,
            Error::Starting(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Postgres(e) if postgres_unavailable(e) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Shared {
                unavailable: true, ..
            } => StatusCode::SERVICE_UNAVAILABLE,
            Error::Postgres(_) | Error::Shared { .. } | Error::Redis(_) | Error::Startup(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        match &self {
            Error::Postgres(_) | Error::Shared { .. } => {
                metrics::counter!("ratewire_api_postgres_errors_total").increment(1)
            }
            Error::Redis(_) => metrics::counter!("ratewire_api_redis_errors_total").increment(1),
            _ => {}
        }
        let body = match &self {
            Error::Validation(errors) => {
                json!({"status": 400, "message": "Validation errors occurred.", "errors": errors})
            }
            Error::RateLimited => {
                json!({"status": 429, "message": self.to_string(), "code": "RATE_LIMIT_EXCEEDED"})
            }
            Error::QuotaExceeded => {
                json!({"status": 429, "message": self.to_string(), "code": "QUOTA_EXCEEDED"})
            }
            Error::TooManyStreams => {
                json!({"status": 429, "message": self.to_string(), "code": "RATE_LIMIT_EXCEEDED"})
            }
            // One per request of a flood: counted by the gate, not logged.
            // (`ratewire_api_keys_unchecked_total`).
            Error::KeyUnchecked => json!({"status": 503, "message": self.to_string()}),
            Error::NotConfigured(_) => json!({"status": 503, "message": self.to_string()}),
            Error::LimitReached(_) => {
                json!({"status": 409, "message": self.to_string(), "code": "LIMIT_REACHED"})
            }
            _ if status == StatusCode::SERVICE_UNAVAILABLE => {
                tracing::warn!(error = %self, "dependency unavailable; answering 503");
                json!({"status": 503, "message": "Service Unavailable"})
            }
            _ if status == StatusCode::INTERNAL_SERVER_ERROR => {
                // The cause is for the logs, never for the client.
                tracing::error!(error = %self, "internal error");
                json!({"status": 500, "message": "Internal Server Error"})
            }
            other => json!({"status": status.as_u16(), "message": other.to_string()}),
        };
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if let Error::TooManyStreams = self {
            // A stream ends when its client goes; try again shortly.
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
        }
        response
    }
}
