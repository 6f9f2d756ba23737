//! Answers' bodies: a ready-made JSON body, and /rates and /banks bodies
//! made of stored views, sent without copying them.
//!
//! A view read from Redis is shared by every request that read it in the
//! same round trip. Building each response as one new string copied the
//! whole view again per request (8 KB for one bank, 400 KB for the list of
//! fifty); here the envelope's head and tail are static and the view is
//! passed on as it is, so hyper writes the three parts with one vectored
//! write.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use http_body::{Frame, SizeHint};
use ratewire_readmodel::views::{LIST_HEAD, LIST_TAIL};

/// The headers a read's answer carries: type, tag, caching, `Vary`, the
/// three limit headers, two CORS headers and the request id, and room for
/// `Content-Encoding` and `Retry-After`.
const ANSWER_HEADERS: usize = 12;

/// A ready-made JSON body, sent as it is (a string, a stored view, or the
/// parts of [`json_list`]).
pub fn json_body(body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    // Room for every header a read's answer gets, made at once: a header
    // map starts with room for six, and would grow on each answer, its
    // table rebuilt (docs/benchmarks.md).
    response.headers_mut().reserve(ANSWER_HEADERS);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A CSV body, sent as it is.
pub fn csv_body(body: String) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    response
}

/// Whether `Accept` prefers CSV to JSON (for reads answered in either).
pub fn wants_csv(headers: &HeaderMap) -> bool {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    accept.contains("text/csv") && !accept.contains("application/json")
}

/// A `Link` header naming `next` as the next page.
pub fn next_page_link(next: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("<{next}>; rel=\"next\"")).ok()
}

/// Comma-joined elements inside the list envelope.
pub fn json_list(elements: Bytes) -> Response {
    json_body(Body::new(Parts {
        remaining: (LIST_HEAD.len() + elements.len() + LIST_TAIL.len()) as u64,
        parts: [
            Bytes::from_static(LIST_HEAD.as_bytes()),
            elements,
            Bytes::from_static(LIST_TAIL.as_bytes()),
        ],
        next: 0,
    }))
}

/// A body of a few parts whose total length is known (so it is sent with a
/// Content-Length, not chunked).
struct Parts {
    parts: [Bytes; 3],
    next: usize,
    remaining: u64,
}

impl http_body::Body for Parts {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        while let Some(part) = this.parts.get_mut(this.next) {
            this.next += 1;
            let part = std::mem::take(part);
            if !part.is_empty() {
                this.remaining -= part.len() as u64;
                return Poll::Ready(Some(Ok(Frame::data(part))));
            }
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn sent(response: Response) -> String {
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        String::from_utf8(body.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_list_is_the_envelope_around_the_elements_with_its_exact_length() {
        let elements = Bytes::from_static(br#"{"id":1},{"id":2}"#);
        let response = json_list(elements);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        // Sent with a Content-Length: hyper takes it from an exact size.
        let head_tail = (LIST_HEAD.len() + LIST_TAIL.len()) as u64;
        assert_eq!(
            http_body::Body::size_hint(response.body()).exact(),
            Some(head_tail + 17)
        );
        let body = sent(response).await;
        assert_eq!(
            body,
            ratewire_readmodel::views::list_response(r#"{"id":1},{"id":2}"#)
        );
        let empty = sent(json_list(Bytes::new())).await;
        assert_eq!(empty, ratewire_readmodel::views::list_response(""));
    }
}
