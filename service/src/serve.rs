//! Serving HTTP: every listener of every process is started here, so what
//! all of them need (request ids, the request span, request metrics, the
//! peer address, graceful shutdown) is added once, and so are the limits a
//! listener facing the internet must have ([`ListenerLimits`]):
//!
//! - a request's headers must arrive within the header timeout, counted
//!   from when the connection is ready for a request (accepted, or its
//!   previous response sent): slow-header clients and idle keep-alive
//!   connections are closed alike (hyper's header read timer);
//! - a request head larger than the cap gets 431 and the connection closes
//!   (hyper's read buffer limit), so a client cannot make us buffer more;
//! - a response that is not ready within the request timeout is answered
//!   503 (a slow dependency must not pin connections);
//! - each listener holds at most so many connections; further clients wait
//!   in the kernel's accept backlog until one closes;
//! - a write the client does not take within the write timeout closes the
//!   connection: a client that stops reading (a live stream it no longer
//!   drains, a large answer it never takes) does not hold a connection and
//!   its buffers for ever.
//!
//! HTTP/1.1 only: TLS and HTTP/2 end at the ingress in front of us, and
//! HTTP/1.1 is the protocol these limits are proven for.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, MatchedPath, Request};
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service};
use tracing::{debug, warn, Instrument};

use crate::error::{Error, Result};
use crate::http_metrics;
use crate::traces::{self, TraceContext};

/// The limits every listener enforces against slow or greedy clients
/// (docs/security.md says what each protects).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ListenerLimits {
    /// Seconds a connection may take to send a request's headers, counted
    /// from when it is ready for one (accepted, or its previous response
    /// sent): slow-header clients and idle keep-alive connections are
    /// closed after it.
    #[arg(long = "http-header-timeout-secs", env = "RATEWIRE_HTTP_HEADER_TIMEOUT_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub header_timeout_secs: u64,
    /// Largest request head (request line and headers), in bytes; a larger
    /// one gets 431 and the connection is closed. At least 8192.
    #[arg(long = "http-max-header-bytes", env = "RATEWIRE_HTTP_MAX_HEADER_BYTES", default_value_t = 16_384, value_parser = clap::value_parser!(u64).range(8_192..=1_048_576))]
    pub max_header_bytes: u64,
    /// Seconds from a request's headers to its response; a request not
    /// answered by then gets 503 with Retry-After.
    #[arg(long = "http-request-timeout-secs", env = "RATEWIRE_HTTP_REQUEST_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub request_timeout_secs: u64,
    /// Most connections each listener holds open at once; further clients
    /// wait in the kernel's backlog until one closes (raise it for many
    /// live-stream subscribers: each holds a connection).
    #[arg(long = "http-max-connections", env = "RATEWIRE_HTTP_MAX_CONNECTIONS", default_value_t = 1_024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Seconds a write to a client may wait for it to take the bytes; a
    /// client that stops reading is disconnected after it.
    #[arg(long = "http-write-timeout-secs", env = "RATEWIRE_HTTP_WRITE_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub write_timeout_secs: u64,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        Self {
            header_timeout_secs: 10,
            max_header_bytes: 16_384,
            request_timeout_secs: 30,
            max_connections: 1_024,
            write_timeout_secs: 30,
        }
    }
}

/// A bound listener, not yet served: a process binds at build time, so a
/// taken port fails start at once and tests learn the port before serving.
#[derive(Debug)]
pub struct Listener(TcpListener);

/// Connections the kernel completes and queues for us before we accept
/// them (it caps this at `net.core.somaxconn`). The usual 128 made a burst
/// of clients retry their handshakes a second later.
const ACCEPT_BACKLOG: u32 = 4_096;

impl Listener {
    /// Binds `addr` (port 0 picks a free one, as tests do).
    pub async fn bind(addr: SocketAddr) -> Result<Self> {
        let bind = || {
            let socket = match addr {
                SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
            };
            // As std and tokio do: a restart may bind while old
            // connections linger in TIME_WAIT.
            socket.set_reuseaddr(true)?;
            socket.bind(addr)?;
            socket.listen(ACCEPT_BACKLOG)
        };
        bind()
            .map(Listener)
            .map_err(|source| Error::Bind { addr, source })
    }

    pub fn port(&self) -> u16 {
        self.addr().map(|a| a.port()).unwrap_or_default()
    }

    /// The address actually bound (`None` only if the OS cannot say).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.0.local_addr().ok()
    }
}

/// A process's two listeners: the public one (what the public may call,
/// and the probes) and the operator one (operator endpoints, `/metrics`,
/// the probes), which must stay off public networks.
#[derive(Debug)]
pub struct Listeners {
    pub public: Listener,
    pub operator: Listener,
}

impl Listeners {
    pub async fn bind(public: SocketAddr, operator: SocketAddr) -> Result<Self> {
        Ok(Self {
            public: Listener::bind(public).await?,
            operator: Listener::bind(operator).await?,
        })
    }

    /// Serves each router on its listener, both with `limits` (each
    /// listener its own connection cap, so a flood on the public one never
    /// locks operators out).
    pub fn serve(
        self,
        public: Router,
        operator: Router,
        limits: ListenerLimits,
        shutdown: &CancellationToken,
    ) -> Servers {
        let public = public.layer(Measure::new(&limits));
        self.serve_measured(public, operator, limits, shutdown)
    }

    /// [`Listeners::serve`], for a public router each of whose routes has
    /// [`Measure`] already, composed with the route's own layers into one
    /// (each layer a route is given boxes it once more, and every request
    /// clones each box: a read API's hottest routes keep to one).
    pub fn serve_measured(
        self,
        public: Router,
        operator: Router,
        limits: ListenerLimits,
        shutdown: &CancellationToken,
    ) -> Servers {
        Servers([
            serve_measured(self.public, "public", public, limits, shutdown.clone()),
            serve(
                self.operator,
                "operator",
                operator,
                limits,
                shutdown.clone(),
            ),
        ])
    }
}

/// The servers of a process's [`Listeners`].
pub struct Servers([Server; 2]);

impl Servers {
    /// Waits until both have stopped.
    pub async fn stopped(self) -> Result<()> {
        let [public, operator] = self.0;
        let public = public.stopped().await;
        operator.stopped().await.and(public)
    }
}

/// A server running in a task of its own.
pub struct Server {
    task: JoinHandle<()>,
}

impl Server {
    /// Waits until the server has stopped (after shutdown, once in-flight
    /// requests were answered).
    pub async fn stopped(self) -> Result<()> {
        Ok(self.task.await?)
    }
}

/// Serves `router` on `listener` until `shutdown`, then finishes the
/// requests in flight. `name` labels the listener in logs and metrics
/// (`public`, `operator`, `health`). Handlers may take
/// `ConnectInfo<SocketAddr>`.
///
/// Every request gets an `x-request-id` (kept when the client sent one,
/// echoed in the response), a `request` span carrying it (with an empty
/// `key` field for processes that identify callers: the key's public
/// prefix, never the key), the request timeout, and its count and duration
/// in [`http_metrics`].
///
/// The request id and the span wrap the router once (`Scoped`). Only
/// what needs the matched route (the metrics' label) is a layer of each
/// route ([`Measure`]), and the timeout with it: `Router::layer` boxes
/// each route once more per layer, and each box is cloned on every
/// request. (tower-http's request-id and trace layers did the work of
/// `Scoped` in three layers, each with its own future and, for the ids,
/// an extension on the request and one on the answer: more than a kept
/// view's answer costs.)
pub fn serve(
    listener: Listener,
    name: &'static str,
    router: Router,
    limits: ListenerLimits,
    shutdown: CancellationToken,
) -> Server {
    let router = router.layer(Measure::new(&limits));
    serve_measured(listener, name, router, limits, shutdown)
}

/// [`serve`], for a router each of whose routes has [`Measure`] already.
pub fn serve_measured(
    listener: Listener,
    name: &'static str,
    router: Router,
    limits: ListenerLimits,
    shutdown: CancellationToken,
) -> Server {
    let app = Scoped { inner: router };
    let task = tokio::spawn(accept(listener.0, name, app, limits, shutdown));
    Server { task }
}

/// Every request in its span, with its id: the caller's `x-request-id`,
/// or a new UUID; the answer carries it.
#[derive(Debug, Clone)]
struct Scoped<S> {
    inner: S,
}

impl<S> Service<Request> for Scoped<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = std::result::Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let id = match request.headers().get(REQUEST_ID) {
            Some(id) => id.clone(),
            None => new_request_id(),
        };
        let span = request_span(&request, &id);
        let started = Instant::now();
        let answer = span.in_scope(|| self.inner.call(request));
        Box::pin(
            async move {
                let Ok(mut response) = answer.await;
                debug!(latency = ?started.elapsed(), status = response.status().as_u16(), "finished processing request");
                response.headers_mut().insert(REQUEST_ID, id);
                Ok(response)
            }
            .instrument(span),
        )
    }
}

/// A new request's id: a random UUID, written without the formatting
/// machinery.
fn new_request_id() -> HeaderValue {
    let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
    let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut text);
    HeaderValue::from_str(text).expect("a UUID is a valid header value")
}

/// What every route has as (the outermost part of) its own layer: its
/// requests counted and timed in [`http_metrics`] under its pattern, each
/// answered 503 when not ready within the request timeout.
#[derive(Debug, Clone, Copy)]
pub struct Measure {
    timeout: Duration,
}

impl Measure {
    pub fn new(limits: &ListenerLimits) -> Self {
        Self {
            timeout: Duration::from_secs(limits.request_timeout_secs),
        }
    }
}

impl<S> Layer<S> for Measure {
    type Service = Measured<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Measured {
            inner,
            timeout: self.timeout,
        }
    }
}

/// A route with [`Measure`].
#[derive(Debug, Clone)]
pub struct Measured<S> {
    inner: S,
    timeout: Duration,
}

impl<S> Service<Request> for Measured<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = std::result::Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let route = request.extensions().get::<MatchedPath>().cloned();
        let method = request.method().clone();
        let started = Instant::now();
        let answer = tokio::time::timeout(self.timeout, self.inner.call(request));
        Box::pin(async move {
            let response = match answer.await {
                Ok(Ok(response)) => response,
                Err(_) => not_in_time(),
            };
            let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
            let status = response.status().as_u16();
            http_metrics::record(route, &method, status, started.elapsed());
            Ok(response)
        })
    }
}

/// The span every request is handled in. With traces on, it continues
/// the caller's W3C trace context (`traceparent`), so a publisher's or a
/// reader's trace goes on in ours.
fn request_span(request: &Request, id: &HeaderValue) -> tracing::Span {
    let request_id = id.to_str().unwrap_or_default();
    let span = tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id, key = tracing::field::Empty);
    if traces::enabled() {
        let headers = request.headers();
        let caller = if crate::readiness::is_probe(request.uri().path()) {
            Some(TraceContext::untraced())
        } else {
            TraceContext::from_headers(|name| headers.get(name)?.to_str().ok())
        };
        if let Some(caller) = caller {
            caller.continue_in(&span);
        }
    }
    span
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The answer to a request whose response was not ready in time.
fn not_in_time() -> Response {
    let body = serde_json::json!({"status": 503, "message": "Service Unavailable"});
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Accepts connections until shutdown, at most `max_connections` at once,
/// then waits for those open to finish their requests.
async fn accept<A>(
    listener: TcpListener,
    name: &'static str,
    app: A,
    limits: ListenerLimits,
    shutdown: CancellationToken,
) where
    A: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    A::Future: Send + 'static,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(limits.header_timeout_secs))
        .max_buf_size(limits.max_header_bytes as usize);
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let open = metrics::gauge!("ratewire_http_open_connections", "listener" => name);
    let full =
        metrics::counter!("ratewire_http_connection_limit_reached_total", "listener" => name);
    let graceful = GracefulShutdown::new();
    loop {
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                full.increment(1);
                warn!(
                    listener = name,
                    limit = limits.max_connections,
                    "connection limit reached; new clients wait"
                );
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    slot = Arc::clone(&slots).acquire_owned() => slot.expect("the semaphore is never closed"),
                }
            }
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off
                    // instead of spinning; the listener itself stays good.
                    warn!(listener = name, error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Responses are written whole per flush; a stream's events must
        // not wait for the client's delayed ACK of the previous one.
        if let Err(e) = stream.set_nodelay(true) {
            debug!(listener = name, %peer, error = %e, "could not set TCP_NODELAY");
        }
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let request = request.map(axum::body::Body::new);
            // Always ready, and cheap to clone (the router is one Arc).
            app.clone().call(request)
        });
        let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
        stream.set_write_timeout(Some(Duration::from_secs(limits.write_timeout_secs)));
        let connection =
            graceful.watch(http.serve_connection(TokioIo::new(Box::pin(stream)), service));
        let open = open.clone();
        open.increment(1.0);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                // Timeouts and clients that went away: routine at this level.
                debug!(listener = name, %peer, error = %e, "connection ended with an error");
            }
            open.decrement(1.0);
            drop(slot);
        });
    }
    // Closed at once, so new clients are refused (and go to another
    // instance) instead of queueing for a process that is leaving.
    drop(listener);
    graceful.shutdown().await;
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    fn app(timeout: Duration) -> Scoped<Router> {
        let router = Router::new()
            .route("/slow", get(std::future::pending::<&'static str>))
            .route("/fast", get(|| async { "ok" }))
            .layer(Measure { timeout });
        Scoped { inner: router }
    }

    async fn get_with(path: &str, id: Option<&str>) -> Response {
        let mut request = Request::get(path);
        if let Some(id) = id {
            request = request.header(REQUEST_ID, id);
        }
        let request = request.body(Body::empty()).unwrap();
        let Ok(response) = app(Duration::from_secs(1)).oneshot(request).await;
        response
    }

    #[tokio::test(start_paused = true)]
    async fn a_route_not_answering_within_the_timeout_gets_503_with_retry_after() {
        let response = get_with("/slow", None).await;
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[RETRY_AFTER], "1");
        assert_eq!(response.headers()[REQUEST_ID].len(), 36, "a new UUID");
    }

    #[tokio::test]
    async fn every_answer_carries_the_callers_request_id_or_a_new_one() {
        let given = get_with("/fast", Some("trace-me-42")).await;
        assert_eq!(given.status(), StatusCode::OK);
        assert_eq!(given.headers()[REQUEST_ID], "trace-me-42");
        let unknown = get_with("/nowhere", None).await;
        assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
        let id = unknown.headers()[REQUEST_ID].to_str().unwrap();
        assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    }
}
