//! The error answers, in the spec's envelope (their shapes shared with the
//! other processes' documents: `ratewire_service::openapi`), and the
//! tables of those every endpoint of a kind may give.
#![allow(dead_code)]

pub use ratewire_service::openapi::{ErrorBody, OperatorErrors, ValidationErrorBody};
use utoipa::ToSchema;

/// 429: which limit was hit.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitErrorBody {
    pub status: u16,
    pub message: String,
    #[schema(pattern = "^(RATE_LIMIT_EXCEEDED|QUOTA_EXCEEDED)$")]
    pub code: String,
}

/// The errors every data endpoint can answer.
#[derive(utoipa::IntoResponses)]
pub enum CommonErrors {
    /// Validation errors occurred.
    #[response(status = 400)]
    BadRequest(ValidationErrorBody),
    /// "API key is required" (no `x-api-key`) or "Invalid API key"
    /// (unknown or revoked). Unless the operator opened keyless access.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// Per-minute limit (RATE_LIMIT_EXCEEDED) or monthly allowance
    /// (QUOTA_EXCEEDED) spent; wait `Retry-After` seconds. Callers without
    /// a valid key are counted per client address under the anonymous
    /// plan before their 401, so they get this once that is spent.
    #[response(status = 429, headers(("Retry-After" = u64, description = "Whole seconds until a retry can succeed")))]
    TooManyRequests(LimitErrorBody),
    /// Internal Server Error (the cause is only logged).
    #[response(status = 500)]
    Internal(ErrorBody),
    /// A dependency is unavailable; retry after `Retry-After` seconds.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}
