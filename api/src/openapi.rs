//! The OpenAPI 3.1 description of api-v1: the shapes below and the
//! document's frame; the paths come from the handlers' `#[utoipa::path]`
//! annotations, through the route list (`routes::api_v1`).
//!
//! The views are serialized by hand (to keep published digits exact), so the
//! shapes here describe them rather than produce them; the end-to-end tests
//! validate every response they receive against this document, which is
//! what keeps the two in step.
#![allow(dead_code)]

use std::collections::BTreeMap;

use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::access::plans::Plans;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ratewire api-v1",
        description = "Bank exchange rates: latest boards, differences, best rates and history.",
        version = "1.0.0"
    ),
    components(schemas(ErrorBody, ValidationErrorBody, LimitErrorBody, BestEvent)),
    modifiers(&ApiKeyScheme),
    security(("api_key" = []))
)]
pub struct ApiDoc;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ratewire API operator API",
        description = "Operators create, list and revoke API keys. Served on the API's operator listener only.",
        version = "1.0.0"
    ),
    components(schemas(ErrorBody, ValidationErrorBody, NewKey, CreatedKey, KeyInfo)),
    modifiers(&AdminToken),
    security(("admin_token" = []))
)]
pub struct OperatorDoc;

/// The operator document as served on the operator listener, with the
/// plans a key may have (this process's `RATEWIRE_PLANS`) as the choices
/// of `plan`.
pub fn operator_document(doc: utoipa::openapi::OpenApi, plans: &Plans) -> String {
    let mut doc = serde_json::to_value(doc).expect("the OpenAPI document serializes");
    let names: Vec<serde_json::Value> = plans.assignable().map(serde_json::Value::from).collect();
    let new_key = &mut doc["components"]["schemas"]["NewKey"];
    new_key["properties"]["plan"]["enum"] = serde_json::Value::Array(names);
    // Without a free plan, there is no default to fall back on.
    if !plans
        .assignable()
        .any(|p| p == crate::access::key_records::DEFAULT_PLAN)
    {
        if let Some(required) = new_key["required"].as_array_mut() {
            required.push("plan".into());
        }
    }
    serde_json::to_string_pretty(&doc).expect("JSON values serialize")
}

struct AdminToken;

impl Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{Http, HttpAuthScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// A key to create. The name is 1 to 200 characters once trimmed.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewKey {
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$"
    )]
    pub name: String,
    /// One of the plans of `RATEWIRE_PLANS` but `anonymous`; default free
    /// (required when there is no free plan).
    #[schema(nullable = false)]
    pub plan: Option<String>,
}

/// A key as operators see it: never its secret.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfo {
    pub prefix: String,
    pub name: String,
    pub plan: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Null while the key works.
    #[schema(format = DateTime, required = true)]
    pub revoked_at: Option<String>,
}

/// A key just created: `key` is its secret, shown only here.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedKey {
    /// `rwk_<prefix>_<32 characters>`; only its SHA-256 is stored.
    pub key: String,
    pub prefix: String,
    pub name: String,
    pub plan: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime, required = true)]
    pub revoked_at: Option<String>,
}

/// The document as served (`doc`, from the routes): with the ISO 4217 codes this
/// build knows listed where a code must be one (no derive attribute can
/// hold a computed list).
pub fn public_document(doc: utoipa::openapi::OpenApi) -> String {
    let mut doc = serde_json::to_value(doc).expect("the OpenAPI document serializes");
    let codes: Vec<serde_json::Value> = ratewire_proto::CurrencyCode::all()
        .iter()
        .map(|c| serde_json::Value::from(c.as_str()))
        .collect();
    // A date or a time: more than one parameter attribute can say.
    if let Some(params) = doc["paths"]["/api/v1/rates/series"]["get"]["parameters"].as_array_mut() {
        for param in params
            .iter_mut()
            .filter(|p| p["name"] == "from" || p["name"] == "to")
        {
            param["schema"] = serde_json::json!({"anyOf": [
                {"type": "string", "format": "date"},
                {"type": "string", "format": "date-time"},
            ]});
        }
    }
    if let Some(params) = doc["paths"]["/api/v1/convert"]["get"]["parameters"].as_array_mut() {
        for param in params
            .iter_mut()
            .filter(|p| p["name"] == "from" || p["name"] == "to")
        {
            param["schema"]["enum"] = serde_json::Value::Array(codes.clone());
        }
    }
    // Served under both paths; the short ones are described as the long.
    for (short, long) in [("/me", "/api/v1/me"), ("/usage", "/api/v1/usage")] {
        let mut item = doc["paths"][long].clone();
        if let Some(operation) = item.get_mut("get") {
            operation["operationId"] = format!(
                "{}_short",
                operation["operationId"].as_str().unwrap_or("get")
            )
            .into();
            operation["description"] = format!("The same as {long}.").into();
        }
        doc["paths"][short] = item;
    }
    limit_headers(&mut doc);
    stream_events(&mut doc);
    serde_json::to_string_pretty(&doc).expect("JSON values serialize")
}

/// Each event of the live stream, as OpenAPI 3.1 lets a `text/event-stream`
/// schema describe one event: its type, its id, and its data, a JSON
/// document whose schema depends on the type.
fn stream_events(doc: &mut serde_json::Value) {
    use serde_json::json;
    let event = |name: &str, id: bool, data: serde_json::Value, description: &str| {
        let mut required = vec!["event", "data"];
        if id {
            required.push("id");
        }
        json!({
            "type": "object",
            "description": description,
            "required": required,
            "properties": {
                "event": {"const": name},
                "id": {"type": "string", "description": "For Last-Event-ID"},
                "retry": {"type": "integer"},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": data,
                },
            },
        })
    };
    let reason = json!({
        "type": "object",
        "required": ["reason"],
        "properties": {"reason": {"type": "string"}},
    });
    let schema = json!({"oneOf": [
        event("board", true, json!({"$ref": "#/components/schemas/RatesBank"}),
            "A bank's element of /api/v1/rates changed; data is that element."),
        event("best", true, json!({"$ref": "#/components/schemas/BestEvent"}),
            "A currency's best rates changed; data names the currency, then the best-rates `data` object."),
        event("reset", false, reason.clone(),
            "What changed since Last-Event-ID is no longer kept; a snapshot follows."),
        event("dropped", false, reason,
            "The stream ends (too slow a reader, or the server stopping); reconnect with Last-Event-ID."),
    ]});
    let content = &mut doc["paths"]["/api/v1/stream"]["get"]["responses"]["200"]["content"];
    if let Some(media) = content.get_mut("text/event-stream") {
        media["schema"] = schema;
    }
}

/// The rate-limit fields every answer carries, declared once and named on
/// every response (no derive attribute reaches them all).
fn limit_headers(doc: &mut serde_json::Value) {
    use serde_json::json;
    let integer = |description: &str| json!({"description": description, "required": true, "schema": {"type": "integer", "minimum": 0}});
    let text = |description: &str, example: &str| json!({"description": description, "required": true, "schema": {"type": "string"}, "example": example});
    let headers = json!({
        "X-RateLimit-Limit": integer("Requests allowed in the minute window (the plan's per-minute limit)."),
        "X-RateLimit-Remaining": integer("Requests left in the minute window."),
        "X-RateLimit-Reset": integer("Seconds until the minute window resets."),
        "RateLimit-Policy": text(
            "The plan's quota policies (draft-ietf-httpapi-ratelimit-headers): `minute` (q: the \
             per-minute limit, w=60) and `month` (q: the monthly allowance; w: 30 days, as the \
             allowance resets with the calendar month in the service time zone).",
            "\"minute\";q=60;w=60, \"month\";q=10000;w=2592000",
        ),
        "RateLimit": text(
            "The policy in effect now (draft-ietf-httpapi-ratelimit-headers): `minute` with r and \
             t equal to X-RateLimit-Remaining and X-RateLimit-Reset; `month` on a 429 for the \
             monthly allowance, with t equal to Retry-After.",
            "\"minute\";r=57;t=43",
        ),
    });
    let names: Vec<String> = headers
        .as_object()
        .map(|h| h.keys().cloned().collect())
        .unwrap_or_default();
    doc["components"]["headers"] = headers;
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for operation in paths
        .values_mut()
        .filter_map(|p| p.as_object_mut())
        .flat_map(|p| p.values_mut())
    {
        let Some(responses) = operation
            .get_mut("responses")
            .and_then(|r| r.as_object_mut())
        else {
            continue;
        };
        for response in responses.values_mut().filter(|r| r.get("$ref").is_none()) {
            for name in &names {
                response["headers"][name] = json!({"$ref": format!("#/components/headers/{name}")});
            }
        }
    }
}

struct ApiKeyScheme;

impl Modify for ApiKeyScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-api-key"))),
        );
    }
}

/// A currency, keyed by its ISO 4217 code.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Currency {
    /// The ISO 4217 code, as a stable id.
    pub id: String,
    /// English name.
    pub name: String,
    /// The ISO 4217 code.
    pub symbol: String,
    pub image_url: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SocialLink {
    pub platform: String,
    pub url: String,
}

/// Change from the bank's previous published value (0 when there is none).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    pub cash_buying: f64,
    pub cash_selling: f64,
    /// Present with `transactional=true`; null when not published.
    pub transactional_buying: Option<f64>,
    pub transactional_selling: Option<f64>,
}

/// One currency of a bank's current board on /rates.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeRate {
    pub cash_buying: f64,
    pub cash_selling: f64,
    /// Present with `transactional=true`; null when not published.
    pub transactional_buying: Option<f64>,
    pub transactional_selling: Option<f64>,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub currency: Currency,
    pub difference: Difference,
}

/// A bank on /rates: the id is a number.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RatesBank {
    pub id: i64,
    /// Null until the bank's first board.
    #[schema(format = DateTime, required = true)]
    pub last_rates_updated_at: Option<String>,
    pub name: String,
    pub code: String,
    pub image_url: String,
    pub exchange_rates: Vec<ExchangeRate>,
    /// Present with `socialLinks=true`.
    pub social_links: Option<Vec<SocialLink>>,
}

/// One element of /rates: an inner envelope holding one bank.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RatesElement {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Vec<RatesBank>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RatesResponse {
    /// "Success"
    pub message: String,
    pub status: u16,
    pub data: Vec<RatesElement>,
}

/// A board entry on /banks (no difference).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecentRate {
    pub cash_buying: f64,
    pub cash_selling: f64,
    #[schema(required = true)]
    pub transactional_buying: Option<f64>,
    #[schema(required = true)]
    pub transactional_selling: Option<f64>,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub currency: Currency,
}

/// A bank on /banks: the id is a string.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bank {
    pub id: String,
    #[schema(format = DateTime, required = true)]
    pub last_rates_updated_at: Option<String>,
    pub name: String,
    pub code: String,
    pub image_url: String,
    /// Present with `withRecentEx=true`.
    pub exchange_rates: Option<Vec<RecentRate>>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BanksResponse {
    /// "Success"
    pub message: String,
    pub status: u16,
    pub data: Vec<Bank>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrenciesResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Vec<Currency>,
}

/// The bank of a best rate.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestRateBank {
    pub id: i64,
    pub name: String,
    pub code: String,
    pub image_url: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RatePoint {
    pub value: f64,
    #[schema(format = DateTime)]
    pub timestamp: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestRate {
    pub price: f64,
    /// When that bank published it.
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// When this view was computed.
    #[schema(format = DateTime)]
    pub timestamp: String,
    /// Signed change from the bank's previous value, 4 fraction digits ("+0.2500").
    #[schema(pattern = r"^([+-][0-9]+\.[0-9]{4}|0\.0000)$")]
    pub difference: String,
    pub bank: BestRateBank,
    /// The bank's values over the last 30 days, oldest first, at most 100.
    pub rates: Vec<RatePoint>,
}

/// Null where no active bank quotes the field.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestRates {
    #[schema(required = true)]
    pub cash_buying: Option<BestRate>,
    #[schema(required = true)]
    pub cash_selling: Option<BestRate>,
    #[schema(required = true)]
    pub transactional_buying: Option<BestRate>,
    #[schema(required = true)]
    pub transactional_selling: Option<BestRate>,
}

/// The data of a live stream's `best` event: the currency, then its best
/// rates as `data` on best-rates (each names its bank).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestEvent {
    /// The ISO 4217 code these best rates are of.
    pub currency_code: String,
    #[schema(required = true)]
    pub cash_buying: Option<BestRate>,
    #[schema(required = true)]
    pub cash_selling: Option<BestRate>,
    #[schema(required = true)]
    pub transactional_buying: Option<BestRate>,
    #[schema(required = true)]
    pub transactional_selling: Option<BestRate>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestRatesResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: BestRates,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRecord {
    pub cash_buying: f64,
    pub cash_selling: f64,
    #[schema(required = true)]
    pub transactional_buying: Option<f64>,
    #[schema(required = true)]
    pub transactional_selling: Option<f64>,
    /// When the record was published.
    #[schema(format = DateTime)]
    pub timestamp: String,
    pub currency: Currency,
}

/// One point of a bank's series: the interval's start (or the publish
/// time, raw), the value in force at its end and when it was published.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BankSeriesPoint {
    #[schema(format = DateTime)]
    pub timestamp: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub cash_buying: f64,
    pub cash_selling: f64,
    #[schema(required = true)]
    pub transactional_buying: Option<f64>,
    #[schema(required = true)]
    pub transactional_selling: Option<f64>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BankSeries {
    pub bank_id: i64,
    pub currency_code: String,
    /// raw, hour or day
    pub interval: String,
    #[schema(format = DateTime)]
    pub from: String,
    #[schema(format = DateTime)]
    pub to: String,
    /// The link (relative to this service) to the rest of the range when
    /// this answer is one page of it, then also in a `Link` header;
    /// otherwise null.
    #[schema(required = true)]
    pub next: Option<String>,
    pub points: Vec<BankSeriesPoint>,
}

/// One point of a best-across-banks series.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestSeriesPoint {
    #[schema(format = DateTime)]
    pub timestamp: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub value: f64,
    pub bank_id: i64,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestSeries {
    pub currency_code: String,
    /// cashBuying, cashSelling, transactionalBuying or transactionalSelling
    pub field: String,
    /// hour or day
    pub interval: String,
    #[schema(format = DateTime)]
    pub from: String,
    #[schema(format = DateTime)]
    pub to: String,
    /// The link (relative to this service) to the rest of the range when
    /// this answer is one page of it, then also in a `Link` header;
    /// otherwise null.
    #[schema(required = true)]
    pub next: Option<String>,
    pub points: Vec<BestSeriesPoint>,
}

#[derive(ToSchema)]
#[serde(untagged)]
pub enum SeriesData {
    Bank(BankSeries),
    Best(BestSeries),
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeriesResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: SeriesData,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConvertLeg {
    pub currency: String,
    /// buying (the bank buys it from the customer) or selling
    #[schema(pattern = "^(buying|selling)$")]
    pub side: String,
    pub rate: f64,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConvertBank {
    pub id: i64,
    pub name: String,
    pub code: String,
    pub image_url: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConvertResult {
    pub bank: ConvertBank,
    /// The amount received, rounded to 4 fraction digits.
    pub amount: f64,
    /// Units of `to` per unit of `from` (8 fraction digits at most).
    pub rate: f64,
    pub legs: Vec<ConvertLeg>,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conversion {
    pub from: String,
    pub to: String,
    pub amount: f64,
    pub transactional: bool,
    /// Best first.
    pub results: Vec<ConvertResult>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConvertResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Conversion,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    /// The requested day, YYYY-MM-DD.
    #[schema(format = Date)]
    pub date: String,
    pub data: HistoryRecord,
}

/// Every error: `status` repeats the HTTP status.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    pub status: u16,
    pub message: String,
}

/// The answers every operator endpoint may give besides its own.
#[derive(utoipa::IntoResponses)]
pub enum OperatorErrors {
    /// Admin token missing or wrong.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// Too many failed authentications from this client.
    #[response(status = 429)]
    TooManyFailures(ErrorBody),
    /// Postgres (or, for what is published on the log, the broker) is
    /// unavailable.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// 429: which limit was hit.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitErrorBody {
    pub status: u16,
    pub message: String,
    #[schema(pattern = "^(RATE_LIMIT_EXCEEDED|QUOTA_EXCEEDED)$")]
    pub code: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanLimits {
    pub per_minute: u64,
    pub per_month: u64,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub name: String,
    pub plan: String,
    pub limits: PlanLimits,
    /// Null for anonymous access.
    #[schema(format = DateTime, required = true)]
    pub created_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeResponse {
    pub message: String,
    pub status: u16,
    pub data: Me,
}

/// One window: `reset` is in seconds from now.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageWindow {
    pub limit: u64,
    pub used: u64,
    pub remaining: u64,
    pub reset: u64,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub minute: UsageWindow,
    pub month: UsageWindow,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageResponse {
    pub message: String,
    pub status: u16,
    pub data: Usage,
}

/// 400: each bad parameter with its problems.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidationErrorBody {
    pub status: u16,
    /// "Validation errors occurred."
    pub message: String,
    pub errors: BTreeMap<String, Vec<String>>,
}

/// The errors every data endpoint can answer.
#[derive(utoipa::IntoResponses)]
pub enum CommonErrors {
    /// Validation errors occurred.
    #[response(status = 400)]
    BadRequest(ValidationErrorBody),
    /// "API key is required" (no `x-api-key`) or "Invalid API key"
    /// (unknown or revoked). Unless the operator opened keyless access.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// Per-minute limit (RATE_LIMIT_EXCEEDED) or monthly allowance
    /// (QUOTA_EXCEEDED) spent; wait `Retry-After` seconds. Callers without
    /// a valid key are counted per client address under the anonymous
    /// plan before their 401, so they get this once that is spent.
    #[response(status = 429, headers(("Retry-After" = u64, description = "Whole seconds until a retry can succeed")))]
    TooManyRequests(LimitErrorBody),
    /// Internal Server Error (the cause is only logged).
    #[response(status = 500)]
    Internal(ErrorBody),
    /// A dependency is unavailable; retry after `Retry-After` seconds.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_document_offers_the_configured_plans() {
        let plans: crate::access::plans::Plans = "anonymous=10/100,free=60/1000,team=600/100000"
            .parse()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_str(&operator_document(
            crate::routes::operator_v1().split_for_parts().1,
            &plans,
        ))
        .unwrap();
        assert!(doc["paths"]["/v1/admin/keys"]["post"].is_object());
        assert!(doc["paths"]["/v1/admin/keys"]["get"].is_object());
        assert!(doc["paths"]["/v1/admin/keys/{prefix}"]["delete"].is_object());
        assert_eq!(
            doc["components"]["schemas"]["NewKey"]["properties"]["plan"]["enum"],
            serde_json::json!(["free", "team"])
        );
        assert_eq!(
            doc["components"]["securitySchemes"]["admin_token"]["scheme"],
            "bearer"
        );
    }

    #[test]
    fn the_document_is_openapi_3_1_with_every_endpoint() {
        let doc: serde_json::Value = serde_json::from_str(&crate::routes::DOCUMENT).unwrap();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        for path in [
            "/api/v1/banks",
            "/api/v1/currencies",
            "/api/v1/rates",
            "/api/v1/rates/best-rates",
            "/api/v1/history",
            "/api/v1/rates/series",
            "/api/v1/convert",
            "/api/v1/stream",
            "/api/v1/me",
            "/api/v1/usage",
            "/me",
            "/usage",
        ] {
            assert!(doc["paths"][path]["get"].is_object(), "{path} missing");
        }
        assert_eq!(
            doc["components"]["securitySchemes"]["api_key"]["name"],
            "x-api-key"
        );
        let bank = &doc["components"]["schemas"]["Bank"];
        assert_eq!(bank["properties"]["id"]["type"], "string");
        assert!(bank["properties"]["lastRatesUpdatedAt"].is_object());
    }

    /// The schema of `name` on `path`.
    fn parameter(doc: &serde_json::Value, path: &str, name: &str) -> serde_json::Value {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{path} has no {name}"))["schema"]
            .clone()
    }

    /// What the server refuses with 400, the document refuses too: a
    /// client generated from it sends nothing the server turns away.
    #[test]
    fn every_reference_resolves_and_every_answer_declares_the_limit_fields() {
        fn refs<'a>(value: &'a serde_json::Value, found: &mut Vec<&'a str>) {
            match value {
                serde_json::Value::Object(map) => {
                    if let Some(r) = map.get("$ref").and_then(|r| r.as_str()) {
                        found.push(r);
                    }
                    map.values().for_each(|v| refs(v, found));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|v| refs(v, found)),
                _ => {}
            }
        }
        let doc: serde_json::Value = serde_json::from_str(&crate::routes::DOCUMENT).unwrap();
        let mut found = Vec::new();
        refs(&doc, &mut found);
        for reference in found {
            let pointer = reference.trim_start_matches('#');
            assert!(
                doc.pointer(pointer).is_some(),
                "{reference} resolves to nothing"
            );
        }
        let stream = &doc["paths"]["/api/v1/stream"]["get"]["responses"]["200"];
        let events = stream["content"]["text/event-stream"]["schema"]["oneOf"]
            .as_array()
            .unwrap();
        assert_eq!(events.len(), 4, "board, best, reset, dropped");
        for name in ["RateLimit", "RateLimit-Policy", "X-RateLimit-Limit"] {
            assert!(stream["headers"][name].is_object(), "{name}");
        }
    }

    #[test]
    fn every_parameter_states_the_rules_the_server_enforces() {
        let doc: serde_json::Value = serde_json::from_str(&crate::routes::DOCUMENT).unwrap();
        for path in ["/api/v1/rates", "/api/v1/history"] {
            assert_eq!(parameter(&doc, path, "bankId")["minimum"], 1, "{path}");
        }
        for path in ["/api/v1/rates/best-rates", "/api/v1/history"] {
            assert_eq!(
                parameter(&doc, path, "currencyCode")["pattern"],
                "^[A-Za-z]{3}$",
                "{path}"
            );
        }
        assert_eq!(parameter(&doc, "/api/v1/history", "date")["format"], "date");
        for (path, name) in [
            ("/api/v1/rates", "transactional"),
            ("/api/v1/rates", "socialLinks"),
            ("/api/v1/banks", "withRecentEx"),
        ] {
            let schema = parameter(&doc, path, name);
            assert!(
                schema["type"].to_string().contains("boolean"),
                "{path} {name}: {schema}"
            );
        }
        let limited = &doc["paths"]["/api/v1/rates"]["get"]["responses"]["429"];
        assert!(limited["headers"]["Retry-After"].is_object(), "{limited}");
    }
}
