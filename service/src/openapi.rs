//! The error answers every process's OpenAPI documents describe alike: the
//! spec's envelope, its 400 with every problem named, and the refusals of
//! the operator endpoints (see [`crate::operator`]).
#![allow(dead_code)]

use std::collections::BTreeMap;

use utoipa::ToSchema;

/// Every error: `status` repeats the HTTP status.
#[derive(ToSchema)]
pub struct ErrorBody {
    pub status: u16,
    pub message: String,
}

/// 400: each bad field or parameter with its problems.
#[derive(ToSchema)]
pub struct ValidationErrorBody {
    pub status: u16,
    /// "Validation errors occurred."
    pub message: String,
    /// Each bad parameter or field (e.g. `bankId`, `rates[2].cashSelling`)
    /// and what is wrong.
    pub errors: BTreeMap<String, Vec<String>>,
}

/// The answers every operator endpoint may give besides its own.
#[derive(utoipa::IntoResponses)]
pub enum OperatorErrors {
    /// Admin token missing or wrong.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// Too many failed authentications from this client.
    #[response(status = 429)]
    TooManyFailures(ErrorBody),
    /// Postgres (or, for what is published on the log, the broker) is
    /// unavailable.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}
