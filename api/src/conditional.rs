//! Conditional GETs: every successful read answer carries a strong `ETag`
//! and `Cache-Control: no-cache` (keep it, but ask again: rates change at
//! any moment), and a request whose `If-None-Match` names the current one
//! is answered `304 Not Modified` without a body.
//!
//! The `ETag` of a stored view is its fingerprint, written by the projector
//! when it rendered the view (see `ratewire_readmodel::redis`), and of a
//! view rendered from Postgres, computed when that render was made; an
//! answer rendered for its request alone (history, /me, /usage) is
//! fingerprinted here. A 304 is still a request: it passed the gate, was
//! counted, and carries the rate-limit headers.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

/// The largest answer fingerprinted here (the large ones are stored views,
/// which come with theirs).
const MOST_FINGERPRINTED: usize = 4 * 1024 * 1024;

/// Middleware (`axum::middleware::from_fn(conditional)`) for routes the
/// gate does not pass (the pages).
pub async fn conditional(request: Request, next: Next) -> Response {
    let readable = matches!(*request.method(), Method::GET | Method::HEAD);
    let if_none_match = request.headers().get(header::IF_NONE_MATCH).cloned();
    let response = next.run(request).await;
    answer(readable, if_none_match.as_ref(), response).await
}

/// `response` to a request (a GET or HEAD when `readable`) with
/// `if_none_match`: a successful read tagged (fingerprinted here when it
/// has no `ETag`), or 304 when the tag is the client's.
pub async fn answer(
    readable: bool,
    if_none_match: Option<&HeaderValue>,
    response: Response,
) -> Response {
    if !readable || response.status() != StatusCode::OK || is_stream(response.headers()) {
        return response;
    }
    let response = if response.headers().contains_key(header::ETAG) {
        response
    } else {
        fingerprint(response).await
    };
    tagged(if_none_match, response)
}

/// A successful read answer that has its `ETag`: kept with `no-cache`
/// (unless its handler said otherwise: a final answer as known at an
/// instant is `immutable`, see `views::known_at`), or 304 when
/// `if_none_match` names it.
pub fn tagged(if_none_match: Option<&HeaderValue>, mut response: Response) -> Response {
    response
        .headers_mut()
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-cache"));
    let current = response.headers().get(header::ETAG);
    match (if_none_match, current) {
        (Some(wanted), Some(current)) if names(wanted, current) => not_modified(response),
        _ => response,
    }
}

/// Server-sent events are never fingerprinted nor answered 304.
fn is_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// The answer with an `ETag` made from its body.
async fn fingerprint(response: Response) -> Response {
    use axum::body::HttpBody;
    let (mut parts, body) = response.into_parts();
    // Too large to fingerprint, or of no known size: sent as it is (read
    // past the limit, the body would be lost).
    if body
        .size_hint()
        .upper()
        .is_none_or(|size| size > MOST_FINGERPRINTED as u64)
    {
        return Response::from_parts(parts, body);
    }
    match axum::body::to_bytes(body, MOST_FINGERPRINTED).await {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let etag = ratewire_readmodel::views::digest(&text);
            if let Ok(value) = HeaderValue::from_str(&format!("\"{etag}\"")) {
                parts.headers.insert(header::ETAG, value);
            }
            Response::from_parts(parts, Body::from(bytes))
        }
        // The body failed: the response fails either way.
        Err(e) => {
            tracing::debug!(error = %e, "answer not fingerprinted");
            Response::from_parts(parts, Body::empty())
        }
    }
}

/// Whether `If-None-Match` names `current` (weak comparison, as RFC 9110
/// asks for this header; `*` names any).
fn names(if_none_match: &HeaderValue, current: &HeaderValue) -> bool {
    let Ok(wanted) = if_none_match.to_str() else {
        return false;
    };
    let current = opaque(current.to_str().unwrap_or_default());
    wanted
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || opaque(tag) == current)
}

fn opaque(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}

fn not_modified(response: Response) -> Response {
    let (mut parts, _) = response.into_parts();
    parts.status = StatusCode::NOT_MODIFIED;
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(s: &str) -> HeaderValue {
        HeaderValue::from_str(s).unwrap()
    }

    #[tokio::test]
    async fn an_answer_too_large_to_fingerprint_is_sent_whole_without_a_tag() {
        let big = vec![b'x'; MOST_FINGERPRINTED + 1];
        let sent = answer(true, None, Response::new(Body::from(big.clone()))).await;
        assert!(sent.headers().get(header::ETAG).is_none());
        let body = axum::body::to_bytes(sent.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(body.len(), big.len());
    }

    #[test]
    fn if_none_match_names_the_tag_among_others_weak_or_not() {
        let current = value("\"abc\"");
        assert!(names(&value("\"abc\""), &current));
        assert!(names(&value("\"x\", W/\"abc\""), &current));
        assert!(names(&value("*"), &current));
        assert!(!names(&value("\"abd\""), &current));
        assert!(!names(&value("abc"), &current), "tags are quoted");
    }
}
