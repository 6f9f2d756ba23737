//! Operator endpoints: a handler that takes [`Operator`] runs only for a
//! caller holding `RATEWIRE_ADMIN_TOKEN` (see
//! [`crate::secret::check_operator`]). Any other caller gets 401 in the
//! api-v1 error envelope, the same from every process, and is logged with
//! its address (never the token it sent); a client that keeps failing is
//! refused with 429 for the rest of the window before its token is even
//! compared, so the token cannot be guessed at speed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header::RETRY_AFTER;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use tracing::{debug, warn};

use crate::clients::{AttemptLimit, ClientAddresses};
use crate::secret::{check_operator_headers, OperatorDenied};

/// Failed operator authentications a client may make per window.
const FAILURES_ALLOWED: u32 = 10;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// What guards a process's operator endpoints: the token, and the memory
/// of who failed to present it.
#[derive(Clone)]
pub struct OperatorGate {
    token: Option<Arc<str>>,
    addresses: ClientAddresses,
    failures: AttemptLimit,
}

impl OperatorGate {
    /// `token`: `None` disables operator endpoints (every call refused).
    pub fn new(token: Option<Arc<str>>, addresses: ClientAddresses) -> Self {
        Self {
            token,
            addresses,
            failures: AttemptLimit::new(FAILURES_ALLOWED, FAILURE_WINDOW),
        }
    }
}

/// A process state that holds an [`OperatorGate`].
pub trait HasOperatorGate {
    fn operator_gate(&self) -> &OperatorGate;
}

/// Proof that the caller holds the operators' token.
pub struct Operator;

/// Why an operator call was refused.
#[derive(Debug)]
pub enum OperatorRefusal {
    Denied(OperatorDenied),
    /// Too many failures from this client; try again after this many seconds.
    Throttled(u64),
}

impl<S: HasOperatorGate + Send + Sync> FromRequestParts<S> for Operator {
    type Rejection = OperatorRefusal;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let gate = state.operator_gate();
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        let client = gate.addresses.client(peer, &parts.headers);
        if let Some(wait) = client.and_then(|ip| gate.failures.blocked(ip)) {
            // Failures were logged as they happened (at most the allowance
            // per window); the refusals that follow are not, or a flood
            // would flood the logs too.
            debug!(client = ?client, "operator call refused: too many failed authentications");
            return Err(OperatorRefusal::Throttled(wait));
        }
        match check_operator_headers(&parts.headers, gate.token.as_deref()) {
            Ok(()) => Ok(Operator),
            Err(OperatorDenied::Disabled) => Err(OperatorRefusal::Denied(OperatorDenied::Disabled)),
            Err(denied) => {
                if let Some(ip) = client {
                    gate.failures.count(ip);
                }
                warn!(client = ?client, reason = denied.message(), "operator authentication failed");
                Err(OperatorRefusal::Denied(denied))
            }
        }
    }
}

impl IntoResponse for OperatorRefusal {
    fn into_response(self) -> Response {
        match self {
            OperatorRefusal::Denied(denied) => {
                let body = serde_json::json!({"status": 401, "message": denied.message()});
                (StatusCode::UNAUTHORIZED, Json(body)).into_response()
            }
            OperatorRefusal::Throttled(wait) => {
                let body = serde_json::json!({
                    "status": 429,
                    "message": "Too many failed operator authentications",
                    "code": "RATE_LIMIT_EXCEEDED",
                });
                let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
                response.headers_mut().insert(
                    RETRY_AFTER,
                    HeaderValue::from_str(&wait.to_string()).expect("digits"),
                );
                response
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::extract::Request;
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;

    #[derive(Clone)]
    struct State(OperatorGate);

    impl HasOperatorGate for State {
        fn operator_gate(&self) -> &OperatorGate {
            &self.0
        }
    }

    fn app(token: Option<&str>) -> Router {
        Router::new()
            .route("/admin", get(|_: Operator| async { "done" }))
            .with_state(State(OperatorGate::new(
                token.map(Into::into),
                ClientAddresses::default(),
            )))
    }

    async fn call(app: &Router, from: &str, authorization: Option<&str>) -> (StatusCode, String) {
        let mut request = Request::get("/admin");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let mut request = request.body(Body::empty()).unwrap();
        let peer: SocketAddr = format!("{from}:40000").parse().unwrap();
        request.extensions_mut().insert(ConnectInfo(peer));
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn only_the_operators_token_opens_operator_endpoints() {
        let app = app(Some("s3cret"));
        assert_eq!(
            call(&app, "10.0.0.1", Some("Bearer s3cret")).await.0,
            StatusCode::OK
        );
        let (status, body) = call(&app, "10.0.0.1", Some("Bearer wrong")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body, r#"{"message":"Invalid operator token","status":401}"#);
        let (status, body) = call(&self::app(None), "10.0.0.1", Some("Bearer s3cret")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(body.contains("RATEWIRE_ADMIN_TOKEN is not set"), "{body}");
    }

    #[tokio::test]
    async fn a_client_guessing_tokens_is_throttled_even_when_it_guesses_right() {
        let app = app(Some("s3cret"));
        for _ in 0..FAILURES_ALLOWED {
            let (status, _) = call(&app, "10.0.0.9", Some("Bearer guess")).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
        }
        let (status, body) = call(&app, "10.0.0.9", Some("Bearer s3cret")).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(body.contains("RATE_LIMIT_EXCEEDED"), "{body}");
        // Another client is not affected.
        assert_eq!(
            call(&app, "10.0.0.10", Some("Bearer s3cret")).await.0,
            StatusCode::OK
        );
    }
}
