//! Who may call a handler, as extractors: a handler that takes an
//! [`ApiKey`] only runs for a valid key (or, when anonymous access is on,
//! without one), one that takes an [`Operator`] only for the operators.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
pub use ratewire_service::operator::Operator;

use crate::access::gate::{anonymous_caller, Identified};
use crate::access::keys::Caller;
use crate::access::Access;
use crate::error::Error;

/// A caller with a valid, unrevoked key.
pub struct ApiKey(pub Caller);

impl<S> FromRequestParts<S> for ApiKey
where
    S: Send + Sync,
    Arc<Access>: FromRef<S>,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let access = Arc::<Access>::from_ref(state);
        // Every public route sits behind the gate, which looked the key up.
        let identified = parts
            .extensions
            .get::<Identified>()
            .ok_or_else(|| Error::Startup("a public route is missing the gate layer".into()))?;
        let caller = match (&identified.caller, identified.key_given) {
            (Some(caller), _) => caller.clone(),
            (None, false) if access.anonymous_access => anonymous_caller(),
            (None, false) => return Err(Error::MissingKey),
            (None, true) => return Err(Error::InvalidKey),
        };
        tracing::Span::current().record("key", caller.prefix.as_str());
        Ok(ApiKey(caller))
    }
}
