//! The OpenAPI 3.1 documents ingest serves: the publisher API (on the
//! public listener at `/v1/openapi.json`) and the operator API (on the
//! operator listener, same path), from the handlers' annotations and the
//! shapes in `crate::openapi`.

use std::sync::LazyLock;

use ratewire_proto::CurrencyCode;
use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::openapi::{
    Accepted, Bank, BankPatch, ErrorBody, NewBank, PublishedCurrency, PublishedReference,
    PublishedReferenceRate, ReferenceImported, SocialLink, Token, ValidationErrorBody,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ratewire publisher API",
        description = "Banks' feed publishers push rate boards and retract wrong ones. Each token is bound to one bank.",
        version = "1.0.0"
    ),
    paths(
        super::boards::publish_board,
        super::boards::retract_board,
    ),
    components(schemas(ErrorBody, ValidationErrorBody, Accepted)),
    modifiers(&PublisherToken),
    security(("publisher_token" = []))
)]
struct PublisherDoc;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ratewire ingest operator API",
        description = "Operators register banks, issue publisher tokens, retract boards and import the National Bank's reference rates. Served on the operator listener only.",
        version = "1.0.0"
    ),
    paths(
        super::admin::register,
        super::admin::list,
        super::admin::show,
        super::admin::update,
        super::admin::create_token,
        super::admin::revoke_token,
        super::admin::retract_board,
        super::admin::import_reference,
    ),
    components(schemas(ErrorBody, ValidationErrorBody, Accepted, Bank, NewBank, BankPatch, SocialLink, Token, ReferenceImported, PublishedReference, PublishedReferenceRate, PublishedCurrency)),
    modifiers(&AdminToken),
    security(("admin_token" = []))
)]
struct OperatorDoc;

/// The publisher document, as served.
pub static PUBLISHER: LazyLock<String> =
    LazyLock::new(|| render(PublisherDoc::openapi(), &["BoardRate"]));

/// The operator document, as served.
pub static OPERATOR: LazyLock<String> = LazyLock::new(|| render(OperatorDoc::openapi(), &[]));

/// The document as JSON, with the list of known currency codes put into
/// the `currency` property of `with_currencies` (computed, so no derive
/// attribute can hold it).
fn render(doc: utoipa::openapi::OpenApi, with_currencies: &[&str]) -> String {
    let mut json: Value = serde_json::to_value(&doc).expect("the OpenAPI document serializes");
    let codes: Vec<Value> = CurrencyCode::all()
        .iter()
        .map(|c| Value::from(c.as_str()))
        .collect();
    for schema in with_currencies {
        let rate = &mut json["components"]["schemas"][*schema];
        rate["properties"]["currency"]["enum"] = Value::Array(codes.clone());
        // The transactional pair comes whole (JSON Schema 2020-12).
        rate["dependentRequired"] = serde_json::json!({
            "transactionalBuying": ["transactionalSelling"],
            "transactionalSelling": ["transactionalBuying"],
        });
    }
    // A published reference day: keyed on known codes, and never a
    // response that reports a failure.
    if let Some(currency) = json["components"]["schemas"].get_mut("PublishedCurrency") {
        currency["properties"]["code"]["enum"] = Value::Array(codes.clone());
    }
    if let Some(published) = json["components"]["schemas"].get_mut("PublishedReference") {
        published["properties"]["success"] = serde_json::json!({"enum": [true, null]});
        published["properties"]["status"] = serde_json::json!({"enum": [200, null]});
    }
    // At least one field. Set here: utoipa 5 writes its `min_properties`
    // attribute out as `maxProperties`.
    if let Some(patch) = json["components"]["schemas"].get_mut("BankPatch") {
        patch["minProperties"] = Value::from(1);
    }
    serde_json::to_string_pretty(&json).expect("JSON values serialize")
}

struct PublisherToken;
struct AdminToken;

fn bearer(openapi: &mut utoipa::openapi::OpenApi, name: &str) {
    let components = openapi.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        name,
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
}

impl Modify for PublisherToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        bearer(openapi, "publisher_token")
    }
}

impl Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        bearer(openapi, "admin_token")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_bank_patch_needs_at_least_one_field() {
        let doc = doc(&OPERATOR);
        let patch = &doc["components"]["schemas"]["BankPatch"];
        assert_eq!(patch["minProperties"], 1, "{patch}");
        assert!(patch.get("maxProperties").is_none(), "{patch}");
    }

    #[test]
    fn the_publisher_document_states_the_board_rules() {
        let doc = doc(&PUBLISHER);
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let push = &doc["paths"]["/v1/banks/{bankId}/boards"]["post"];
        assert!(push.is_object(), "{doc}");
        let rate = &doc["components"]["schemas"]["BoardRate"];
        let currencies = rate["properties"]["currency"]["enum"].as_array().unwrap();
        assert!(currencies.iter().any(|c| c == "ETB"));
        assert!(!currencies.iter().any(|c| c == "QQQ"));
        assert_eq!(rate["properties"]["cashBuying"]["maximum"], 1_000_000_000.0);
        assert_eq!(
            rate["properties"]["transactionalBuying"]["type"], "number",
            "a null half-pair is no pair: {rate}"
        );
        assert_eq!(
            rate["dependentRequired"]["transactionalBuying"][0],
            "transactionalSelling"
        );
        assert_eq!(
            doc["components"]["schemas"]["Board"]["properties"]["rates"]["maxItems"],
            500
        );
        let board = &doc["components"]["schemas"]["Board"]["properties"];
        assert_eq!(board["reason"]["maxLength"], 500, "{board}");
        let source = &doc["components"]["schemas"]["BoardSource"];
        assert_eq!(
            source["required"],
            serde_json::json!(["method"]),
            "{source}"
        );
        assert_eq!(source["properties"]["url"]["maxLength"], 2048);
        let method = &doc["components"]["schemas"]["SourceMethod"]["enum"];
        assert_eq!(
            *method,
            serde_json::json!(["api", "page", "file", "manual"])
        );
        let accepted = &push["responses"]["202"]["content"]["application/json"]["schema"];
        assert_eq!(accepted["$ref"], "#/components/schemas/AcceptedBoard");
        assert!(doc["paths"]["/v1/banks/{bankId}/boards/{eventId}"]["delete"].is_object());
        assert!(
            doc["paths"].get("/v1/admin/banks").is_none(),
            "operators' apart"
        );
    }

    #[test]
    fn the_operator_document_has_every_operator_endpoint() {
        let doc = doc(&OPERATOR);
        for (path, method) in [
            ("/v1/admin/banks", "post"),
            ("/v1/admin/banks", "get"),
            ("/v1/admin/banks/{id}", "get"),
            ("/v1/admin/banks/{id}", "patch"),
            ("/v1/admin/banks/{id}/tokens", "post"),
            ("/v1/admin/tokens/{prefix}", "delete"),
            ("/v1/admin/banks/{id}/boards/{eventId}", "delete"),
        ] {
            assert!(doc["paths"][path][method].is_object(), "{method} {path}");
        }
    }
}
