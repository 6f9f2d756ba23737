//! Operator endpoints: a handler that takes [`Operator`] runs only for a
//! caller holding `RATEWIRE_ADMIN_TOKEN` (see [`crate::secret::check_operator`]);
//! any other caller gets 401 in the api-v1 error envelope, the same from
//! every process.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::secret::{check_operator_headers, OperatorDenied};

/// Proof that the caller holds the operators' token.
pub struct Operator;

/// A process state that knows the operators' token (`None`: operator
/// endpoints are disabled and refuse every call).
pub trait OperatorToken {
    fn operator_token(&self) -> Option<&str>;
}

impl<S: OperatorToken + Send + Sync> FromRequestParts<S> for Operator {
    type Rejection = OperatorDenied;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        check_operator_headers(&parts.headers, state.operator_token()).map(|()| Operator)
    }
}

impl IntoResponse for OperatorDenied {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"status": 401, "message": self.message()});
        (StatusCode::UNAUTHORIZED, Json(body)).into_response()
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
    struct Token(Option<&'static str>);

    impl OperatorToken for Token {
        fn operator_token(&self) -> Option<&str> {
            self.0
        }
    }

    async fn call(
        token: Option<&'static str>,
        authorization: Option<&str>,
    ) -> (StatusCode, String) {
        let app = Router::new()
            .route("/admin", get(|_: Operator| async { "done" }))
            .with_state(Token(token));
        let mut request = Request::get("/admin");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let response = app
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn only_the_operators_token_opens_operator_endpoints() {
        assert_eq!(
            call(Some("s3cret"), Some("Bearer s3cret")).await.0,
            StatusCode::OK
        );
        let (status, body) = call(Some("s3cret"), Some("Bearer wrong")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body, r#"{"message":"Invalid operator token","status":401}"#);
        let (status, body) = call(None, Some("Bearer s3cret")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(body.contains("RATEWIRE_ADMIN_TOKEN is not set"), "{body}");
    }
}
