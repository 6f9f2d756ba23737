//! What the routes of things a key owns (webhooks, alerts) share: the
//! owner, ids in paths, and JSON bodies.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use uuid::Uuid;

use crate::access::auth::ApiKey;
use crate::access::keys::Caller;
use crate::access::Access;
use crate::config::BODY_LIMIT;
use crate::error::{Error, Result};

/// A caller with a key of its own: anonymous callers own nothing.
pub struct Owner(pub Caller);

impl<S> FromRequestParts<S> for Owner
where
    S: Send + Sync,
    Arc<Access>: FromRef<S>,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let ApiKey(caller) = ApiKey::from_request_parts(parts, state).await?;
        if caller.created_at.is_none() {
            return Err(Error::MissingKey);
        }
        Ok(Owner(caller))
    }
}

/// An answer in api-v1's envelope: `{message, status, data}`.
pub fn answer(
    status: StatusCode,
    message: &str,
    data: impl serde::Serialize,
) -> (StatusCode, Json<Value>) {
    let body = serde_json::json!({"message": message, "status": status.as_u16(), "data": data});
    (status, Json(body))
}

/// An id in a path; one that is not a UUID names nothing.
pub fn id_of(raw: &str, missing: &'static str) -> Result<Uuid> {
    Uuid::parse_str(raw).map_err(|_| Error::NotFound(missing))
}

/// A JSON body as ingest's operator endpoints read theirs: 415 for another
/// content type, 413 over [`BODY_LIMIT`] (the listeners' limit), then
/// every problem under its field.
pub fn read_body<T: DeserializeOwned + ratewire_service::body::Fields>(
    body: std::result::Result<Json<Value>, JsonRejection>,
) -> Result<T> {
    let Json(value) = body.map_err(|e| match e.status() {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Error::UnsupportedMediaType,
        StatusCode::PAYLOAD_TOO_LARGE => Error::PayloadTooLarge(BODY_LIMIT),
        _ => Error::validation("body", e.body_text()),
    })?;
    ratewire_service::body::read(value).map_err(Error::Validation)
}
