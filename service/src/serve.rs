//! Serving HTTP: every listener of every process is started here, so what
//! all of them need (request ids, the request span, request metrics, the
//! peer address, graceful shutdown) is added once, and so are the limits a
//! listener facing the internet must have.

use std::future::IntoFuture;
use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::error::{Error, Result};
use crate::http_metrics;

/// A bound listener, not yet served: a process binds at build time, so a
/// taken port fails start at once and tests learn the port before serving.
#[derive(Debug)]
pub struct Listener(TcpListener);

impl Listener {
    /// Binds `addr` (port 0 picks a free one, as tests do).
    pub async fn bind(addr: SocketAddr) -> Result<Self> {
        TcpListener::bind(addr)
            .await
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

/// A server running in a task of its own.
pub struct Server {
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Waits until the server has stopped (after shutdown, once in-flight
    /// requests were answered).
    pub async fn stopped(self) -> Result<()> {
        self.task.await?.map_err(Error::Server)
    }
}

/// Serves `router` on `listener` until `shutdown`, then finishes the
/// requests in flight. Handlers may take `ConnectInfo<SocketAddr>`.
///
/// Every request gets an `x-request-id` (kept when the client sent one,
/// echoed in the response), a `request` span carrying it (with an empty
/// `key` field for processes that identify callers: the key's public
/// prefix, never the key) and its count and duration in
/// [`http_metrics`].
pub fn serve(listener: Listener, router: Router, shutdown: CancellationToken) -> Server {
    let app = router
        .layer(axum::middleware::from_fn(http_metrics::track))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
                let request_id = request
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id, key = tracing::field::Empty)
            }),
        )
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .into_make_service_with_connect_info::<SocketAddr>();
    let task = tokio::spawn(
        axum::serve(listener.0, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .into_future(),
    );
    Server { task }
}
