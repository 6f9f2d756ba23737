//! Signed answers: a read that carries `Accept-Signature` (RFC 9421,
//! section 5.1) is answered with `Content-Digest` (RFC 9530, sha-256) and,
//! under each label asked for, `Signature-Input` and `Signature`: Ed25519,
//! with `created`, `expires`, `keyid` (the key's JWK thumbprint) and
//! `alg="ed25519"`. The public keys are served at `/api/v1/signing-keys`
//! ([`keys`]).
//!
//! - Each signature covers the components asked for ([`accept`]), then
//!   `"@status"`, `"content-digest"` and `"content-type"` when they were
//!   not asked for: an answer is never signed without its bytes.
//! - It is made over the answer as sent, as the last step before the
//!   listener's own headers ([`Signing`] wraps the gate): the digest is
//!   of the content after its coding (a gzip list is signed gzipped),
//!   and the rate-limit fields may be covered.
//! - A malformed `Accept-Signature`, or one asking for what cannot be
//!   signed, gets 400 (`errors["Accept-Signature"]`) with the gate's
//!   headers, unless the gate refused the request itself (401, 429, 503).
//! - Not signed: 304s (no content: the copy the client holds is), answers
//!   to HEAD (no content either; `Accept-Signature` is ignored there), the
//!   live stream (it does not end), and a signature covering a field the
//!   answer does not carry (the others asked for still are).
//! - Without a key (`RATEWIRE_SIGNING_KEY_FILE` unset) signing is off and
//!   `Accept-Signature` is ignored; `/signing-keys` lists the retired keys
//!   still valid, if any.
//!
//! A request without `Accept-Signature` costs one header lookup.

pub mod accept;
pub mod keys;
pub mod sign;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderName, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::Either;
use tower::{Layer, Service};

use crate::error::Error;
use keys::{CurrentKey, KeySet};

pub const ACCEPT_SIGNATURE: HeaderName = HeaderName::from_static("accept-signature");

/// The largest answer signed: it is read whole to be digested. Larger ones
/// are answered 500 rather than sent unsigned.
const MOST_SIGNED: usize = 64 * 1024 * 1024;

/// The layer that signs the answers asked to be (see the module docs).
#[derive(Clone)]
pub struct Signing {
    pub keys: Arc<KeySet>,
}

impl<S> Layer<S> for Signing {
    type Service = Signed<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Signed {
            keys: Arc::clone(&self.keys),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct Signed<S> {
    keys: Arc<KeySet>,
    inner: S,
}

type SigningFuture<'a> = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send + 'a>>;

impl<S> Service<Request> for Signed<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, SigningFuture<'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let (Some(key), true, false) = (
            &self.keys.current,
            request.headers().contains_key(ACCEPT_SIGNATURE),
            request.method() == Method::HEAD,
        ) else {
            return Either::Left(self.inner.call(request));
        };
        let key = key.clone();
        let validity = self.keys.validity_secs;
        // The clone made ready is the one called.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (mut parts, body) = request.into_parts();
        let asked = parts
            .headers
            .get_all(ACCEPT_SIGNATURE)
            .iter()
            .map(|v| v.as_bytes())
            .collect::<Vec<_>>()
            .join(&b", "[..]);
        let wanted = accept::parse(&asked, &parts, &key.kid);
        if wanted.is_err() {
            parts.headers.remove(ACCEPT_SIGNATURE);
        }
        let request = Request::from_parts(parts, body);
        Either::Right(Box::pin(async move {
            let Ok(response) = inner.call(request).await;
            Ok(match wanted {
                Ok(wanted) if wanted.is_empty() => response,
                Ok(wanted) => signed(response, &wanted, &key, validity).await,
                Err(problem) => refused(response, problem),
            })
        }))
    }
}

/// `response` signed for each of `wanted` (see the module docs for what
/// is not).
async fn signed(
    response: Response,
    wanted: &[accept::Wanted],
    key: &CurrentKey,
    validity: u64,
) -> Response {
    let (mut parts, body) = response.into_parts();
    let streamed = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if parts.status == StatusCode::NOT_MODIFIED || streamed {
        return Response::from_parts(parts, body);
    }
    let content = match axum::body::to_bytes(body, MOST_SIGNED).await {
        Ok(content) => content,
        Err(e) => {
            tracing::error!(error = %e, "an answer to sign could not be read whole");
            return Error::Startup("an answer too large to sign".to_owned()).into_response();
        }
    };
    parts
        .headers
        .insert(sign::CONTENT_DIGEST, sign::content_digest(&content));
    let created = chrono::Utc::now().timestamp();
    let period = sign::Period {
        created,
        expires: created.saturating_add(i64::try_from(validity).unwrap_or(i64::MAX)),
    };
    sign::sign(&mut parts, wanted, key, period);
    Response::from_parts(parts, Body::from(content))
}

/// The 400 for an `Accept-Signature` that cannot be fulfilled, with the
/// rate-limit fields of the gate's answer; the gate's own refusals stand.
fn refused(response: Response, problem: String) -> Response {
    if matches!(
        response.status(),
        StatusCode::UNAUTHORIZED | StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        return response;
    }
    let mut refusal = Error::validation("Accept-Signature", problem).into_response();
    for (name, value) in response.headers() {
        let name_text = name.as_str();
        if name_text.starts_with("x-ratelimit-") || name_text.starts_with("ratelimit") {
            refusal.headers_mut().append(name.clone(), value.clone());
        }
    }
    refusal
}
