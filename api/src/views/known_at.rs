//! Answers as known at a past instant (`asKnownAt=T`).
//!
//! Such an answer is the one the same request would have had at `T` had
//! every event acknowledged by then been folded: the same renderer as the
//! live answer, fed from Postgres in one read-only snapshot of the model as
//! known at `T` (`store::begin_known_at`), with `T` as the render's "now"
//! (ages, staleness, windows, days to come). Redis and the caches that
//! follow the present are never asked: they hold the present only.
//!
//! Once every partition's fold has passed `T`, nothing can change the
//! answer any more: it is final, served `immutable` with a strong `ETag`,
//! and kept in this process ([`FinalAnswers`]), bounded by bytes. Until
//! then it is answered like a live one (`no-cache`), and rendered afresh.
//!
//! The live path pays nothing for this: a request without `asKnownAt`
//! never reaches this module (its handler branches on its parsed query),
//! and [`KnownAtRequest`] looks no further than its query string.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};
use ratewire_readmodel::store;
use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use crate::error::Result;
use crate::query::{KnownAt, Params};
use crate::views::body::json_body;
use crate::views::read_model::ReadModel;

/// The query parameter.
pub const AS_KNOWN_AT: &str = "asKnownAt";

/// What a final answer is served with: it never changes.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The most bytes of final answers kept in one process.
const MOST_BYTES: u64 = 64 * 1024 * 1024;

/// A final answer as kept: what is sent, every time.
#[derive(Debug)]
pub struct FinalAnswer {
    body: Bytes,
    content_type: HeaderValue,
    etag: HeaderValue,
    link: Option<HeaderValue>,
}

/// Final answers, by their normalized request (see [`KnownAtRequest`]).
#[derive(Clone)]
pub struct FinalAnswers(moka::sync::Cache<String, Arc<FinalAnswer>>);

impl Default for FinalAnswers {
    fn default() -> Self {
        Self(
            moka::sync::Cache::builder()
                .max_capacity(MOST_BYTES)
                .weigher(|key: &String, answer: &Arc<FinalAnswer>| {
                    u32::try_from(key.len() + answer.body.len()).unwrap_or(u32::MAX)
                })
                .build(),
        )
    }
}

/// What an answer as known at an instant needs of its request besides its
/// query: the request, normalized (path and sorted parameters, the API key
/// left out: an answer is the same for every caller), and `If-None-Match`.
/// `None` for a request without `asKnownAt` (read from the query string
/// alone, nothing copied).
pub struct KnownAtRequest(Option<Asked>);

struct Asked {
    normalized: String,
    if_none_match: Option<HeaderValue>,
}

impl<S: Send + Sync> FromRequestParts<S> for KnownAtRequest {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _: &S,
    ) -> std::result::Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        if !query.contains(AS_KNOWN_AT) {
            return Ok(Self(None));
        }
        Ok(Self(Some(Asked {
            normalized: normalized(parts.uri.path(), query),
            if_none_match: parts.headers.get(header::IF_NONE_MATCH).cloned(),
        })))
    }
}

/// `path` and its parameters in name order (the first of a repeated one,
/// as the parsing takes it), `asKnownAt` to the millisecond, and without
/// `apiKey`: two requests for the same answer are one key.
fn normalized(path: &str, query: &str) -> String {
    let mut pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    pairs.retain(|(name, _)| name != "apiKey");
    // Stable: the first of a repeated name stays first.
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs.dedup_by(|later, first| later.0 == first.0);
    for (name, value) in &mut pairs {
        if name == AS_KNOWN_AT {
            if let Ok(at) = DateTime::parse_from_rfc3339(value) {
                *value = KnownAt::truncated(at.with_timezone(&Utc)).to_string();
            }
        }
    }
    let query = serde_urlencoded::to_string(&pairs).unwrap_or_default();
    format!("{path}?{query}")
}

/// Whether `query` gives `asKnownAt` at all (well formed or not).
pub fn asks_known_at(query: Option<&str>) -> bool {
    Params::parse(query).is_ok_and(|params| params.first(AS_KNOWN_AT).is_some())
}

/// An answer rendered as known at an instant, before the envelope names
/// the instant.
pub enum Rendered {
    /// A JSON object: its envelope gains `"asKnownAt"`.
    Json(String),
    /// CSV (no envelope).
    Csv(String),
}

/// A read as known at an instant under way: its snapshot, and whether its
/// answer will be final.
pub struct KnownAtRead {
    tx: Transaction<'static, Postgres>,
    at: KnownAt,
    is_final: bool,
    key: Option<String>,
    if_none_match: Option<HeaderValue>,
    answers: FinalAnswers,
}

/// How a read as known at an instant starts: the final answer, kept, or a
/// snapshot to render it from.
pub enum Begun {
    Kept(Response),
    Reading(KnownAtRead),
}

impl KnownAtRead {
    /// Starts a read of `pool`'s model as known at `at` for `request`, or
    /// answers with the final answer kept for it. `variant` names what
    /// else the answer depends on (e.g. the format `Accept` chose);
    /// `model` names the read-model generation.
    pub async fn begin(
        answers: &FinalAnswers,
        pool: &PgPool,
        model: &str,
        request: KnownAtRequest,
        variant: &str,
        at: KnownAt,
    ) -> Result<Begun> {
        // A query that hides its `asKnownAt` from the extractor (a
        // percent-encoded name) is answered, but never kept: it has no key.
        let (key, if_none_match) = match request.0 {
            Some(Asked {
                normalized,
                if_none_match,
            }) => (
                Some(format!("{model}|{variant}|{normalized}")),
                if_none_match,
            ),
            None => (None, None),
        };
        if let Some(kept) = key.as_ref().and_then(|key| answers.0.get(key)) {
            return Ok(Begun::Kept(respond(&kept, true, if_none_match.as_ref())));
        }
        let mut tx = store::begin_known_at(pool, at.instant()).await?;
        // In the answer's own snapshot: final means the rows read are all
        // there will ever be as known at `at`.
        let is_final = store::known_at_final(&mut *tx, at.instant()).await?;
        Ok(Begun::Reading(Self {
            tx,
            at,
            is_final,
            key,
            if_none_match,
            answers: answers.clone(),
        }))
    }

    /// The snapshot to read from.
    pub fn db(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    /// The render's "now".
    pub fn now(&self) -> DateTime<Utc> {
        self.at.instant()
    }

    pub fn at(&self) -> KnownAt {
        self.at
    }

    /// The answer made of `rendered` (with `link` as its `Link` header):
    /// the instant in its envelope, a strong `ETag` of its bytes, and,
    /// when final, `immutable` and kept.
    pub async fn answer(self, rendered: Rendered, link: Option<HeaderValue>) -> Result<Response> {
        let Self {
            tx,
            at,
            is_final,
            key,
            if_none_match,
            answers,
        } = self;
        // Read only: nothing to keep.
        tx.rollback().await?;
        let (body, content_type) = match rendered {
            Rendered::Json(body) => (with_instant(body, at), "application/json"),
            Rendered::Csv(body) => (body, "text/csv; charset=utf-8"),
        };
        let etag = format!("\"{}\"", ratewire_readmodel::views::digest(&body));
        let answer = FinalAnswer {
            body: Bytes::from(body),
            content_type: HeaderValue::from_static(content_type),
            etag: HeaderValue::from_str(&etag).expect("hex digits in quotes"),
            link,
        };
        let response = respond(&answer, is_final, if_none_match.as_ref());
        if let (true, Some(key)) = (is_final, key) {
            answers.0.insert(key, Arc::new(answer));
        }
        Ok(response)
    }
}

impl super::Views {
    /// [`KnownAtRead::begin`] on `pool` (of generation `model`), with the
    /// final answers kept here.
    pub async fn known_at(
        &self,
        model: &ReadModel,
        pool: &PgPool,
        request: KnownAtRequest,
        variant: &str,
        at: KnownAt,
    ) -> Result<Begun> {
        let generation = &model.generation;
        let model = format!("{}:{}", generation.schema, generation.identity);
        KnownAtRead::begin(
            &self.fallbacks.final_answers,
            pool,
            &model,
            request,
            variant,
            at,
        )
        .await
    }
}

/// `body` (a JSON object) with `"asKnownAt"` as its last member.
fn with_instant(mut body: String, at: KnownAt) -> String {
    if body.ends_with('}') {
        body.pop();
        body.push_str(&format!(r#","{AS_KNOWN_AT}":"{at}"}}"#));
    }
    body
}

/// `answer` as sent: a final one `immutable`, and 304 when the client's
/// copy is it (answered here: the conditional layer would mark it
/// `no-cache`). One not final is left to the conditional layer, as a live
/// answer.
fn respond(answer: &FinalAnswer, is_final: bool, if_none_match: Option<&HeaderValue>) -> Response {
    let mut response = json_body(answer.body.clone());
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, answer.content_type.clone());
    headers.insert(header::ETAG, answer.etag.clone());
    if let Some(link) = &answer.link {
        headers.insert(header::LINK, link.clone());
    }
    if !is_final {
        return response;
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(IMMUTABLE));
    if if_none_match.is_some_and(|wanted| names(wanted, &answer.etag)) {
        let (mut parts, _) = response.into_parts();
        parts.status = StatusCode::NOT_MODIFIED;
        for gone in [header::CONTENT_TYPE, header::CONTENT_LENGTH] {
            parts.headers.remove::<HeaderName>(gone);
        }
        return Response::from_parts(parts, axum::body::Body::empty());
    }
    response
}

/// Whether `If-None-Match` names `current` (weak comparison, as RFC 9110
/// asks of this header; `*` names any).
fn names(if_none_match: &HeaderValue, current: &HeaderValue) -> bool {
    let Ok(wanted) = if_none_match.to_str() else {
        return false;
    };
    let opaque = |tag: &str| tag.strip_prefix("W/").unwrap_or(tag).to_owned();
    let current = opaque(current.to_str().unwrap_or_default());
    wanted
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || opaque(tag) == current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> KnownAt {
        KnownAt::truncated(s.parse().unwrap())
    }

    #[test]
    fn the_envelope_names_the_instant_last() {
        assert_eq!(
            with_instant(
                r#"{"message":"success","status":200,"data":[]}"#.to_owned(),
                at("2026-11-23T08:00:00.1234Z")
            ),
            r#"{"message":"success","status":200,"data":[],"asKnownAt":"2026-11-23T08:00:00.123Z"}"#
        );
    }

    #[test]
    fn a_request_is_kept_under_its_sorted_parameters_without_the_api_key() {
        assert_eq!(
            normalized(
                "/api/v1/rates",
                "transactional=1&asKnownAt=2026-11-23T11:00:00.5%2B03:00&bankId=2&apiKey=k&bankId=3"
            ),
            "/api/v1/rates?asKnownAt=2026-11-23T08%3A00%3A00.500Z&bankId=2&transactional=1"
        );
        assert_eq!(
            normalized(
                "/api/v1/rates",
                "bankId=2&asKnownAt=2026-11-23T08:00:00.500999Z"
            ),
            normalized("/api/v1/rates", "asKnownAt=2026-11-23T08:00:00.5Z&bankId=2"),
            "the same millisecond"
        );
    }

    fn answer() -> FinalAnswer {
        FinalAnswer {
            body: Bytes::from_static(b"{}"),
            content_type: HeaderValue::from_static("application/json"),
            etag: HeaderValue::from_static("\"abc\""),
            link: None,
        }
    }

    #[test]
    fn a_final_answer_is_immutable_and_304_when_the_client_has_it() {
        let sent = respond(&answer(), true, None);
        assert_eq!(sent.status(), StatusCode::OK);
        assert_eq!(sent.headers()[header::CACHE_CONTROL], IMMUTABLE);
        assert_eq!(sent.headers()[header::ETAG], "\"abc\"");
        let has = HeaderValue::from_static("\"x\", \"abc\"");
        let again = respond(&answer(), true, Some(&has));
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(again.headers()[header::CACHE_CONTROL], IMMUTABLE);
        assert!(again.headers().get(header::CONTENT_TYPE).is_none());
    }

    #[test]
    fn an_answer_not_final_is_never_immutable() {
        let has = HeaderValue::from_static("\"abc\"");
        let sent = respond(&answer(), false, Some(&has));
        assert_eq!(
            sent.status(),
            StatusCode::OK,
            "the conditional layer decides"
        );
        assert!(sent.headers().get(header::CACHE_CONTROL).is_none());
        assert_eq!(sent.headers()[header::ETAG], "\"abc\"");
    }

    #[test]
    fn only_a_query_with_as_known_at_asks_for_it() {
        assert!(asks_known_at(Some("from=USD&asKnownAt=x")));
        assert!(!asks_known_at(Some("from=USD&to=ETB")));
        assert!(!asks_known_at(None));
    }
}
