//! The OpenAPI 3.1 description of api-v1: the document's frame here, the
//! answers' [`shapes`] (the reference rates' in [`reference`](mod@reference), the
//! revision log's and a board's in [`revisions`](mod@revisions)) and the
//! [`errors`]; the paths come from the handlers' `#[utoipa::path]`
//! annotations, through the route list (`routes::api_v1`).
//!
//! The views are serialized by hand (to keep published digits exact), so the
//! shapes here describe them rather than produce them; the end-to-end tests
//! validate every response they receive against this document, which is
//! what keeps the two in step.
#![allow(dead_code)]

use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::access::plans::Plans;

pub use alerting::*;
pub use errors::*;
pub use quality::*;
pub use reference::*;
pub use revisions::*;
pub use shapes::*;

pub mod alerting;
pub mod errors;
pub mod quality;
pub mod reference;
pub mod revisions;
pub mod shapes;
pub mod signing;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ratewire api-v1",
        description = "Bank exchange rates: latest boards, differences, best rates and history; beside them, the National Bank's reference rates, spreads and premiums.",
        version = "1.0.0"
    ),
    components(schemas(ErrorBody, ValidationErrorBody, LimitErrorBody, BestEvent, AlertEvent)),
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
    body_limit(&mut doc);
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

/// The document as served (`doc`, from the routes): with the ISO 4217 codes this
/// build knows listed where a body's code must be one (no derive attribute
/// can hold a computed list).
pub fn public_document(doc: utoipa::openapi::OpenApi) -> String {
    let mut doc = serde_json::to_value(doc).expect("the OpenAPI document serializes");
    let codes: Vec<serde_json::Value> = ratewire_proto::CurrencyCode::all()
        .iter()
        .map(|c| serde_json::Value::from(c.as_str()))
        .collect();
    // An alert's currency is one (a query parameter's type lists them
    // itself: see `crate::query::params`).
    let alert_currency =
        &mut doc["components"]["schemas"]["NewAlert"]["properties"]["currencyCode"];
    if alert_currency.is_object() {
        alert_currency["enum"] = serde_json::Value::Array(codes);
    }
    // Each event a webhook names is named once (utoipa cannot say so).
    let webhook_events = &mut doc["components"]["schemas"]["NewWebhook"]["properties"]["events"];
    if webhook_events.is_object() {
        webhook_events["uniqueItems"] = serde_json::Value::Bool(true);
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
    conditional_reads(&mut doc);
    paged_reads(&mut doc);
    signing::signed_answers(&mut doc);
    body_limit(&mut doc);
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
        event("alert", false, json!({"$ref": "#/components/schemas/AlertEvent"}),
            "One of the key's alerts fired; data is its webhook message with the message's id (live only: not resumed)."),
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

/// Every operation that takes a body answers 413 past the listeners'
/// limit (`crate::config::BODY_LIMIT`), declared once here.
fn body_limit(doc: &mut serde_json::Value) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    let operations = paths.values_mut().filter_map(|item| item.as_object_mut());
    for operation in operations.flat_map(|item| item.values_mut()) {
        if operation.get("requestBody").is_some() {
            operation["responses"]["413"] = serde_json::json!({
                "description": format!("Request body is too large: at most {} bytes", crate::config::BODY_LIMIT),
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
            });
        }
    }
}

/// Every read but the live stream answers with an `ETag` and takes
/// `If-None-Match` (`crate::conditional`), declared once here (no derive
/// attribute reaches them all).
fn conditional_reads(doc: &mut serde_json::Value) {
    use serde_json::json;
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        if path.ends_with("/stream") {
            continue;
        }
        let Some(get) = item.get_mut("get") else {
            continue;
        };
        let condition = json!({
            "name": "If-None-Match",
            "in": "header",
            "required": false,
            "description": "ETags of copies the client holds: when one is current, 304 without a body.",
            "schema": {"type": "string"},
        });
        match get.get_mut("parameters").and_then(|p| p.as_array_mut()) {
            Some(parameters) => parameters.push(condition),
            None => get["parameters"] = json!([condition]),
        }
        if let Some(ok) = get["responses"].get_mut("200") {
            ok["headers"]["ETag"] = json!({
                "description": "The answer's fingerprint (weak where the answer carries ages that grow by the second: it is made without them).",
                "required": true,
                "schema": {"type": "string"},
            });
        }
        get["responses"]["304"] = json!({
            "description": "Not Modified: the copy named in If-None-Match is current (counted like any request).",
        });
    }
}

/// The reads answered a page at a time give the next page's link in a
/// `Link` header too (besides `data.next`), declared once here.
fn paged_reads(doc: &mut serde_json::Value) {
    for path in ["/api/v1/rates/series", "/api/v1/revisions"] {
        if let Some(ok) = doc["paths"][path]["get"]["responses"].get_mut("200") {
            ok["headers"]["Link"] = serde_json::json!({
                "description": "`<next>; rel=\"next\"` when the answer is one page of more: the same link as `data.next`.",
                "required": false,
                "schema": {"type": "string"},
            });
        }
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
            "/api/v1/rates/spreads",
            "/api/v1/reference-rates",
            "/api/v1/reference-rates/series",
            "/api/v1/revisions",
            "/api/v1/boards/{eventId}",
            "/api/v1/boards",
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

    #[test]
    fn every_read_but_the_stream_declares_its_etag_and_304() {
        let doc: serde_json::Value = serde_json::from_str(&crate::routes::DOCUMENT).unwrap();
        for (path, item) in doc["paths"].as_object().unwrap() {
            let get = &item["get"];
            if get.is_null() {
                continue;
            }
            let conditional = !get["responses"]["304"].is_null()
                && get["responses"]["200"]["headers"]["ETag"].is_object()
                && get["parameters"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p["name"] == "If-None-Match"));
            assert_eq!(conditional, !path.ends_with("/stream"), "{path}");
        }
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
        assert_eq!(events.len(), 5, "board, best, alert, reset, dropped");
        for name in ["RateLimit", "RateLimit-Policy", "X-RateLimit-Limit"] {
            assert!(stream["headers"][name].is_object(), "{name}");
        }
    }

    #[test]
    fn the_revision_log_and_a_board_state_their_parameters_and_shapes() {
        let doc: serde_json::Value = serde_json::from_str(&crate::routes::DOCUMENT).unwrap();
        let log = "/api/v1/revisions";
        for name in ["from", "to"] {
            assert_eq!(parameter(&doc, log, name)["format"], "date-time", "{name}");
        }
        assert_eq!(parameter(&doc, log, "after")["format"], "uuid");
        assert_eq!(parameter(&doc, log, "bankId")["minimum"], 1);
        assert_eq!(parameter(&doc, log, "format")["pattern"], "^(json|csv)$");
        let content = &doc["paths"][log]["get"]["responses"]["200"]["content"];
        assert!(content["text/csv"].is_object() && content["application/json"].is_object());
        let ok = &doc["paths"][log]["get"]["responses"]["200"];
        assert!(ok["headers"]["Link"].is_object(), "the next page's link");
        let board = "/api/v1/boards/{eventId}";
        assert_eq!(parameter(&doc, board, "eventId")["format"], "uuid");
        assert_eq!(
            parameter(&doc, board, "eventId"),
            parameter(&doc, log, "after"),
            "one type reads both"
        );
        assert_eq!(
            parameter(&doc, "/api/v1/boards", "asOf")["format"],
            "date-time"
        );
        let event_id = &doc["paths"][board]["get"]["parameters"][0];
        assert_eq!(
            (&event_id["in"], &event_id["required"]),
            (&"path".into(), &true.into())
        );
        let required = &doc["components"]["schemas"]["Board"]["required"];
        for field in [
            "rates",
            "receivedAt",
            "knownAt",
            "log",
            "source",
            "status",
            "revisions",
        ] {
            assert!(
                required.as_array().unwrap().iter().any(|f| f == field),
                "{field}"
            );
        }
        let change = &doc["components"]["schemas"]["RevisionChange"]["required"];
        assert_eq!(
            change,
            &serde_json::json!(["currencyCode", "field", "before", "after"])
        );
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

    /// The SDKs are generated from, and checked against, a committed copy
    /// of this document (`sdk/openapi.json`): a change here that is not
    /// copied there fails, so the SDKs cannot drift from what is served.
    /// `RATEWIRE_BLESS=1` writes the copy.
    #[test]
    fn the_sdks_copy_of_the_document_is_current() {
        let doc: serde_json::Value = serde_json::from_str(&crate::routes::DOCUMENT).unwrap();
        let served = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk/openapi.json");
        if std::env::var_os("RATEWIRE_BLESS").is_some() {
            std::fs::write(path, &served).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == served,
            "sdk/openapi.json differs from the served document: run \
             `RATEWIRE_BLESS=1 cargo test -p ratewire-api the_sdks_copy`, then regenerate \
             the SDKs' types (sdk/typescript: `npm run types`) and check sdk/python's models"
        );
    }
}
