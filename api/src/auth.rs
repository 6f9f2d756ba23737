//! The `x-api-key` check, as an extractor: a handler that takes an
//! [`ApiKey`] only runs for a valid key.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use ratewire_proto::secret::check_operator;

use crate::error::Error;
use crate::gate::{anonymous_caller, Identified};
use crate::keys::Caller;
use crate::routes::AppState;

pub const API_KEY_HEADER: &str = "x-api-key";

/// A caller with a valid, unrevoked key.
pub struct ApiKey(pub Caller);

impl FromRequestParts<AppState> for ApiKey {
    type Rejection = Error;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // Every public route sits behind the gate, which looked the key up.
        let identified = parts
            .extensions
            .get::<Identified>()
            .ok_or_else(|| Error::Startup("a public route is missing the gate layer".into()))?;
        let caller = match (&identified.caller, identified.key_given) {
            (Some(caller), _) => caller.clone(),
            (None, false) if state.anonymous_access => anonymous_caller(),
            (None, false) => return Err(Error::MissingKey),
            (None, true) => return Err(Error::InvalidKey),
        };
        tracing::Span::current().record("key", caller.prefix.as_str());
        Ok(ApiKey(caller))
    }
}

/// Proof that the caller holds `RATEWIRE_ADMIN_TOKEN`.
pub struct Operator;

impl FromRequestParts<AppState> for Operator {
    type Rejection = Error;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let authorization = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        check_operator(authorization, state.admin_token.as_deref())
            .map(|()| Operator)
            .map_err(|denied| Error::Unauthorized(denied.message()))
    }
}
