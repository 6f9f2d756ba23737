//! `GET /me` and `GET /usage` (also under `/api/v1/`): a caller's own key,
//! plan and consumption. They count toward the per-minute window only.

use axum::extract::State;
use axum::{Extension, Json};
use serde_json::{json, Value};

use crate::access::auth::{ApiKey, Authorized};
use crate::access::gate::Identified;
use crate::access::limits::Decision;
use crate::error::Result;
use crate::state::AppState;

/// The caller's key: name, plan, limits and creation time.
#[utoipa::path(get, path = "/api/v1/me", tag = "usage",
    responses((status = 200, description = "success", body = crate::openapi::MeResponse), crate::openapi::CommonErrors))]
pub async fn me(ApiKey(caller): ApiKey, State(state): State<AppState>) -> Result<Json<Value>> {
    let limits = state
        .access
        .plans
        .get(&caller.plan)
        .unwrap_or_else(|| state.access.plans.anonymous());
    Ok(Json(json!({
        "message": "success",
        "status": 200,
        "data": {
            "name": caller.name,
            "plan": caller.plan,
            "limits": {"perMinute": limits.per_minute, "perMonth": limits.per_month},
            "createdAt": caller.created_at.map(ratewire_readmodel::views::timestamp),
        },
    })))
}

fn window(limit: u64, used: u64, remaining: u64, reset: u64) -> Value {
    json!({"limit": limit, "used": used, "remaining": remaining, "reset": reset})
}

/// Used, remaining and reset (seconds) for the minute window and the month.
#[utoipa::path(get, path = "/api/v1/usage", tag = "usage",
    responses((status = 200, description = "success", body = crate::openapi::UsageResponse), crate::openapi::CommonErrors))]
pub async fn usage(
    _: Authorized,
    Extension(identified): Extension<Identified>,
) -> Result<Json<Value>> {
    let d: Decision = identified.decision;
    Ok(Json(json!({
        "message": "success",
        "status": 200,
        "data": {
            "minute": window(d.limits.per_minute, d.minute_used, d.minute_remaining(), d.minute_reset),
            "month": window(d.limits.per_month, d.month_used, d.month_remaining(), d.month_reset),
        },
    })))
}
