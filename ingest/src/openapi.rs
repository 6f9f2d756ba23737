//! The OpenAPI 3.1 documents of ingest: the publisher API (served on the
//! public listener at `/v1/openapi.json`) and the operator API (on the
//! operator listener, same path), generated from the handlers'
//! `#[utoipa::path]` annotations and the shapes below.
//!
//! Text fields are not blank (whitespace as the server trims it) and hold
//! no NUL (Postgres cannot store it); URLs are http(s).
//!
//! The documents state every rule JSON Schema can state, so a client
//! generated from them sends what the server takes: known currency codes,
//! rates within range, at most 500 entries, a whole transactional pair,
//! an event id that is a UUID. Three rules of a board are beyond a schema
//! and are stated in words: selling not below buying, each currency once,
//! and an `asOf` between 1990-01-01 and five minutes after the push. The
//! schemas are also a little stricter than the server where generated
//! numbers would otherwise break the exactness rule (rates at least
//! 0.0000001, which every real quote is).
#![allow(dead_code)]

use std::sync::LazyLock;

use ratewire_proto::CurrencyCode;
use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ratewire publisher API",
        description = "Banks' feed publishers push rate boards and retract wrong ones. Each token is bound to one bank.",
        version = "1.0.0"
    ),
    paths(
        crate::routes::boards::publish_board,
        crate::routes::boards::retract_board,
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
        description = "Operators register banks, issue publisher tokens and retract boards. Served on the operator listener only.",
        version = "1.0.0"
    ),
    paths(
        crate::routes::admin::register,
        crate::routes::admin::list,
        crate::routes::admin::show,
        crate::routes::admin::update,
        crate::routes::admin::create_token,
        crate::routes::admin::revoke_token,
        crate::routes::admin::retract_board,
    ),
    components(schemas(ErrorBody, ValidationErrorBody, Accepted, Bank, NewBank, BankPatch, SocialLink, Token)),
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

/// A board: every currency one bank quotes at one time. Rules a schema
/// cannot state: each currency at most once; in each pair selling not
/// below buying; `asOf` not before 1990-01-01T00:00:00Z and not more than
/// 5 minutes after the push is received.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Board {
    /// When the rates took effect (RFC 3339); default: when received.
    #[schema(format = DateTime, nullable = false)]
    pub as_of: Option<String>,
    #[schema(min_items = 1, max_items = 500)]
    pub rates: Vec<BoardRate>,
}

/// One currency of a board, in birr per unit. Numbers are kept exactly as
/// published (at most 28 significant digits), never rounded.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoardRate {
    /// ISO 4217 code (any case; listed upper case).
    pub currency: String,
    #[schema(minimum = 0.0000001, maximum = 1000000000)]
    pub cash_buying: f64,
    /// Not below `cashBuying`.
    #[schema(minimum = 0.0000001, maximum = 1000000000)]
    pub cash_selling: f64,
    /// With `transactionalSelling` or not at all.
    #[schema(minimum = 0.0000001, maximum = 1000000000, nullable = false)]
    pub transactional_buying: Option<f64>,
    /// With `transactionalBuying` or not at all; not below it.
    #[schema(minimum = 0.0000001, maximum = 1000000000, nullable = false)]
    pub transactional_selling: Option<f64>,
}

/// A retraction's optional body.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Retraction {
    /// Why the board is withdrawn, for whoever reads the log.
    #[schema(max_length = 500, pattern = r"^[^\u0000]*$", nullable = false)]
    pub reason: Option<String>,
}

/// The event is on the log (durably acknowledged by the broker).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub status: u16,
    /// "Accepted"
    pub message: String,
    /// The event's id: a board's is what a retraction names.
    #[schema(format = Uuid)]
    pub event_id: String,
}

#[derive(ToSchema)]
pub struct ErrorBody {
    pub status: u16,
    pub message: String,
}

#[derive(ToSchema)]
pub struct ValidationErrorBody {
    pub status: u16,
    /// "Validation errors occurred."
    pub message: String,
    /// Each bad field (e.g. `rates[2].cashSelling`) and what is wrong.
    pub errors: std::collections::BTreeMap<String, Vec<String>>,
}

#[derive(ToSchema)]
pub struct SocialLink {
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$"
    )]
    pub platform: String,
    #[schema(max_length = 2048, pattern = r"^https?://[^\u0000]*$")]
    pub url: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bank {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub image_url: String,
    pub social_links: Vec<SocialLink>,
    pub active: bool,
}

/// A bank to register (publishes BankRegistered).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewBank {
    /// Short unique code, e.g. CBE.
    #[schema(
        min_length = 1,
        max_length = 32,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$"
    )]
    pub code: String,
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$"
    )]
    pub name: String,
    #[schema(max_length = 2048, pattern = r"^https?://[^\u0000]*$")]
    pub image_url: String,
    #[schema(nullable = false)]
    pub social_links: Option<Vec<SocialLink>>,
}

/// What changes; at least one field.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BankPatch {
    #[schema(
        min_length = 1,
        max_length = 32,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$",
        nullable = false
    )]
    pub code: Option<String>,
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$",
        nullable = false
    )]
    pub name: Option<String>,
    #[schema(
        max_length = 2048,
        pattern = r"^https?://[^\u0000]*$",
        nullable = false
    )]
    pub image_url: Option<String>,
    #[schema(nullable = false)]
    pub social_links: Option<Vec<SocialLink>>,
    /// false takes the bank out of every list; true brings it back.
    #[schema(nullable = false)]
    pub active: Option<bool>,
}

/// A publisher token, shown only this once.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    pub token: String,
    pub prefix: String,
    pub bank_id: i64,
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
