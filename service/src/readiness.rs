//! Serving while preparing: a process binds its port at once and answers
//! 503 (not a hanging connection) until its dependencies are prepared
//! (migrations applied, topic created), retrying them while they are down.
//! Probes and metrics answer throughout, so an orchestrator sees why.

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::retry::retry;

/// Paths served before the process is prepared.
const ALWAYS_SERVED: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// Whether `path` is a probe's or a scrape's: asked every few seconds by
/// the platform, not by a user.
pub fn is_probe(path: &str) -> bool {
    ALWAYS_SERVED.contains(&path)
}

/// `GET /healthz`: the process is alive (it answers); whether its
/// dependencies are is each process's `/readyz`.
pub async fn healthz() -> Response {
    ([(CONTENT_TYPE, "application/json")], r#"{"status":"ok"}"#).into_response()
}

/// Whether the process has prepared its dependencies; shared by the server
/// and the start-up task.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn is_prepared(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Runs `attempt` until it succeeds (see [`retry`]), then lets requests
    /// through; false when `shutdown` came first.
    pub async fn prepare<T, E, F, Fut>(
        &self,
        what: &str,
        shutdown: &CancellationToken,
        attempt: F,
    ) -> bool
    where
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        if retry(what, shutdown, attempt).await.is_none() {
            return false;
        }
        self.0.store(true, Ordering::Release);
        true
    }

    /// `router` answering `refuse()` to everything but the probes and
    /// metrics until the process is prepared.
    pub fn guard<S>(&self, router: Router<S>, refuse: fn() -> Response) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        let readiness = self.clone();
        router.layer(axum::middleware::from_fn(
            move |request: Request, next: Next| {
                let prepared = readiness.is_prepared();
                async move {
                    if prepared || ALWAYS_SERVED.contains(&request.uri().path()) {
                        next.run(request).await
                    } else {
                        refuse()
                    }
                }
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;
    use tower::ServiceExt;

    fn app(readiness: &Readiness) -> Router {
        let router = Router::new()
            .route("/api", get(|| async { "served" }))
            .route("/readyz", get(|| async { "probed" }));
        readiness.guard(router, || StatusCode::SERVICE_UNAVAILABLE.into_response())
    }

    async fn status(readiness: &Readiness, path: &str) -> StatusCode {
        let request = Request::get(path).body(Body::empty()).unwrap();
        app(readiness).oneshot(request).await.unwrap().status()
    }

    #[tokio::test]
    async fn requests_are_refused_until_prepared_but_probes_answer() {
        let readiness = Readiness::default();
        assert_eq!(
            status(&readiness, "/api").await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(status(&readiness, "/readyz").await, StatusCode::OK);
        let prepared = readiness
            .prepare("nothing", &CancellationToken::new(), || async {
                Ok::<_, &str>(())
            })
            .await;
        assert!(prepared);
        assert_eq!(status(&readiness, "/api").await, StatusCode::OK);
    }

    #[tokio::test]
    async fn shutdown_before_preparing_leaves_requests_refused() {
        let readiness = Readiness::default();
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let prepared = readiness
            .prepare("never", &shutdown, || async { Err::<(), _>("down") })
            .await;
        assert!(!prepared);
        assert_eq!(
            status(&readiness, "/api").await,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
