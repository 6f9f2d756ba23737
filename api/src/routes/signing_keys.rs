//! `GET /api/v1/signing-keys`: the public keys that verify signed answers
//! (`crate::signing`), as a JWK Set (RFC 7517) that also carries the
//! envelope's `status` and `message`. It is a read like the others: behind
//! the gate, with a key (or keyless access) and counted.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::access::auth::Authorized;
use crate::state::AppState;

/// The current signing key and the retired ones whose signatures have not
/// expired.
#[utoipa::path(get, path = "/api/v1/signing-keys", tag = "signing",
    responses((status = 200, description = "success", body = crate::openapi::signing::SigningKeysResponse), crate::openapi::CommonErrors))]
pub async fn signing_keys(_: Authorized, State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "status": 200,
        "message": "success",
        "keys": state.signing.published(chrono::Utc::now()),
    }))
}
