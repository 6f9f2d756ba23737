//! The responses a view is answered with: its bytes as JSON, its `ETag`,
//! and a list gzip-encoded once per kept view.

use axum::body::Bytes;
use axum::http::{header, HeaderValue};
use axum::response::Response;

use crate::views::body::{json_body, json_list};
use crate::views::cache::ViewCache;
use crate::views::requests::Stored;

/// Whether the client takes gzip (read from `Accept-Encoding` alone,
/// without copying the request's headers).
#[derive(Debug, Clone, Copy)]
pub struct AcceptsGzip(pub bool);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for AcceptsGzip {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> std::result::Result<Self, Self::Rejection> {
        Ok(Self(crate::web::accepts_gzip(&parts.headers)))
    }
}

/// A list answer made of a stored view (`/rates`, `/banks`): gzip-encoded,
/// made once per kept view, when the client takes gzip and the view is kept
/// in this process; as it is otherwise. The gzip encoding is another
/// representation, so its `ETag` is the view's with `-gz`.
pub fn stored_list(cache: &ViewCache, gzip: AcceptsGzip, key: &str, stored: Stored) -> Response {
    use ratewire_readmodel::views::{LIST_HEAD, LIST_TAIL};
    // The cache decides whether the body is large enough to gain.
    let gzip = gzip
        .0
        .then(|| cache.gzip(key, &stored, LIST_HEAD.as_bytes(), LIST_TAIL.as_bytes()))
        .flatten();
    let mut response = match gzip {
        Some(gzip) => {
            let etag = stored.etag.as_deref().map(|e| format!("{e}-gz"));
            let mut response = with_etag(json_body(gzip), etag.as_deref());
            response
                .headers_mut()
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            response
        }
        None => with_etag(json_list(stored.body), stored.etag.as_deref()),
    };
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    response
}

/// `response` with the strong `ETag` of fingerprint `etag` (see
/// [`crate::conditional`] for what a client does with it).
/// An answer whose rows carry `ageSeconds` (it grows every second): its
/// `ETag` is weak and made from the same body after `without_ages` took
/// the ages out, so a client's copy stays current until something else
/// changes.
pub fn aged_answer<T: serde::Serialize>(
    mut body: T,
    without_ages: impl FnOnce(&mut T),
) -> Response {
    let text = serde_json::to_string(&body).expect("the answer serializes");
    without_ages(&mut body);
    let ageless = serde_json::to_string(&body).expect("the answer serializes");
    aged_text(text, &ageless)
}

/// [`aged_answer`] of a body serialized already, with and without its ages.
pub fn aged_text(text: String, ageless: &str) -> Response {
    let mut response = super::body::json_body(text);
    let etag = format!("W/\"{}\"", ratewire_readmodel::views::digest(ageless));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

pub fn with_etag(mut response: Response, etag: Option<&str>) -> Response {
    if let Some(etag) = etag {
        let mut quoted = Vec::with_capacity(etag.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(etag.as_bytes());
        quoted.push(b'"');
        if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(quoted)) {
            response.headers_mut().insert(header::ETAG, value);
        }
    }
    response
}
