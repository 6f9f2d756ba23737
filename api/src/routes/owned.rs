//! What the routes of things a key owns (webhooks, alerts) share: the
//! owner, ids in paths, and JSON bodies, read and written as text so that
//! numbers keep their digits (a `serde_json::Value` would make a threshold
//! of 150.50 150.5).

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use ratewire_readmodel::views::Envelope;
use serde_json::value::RawValue;
use std::sync::Arc;
use uuid::Uuid;

use crate::access::auth::ApiKey;
use crate::access::keys::Caller;
use crate::access::Access;
use crate::config::BODY_LIMIT;
use crate::error::{Error, Result};
use crate::views::body::json_body;

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

/// An answer in api-v1's envelope: `{message, status, data}`, `data`
/// written by its own serializer (numbers with their digits).
pub fn answer(status: StatusCode, message: &'static str, data: impl serde::Serialize) -> Response {
    let envelope = Envelope {
        message,
        status: status.as_u16(),
        data,
    };
    let mut response =
        json_body(serde_json::to_string(&envelope).expect("an owner's answer serializes"));
    *response.status_mut() = status;
    response
}

/// An id in a path; one that is not a UUID names nothing.
pub fn id_of(raw: &str, missing: &'static str) -> Result<Uuid> {
    Uuid::parse_str(raw).map_err(|_| Error::NotFound(missing))
}

/// What a body's extractor refused: 415 for another content type, 413 over
/// [`BODY_LIMIT`] (the listeners' limit), 400 for text that is not JSON.
fn refused(e: JsonRejection) -> Error {
    match e.status() {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Error::UnsupportedMediaType,
        StatusCode::PAYLOAD_TOO_LARGE => Error::PayloadTooLarge(BODY_LIMIT),
        _ => Error::validation("body", e.body_text()),
    }
}

/// A JSON body as sent; its fields are read (every problem under its
/// field) where it is stored (`ratewire_alerts::registry`).
pub fn read_body(
    body: std::result::Result<Json<Box<RawValue>>, JsonRejection>,
) -> Result<Box<RawValue>> {
    let Json(value) = body.map_err(refused)?;
    Ok(value)
}

/// A JSON body as ingest's operator endpoints read theirs: every problem
/// under its field.
pub fn read_fields<T: serde::de::DeserializeOwned + ratewire_service::body::Fields>(
    body: std::result::Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<T> {
    let Json(value) = body.map_err(refused)?;
    ratewire_service::body::read(value).map_err(Error::Validation)
}
