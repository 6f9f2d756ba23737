//! Cross-origin reads: web pages on other origins may call the read API
//! (and open its live stream) from a browser. Only GET and HEAD, with
//! `x-api-key`, `Accept-Signature` and the conditional and resume headers
//! allowed; the rate-limit headers, `Retry-After`, `ETag` and a signed
//! answer's fields readable by the page;
//! preflights cached for ten minutes. Publisher and operator endpoints
//! (ingest, and this process's operator listener) send no CORS headers.
//!
//! The policy is tower-http's [`CorsLayer`]. The read API's routes take it
//! as [`Cors`]: what the layer adds to the answer of a request without
//! `Origin` (nearly every request: clients other than browsers) is the
//! same for every such answer, so it is made once, by the layer, and
//! copied; a browser's request goes through the layer itself.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use axum::response::Response;
use futures_util::future::Either;
use futures_util::FutureExt;
use tower::{Layer, Service, ServiceExt};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Which origins may read.
#[derive(Debug, Clone)]
pub enum Origins {
    Any,
    Only(Vec<HeaderValue>),
}

pub fn parse_origins(text: &str) -> Result<Origins, String> {
    let text = text.trim();
    if text == "*" {
        return Ok(Origins::Any);
    }
    let origins: Vec<HeaderValue> = text
        .split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(|origin| {
            let host = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            match host {
                Some(host) if !host.is_empty() && !host.contains(['/', ' ']) => {
                    HeaderValue::from_str(origin)
                        .map_err(|_| format!("{origin:?} is not a valid origin"))
                }
                _ => Err(format!(
                    "{origin:?} is not an origin such as https://rates.example (scheme and host, no path)"
                )),
            }
        })
        .collect::<Result<_, _>>()?;
    if origins.is_empty() {
        return Err("give `*` or at least one origin".into());
    }
    Ok(Origins::Only(origins))
}

pub fn layer(origins: &Origins) -> CorsLayer {
    let allow = match origins {
        Origins::Any => AllowOrigin::any(),
        Origins::Only(list) => AllowOrigin::list(list.clone()),
    };
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::HEAD, Method::POST, Method::DELETE])
        .allow_headers([
            HeaderName::from_static(crate::access::keys::API_KEY_HEADER),
            header::IF_NONE_MATCH,
            HeaderName::from_static("last-event-id"),
            header::ACCEPT,
            header::CONTENT_TYPE,
            header::CACHE_CONTROL,
            HeaderName::from_static("accept-signature"),
        ])
        .expose_headers([
            HeaderName::from_static("x-ratelimit-limit"),
            HeaderName::from_static("x-ratelimit-remaining"),
            HeaderName::from_static("x-ratelimit-reset"),
            HeaderName::from_static("ratelimit-policy"),
            HeaderName::from_static("ratelimit"),
            header::RETRY_AFTER,
            header::ETAG,
            header::LINK,
            HeaderName::from_static("content-digest"),
            HeaderName::from_static("signature-input"),
            HeaderName::from_static("signature"),
        ])
        .max_age(Duration::from_secs(600))
}

/// [`layer`] for the read API's routes (see the module docs): a browser's
/// request goes through the layer; any other is passed on, and its answer
/// given what the layer would add ([`Plain`]).
#[derive(Clone)]
pub struct Cors {
    layer: Arc<CorsLayer>,
    /// What `layer` adds to an answer to a request without `Origin`.
    plain: Arc<HeaderMap>,
}

impl Cors {
    pub fn new(origins: &Origins) -> Self {
        let layer = self::layer(origins);
        let answered = layer
            .layer(tower::service_fn(|_: Request| async {
                Ok::<_, Infallible>(Response::new(axum::body::Body::empty()))
            }))
            .oneshot(Request::default())
            .now_or_never()
            .expect("the layer answers a plain request at once");
        let plain = match answered {
            Ok(response) => response.into_parts().0.headers,
        };
        Self {
            layer: Arc::new(layer),
            plain: Arc::new(plain),
        }
    }

    /// Whether `request` is one the layer answers differently from a
    /// plain one: a browser's (with `Origin`), or a preflight.
    fn from_browser(request: &Request) -> bool {
        request.method() == Method::OPTIONS || request.headers().contains_key(header::ORIGIN)
    }
}

/// Adds `plain` to `response` as the layer applies its headers: `Vary` is
/// added to the answer's, the others replace the answer's own.
fn add_plain(plain: &HeaderMap, response: &mut Response) {
    let headers = response.headers_mut();
    for (name, value) in plain.iter() {
        if name == header::VARY {
            headers.append(name, value.clone());
        } else {
            headers.insert(name, value.clone());
        }
    }
}

impl<S> Layer<S> for Cors {
    type Service = WithCors<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WithCors {
            cors: self.clone(),
            inner,
        }
    }
}

/// A route with [`Cors`].
#[derive(Clone)]
pub struct WithCors<S> {
    cors: Cors,
    inner: S,
}

impl<S> Service<Request> for WithCors<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Plain<S::Future>, tower_http::cors::ResponseFuture<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if Cors::from_browser(&request) {
            let inner = self.inner.clone();
            let inner = std::mem::replace(&mut self.inner, inner);
            Either::Right(self.cors.layer.layer(inner).call(request))
        } else {
            Either::Left(Plain {
                answer: self.inner.call(request),
                plain: Arc::clone(&self.cors.plain),
            })
        }
    }
}

/// The answer to a request without `Origin`, given what the layer would
/// add to it.
pub struct Plain<F> {
    answer: F,
    plain: Arc<HeaderMap>,
}

impl<F> Future for Plain<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(mut response) = ready!(Pin::new(&mut self.answer).poll(cx));
        add_plain(&self.plain, &mut response);
        Poll::Ready(Ok(response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer with a `Vary` of its own, as lists have.
    fn answered() -> Response {
        let mut response = Response::new(axum::body::Body::empty());
        response
            .headers_mut()
            .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        response
    }

    #[tokio::test]
    async fn a_plain_request_gets_what_the_layer_would_add() {
        for origins in ["*", "https://a.example, http://localhost:3000"] {
            let origins = parse_origins(origins).unwrap();
            let Ok(via_layer) = layer(&origins)
                .layer(tower::service_fn(|_: Request| async {
                    Ok::<_, Infallible>(answered())
                }))
                .oneshot(Request::default())
                .await;
            let mut copied = answered();
            add_plain(&Cors::new(&origins).plain, &mut copied);
            assert_eq!(copied.headers(), via_layer.headers(), "{origins:?}");
        }
    }

    #[test]
    fn origins_are_any_or_a_list_of_scheme_and_host() {
        assert!(matches!(parse_origins("*"), Ok(Origins::Any)));
        let Ok(Origins::Only(list)) = parse_origins("https://a.example, http://localhost:3000")
        else {
            panic!("a list");
        };
        assert_eq!(list.len(), 2);
        assert!(parse_origins("a.example").is_err());
        assert!(parse_origins("https://a.example/path").is_err());
        assert!(parse_origins(" , ").is_err());
    }
}
