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
//!
//! A listener may also have a [`Shortcut`]: a way around the router for the
//! few requests a process answers most, tried first. The router's layers
//! (each a clone of the service below it and a boxed future, per request)
//! cost more than answering a kept view; a shortcut's answer gets the same
//! request id, span, metrics and timeout here, without them.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::ConnectInfo;
use axum::extract::Request;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{BoxError, Json, Router};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower::{Service, ServiceBuilder};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tracing::{debug, warn, Instrument};

use crate::error::{Error, Result};
use crate::http_metrics;

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
    /// wait in the kernel's backlog until one closes.
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
        self.serve_with(public, NoShortcut, operator, limits, shutdown)
    }

    /// [`Listeners::serve`], the public listener trying `shortcut` before
    /// its router.
    pub fn serve_with<S: Shortcut>(
        self,
        public: Router,
        shortcut: S,
        operator: Router,
        limits: ListenerLimits,
        shutdown: &CancellationToken,
    ) -> Servers {
        Servers([
            serve_with(
                self.public,
                "public",
                public,
                shortcut,
                limits,
                shutdown.clone(),
            ),
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

/// A way around a listener's router: the requests it can answer are
/// answered without the router's layers, the others handed back to the
/// router untouched (but for the `x-request-id` the listener gives every
/// request). Its answers must be the router's for the same request; the
/// listener adds what its layers would: the request id on the response,
/// the `request` span, the request metrics, the request timeout.
pub trait Shortcut: Clone + Send + Sync + 'static {
    /// Whether `request` may be one [`Shortcut::answer`] answers (a cheap
    /// look at its method and path): the others go to the router at once.
    fn may_answer(&self, request: &Request) -> bool;

    /// The answer to `request` with its route pattern (the metrics' `route`
    /// label), or the request back for the router.
    fn answer(
        &self,
        request: Request,
    ) -> impl Future<Output = std::result::Result<Answered, Request>> + Send;
}

/// A [`Shortcut`]'s answer.
pub struct Answered {
    /// The route pattern the router would have matched.
    pub route: &'static str,
    pub response: Response,
}

/// No way around the router.
#[derive(Debug, Clone, Copy)]
pub struct NoShortcut;

impl Shortcut for NoShortcut {
    fn may_answer(&self, _: &Request) -> bool {
        false
    }

    async fn answer(&self, request: Request) -> std::result::Result<Answered, Request> {
        Err(request)
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
/// prefix, never the key) and its count and duration in
/// [`http_metrics`].
pub fn serve(
    listener: Listener,
    name: &'static str,
    router: Router,
    limits: ListenerLimits,
    shutdown: CancellationToken,
) -> Server {
    serve_with(listener, name, router, NoShortcut, limits, shutdown)
}

/// [`serve`], trying `shortcut` before the router.
pub fn serve_with<S: Shortcut>(
    listener: Listener,
    name: &'static str,
    router: Router,
    shortcut: S,
    limits: ListenerLimits,
    shutdown: CancellationToken,
) -> Server {
    let app = router
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|_: BoxError| async { not_in_time() }))
                .timeout(Duration::from_secs(limits.request_timeout_secs)),
        )
        .layer(axum::middleware::from_fn(http_metrics::track))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid));
    let task = tokio::spawn(accept(listener.0, name, app, shortcut, limits, shutdown));
    Server { task }
}

/// The span every request is handled in.
fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    let request_id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id, key = tracing::field::Empty)
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// `request` through `shortcut`, with what the router's layers give every
/// request (see [`Shortcut`]); the request back when it is not answered.
async fn through<S: Shortcut>(
    shortcut: &S,
    mut request: Request,
    timeout: Duration,
) -> std::result::Result<Response, Request> {
    if !shortcut.may_answer(&request) {
        return Err(request);
    }
    // As the request-id layers: the client's id, or a new one, kept for the
    // router when the shortcut hands the request on.
    let id = match request.headers().get(REQUEST_ID) {
        Some(id) => id.clone(),
        None => {
            let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
            let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut text);
            let id = HeaderValue::from_str(text).expect("a UUID is a valid header value");
            request.headers_mut().insert(REQUEST_ID, id.clone());
            id
        }
    };
    let span = request_span(&request);
    let method = request.method().clone();
    let started = Instant::now();
    let answered = tokio::time::timeout(timeout, shortcut.answer(request))
        .instrument(span.clone())
        .await;
    let (route, mut response) = match answered {
        Ok(Ok(answered)) => (answered.route, answered.response),
        Ok(Err(request)) => return Err(request),
        Err(_) => ("unmatched", not_in_time()),
    };
    let latency = started.elapsed();
    http_metrics::record(route, &method, response.status().as_u16(), latency);
    span.in_scope(|| {
        debug!(latency = ?latency, status = response.status().as_u16(), "finished processing request (shortcut)")
    });
    response.headers_mut().insert(REQUEST_ID, id);
    Ok(response)
}

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
async fn accept<S: Shortcut>(
    listener: TcpListener,
    name: &'static str,
    app: Router,
    shortcut: S,
    limits: ListenerLimits,
    shutdown: CancellationToken,
) {
    let timeout = Duration::from_secs(limits.request_timeout_secs);
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
        let shortcut = shortcut.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let request = request.map(axum::body::Body::new);
            // A router is always ready and cheap to clone (one Arc).
            let mut app = app.clone();
            let shortcut = shortcut.clone();
            async move {
                match through(&shortcut, request, timeout).await {
                    Ok(response) => Ok(response),
                    Err(request) => app.call(request).await,
                }
            }
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
