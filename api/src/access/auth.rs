//! Who may call a handler, as extractors over what the gate found
//! ([`Identified`]): a handler that takes an [`ApiKey`] or [`Authorized`]
//! only runs for a valid key (or, when anonymous access is on, without
//! one), one that takes an [`Operator`] only for the operators.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
pub use ratewire_service::operator::Operator;

use crate::access::gate::{anonymous_caller, Identified};
use crate::access::keys::Caller;
use crate::error::Error;

/// What the gate found, which every public route sits behind.
fn identified(parts: &Parts) -> Result<&Identified, Error> {
    parts
        .extensions
        .get::<Identified>()
        .ok_or_else(|| Error::Startup("a public route is missing the gate layer".into()))
}

/// A caller with a valid, unrevoked key (the anonymous caller when keyless
/// access is on), for handlers that use who it is.
pub struct ApiKey(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for ApiKey {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let caller = match identified(parts)?.admitted()? {
            Some(caller) => caller.clone(),
            None => anonymous_caller(),
        };
        tracing::Span::current().record("key", caller.prefix.as_str());
        Ok(ApiKey(caller))
    }
}

/// A request [`ApiKey`] admits, for handlers that need no more of the
/// caller.
pub struct Authorized;

impl<S: Send + Sync> FromRequestParts<S> for Authorized {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        identified(parts)?.admitted()?;
        Ok(Authorized)
    }
}
