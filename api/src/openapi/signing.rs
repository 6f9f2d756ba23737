//! Signed answers in the document: `/api/v1/signing-keys`' shape, and on
//! every read the `Accept-Signature` it takes and the fields a signed
//! answer carries (`crate::signing`).

use serde_json::json;
use utoipa::ToSchema;

/// A JWK Set (RFC 7517) with the envelope's `status` and `message`.
#[derive(ToSchema)]
pub struct SigningKeysResponse {
    pub message: String,
    pub status: u16,
    pub keys: Vec<SigningKey>,
}

/// An Ed25519 public key (RFC 8037).
#[derive(ToSchema)]
pub struct SigningKey {
    #[schema(example = "OKP")]
    pub kty: String,
    #[schema(example = "Ed25519")]
    pub crv: String,
    /// The key's JWK thumbprint (RFC 7638): a signature's `keyid`.
    pub kid: String,
    /// The public key, base64url.
    pub x: String,
    #[schema(example = "sig")]
    #[schema(rename = "use")]
    pub use_: String,
    #[schema(example = "EdDSA")]
    pub alg: String,
}

const NOTE: &str = "\n\nSigned answers: a request with `Accept-Signature` (RFC 9421, \
section 5.1), such as `sig1=(\"@status\" \"content-digest\" \"content-type\")`, is answered \
with `Content-Digest` (RFC 9530, sha-256 of the bytes sent) and, under each label asked for, \
`Signature-Input` and `Signature` (Ed25519; `created`, `expires`, `keyid`, `alg=\"ed25519\"`), \
verified with the keys at /api/v1/signing-keys. A signature covers the components asked for \
(\"@status\", response fields, and \"@method\", \"@authority\", \"@path\", \"@query\", \
\"@request-target\" or request fields with `;req`) and always \"@status\", \"content-digest\" \
and \"content-type\". An `Accept-Signature` that cannot be fulfilled is answered 400 with \
`errors[\"Accept-Signature\"]`. Without a signing key configured it is ignored.";

/// The note in the document's description, and the signature fields on
/// every read's 200 (no derive attribute reaches them all).
pub fn signed_answers(doc: &mut serde_json::Value) {
    if let Some(description) = doc["info"]["description"].as_str() {
        doc["info"]["description"] = format!("{description}{NOTE}").into();
    }
    let field = |description: &str| json!({"description": description, "required": false, "schema": {"type": "string"}});
    let headers = [
        ("Content-Digest", field("When asked for with Accept-Signature: `sha-256=:<base64>:` of the content as sent (RFC 9530).")),
        ("Signature-Input", field("When asked for with Accept-Signature: each signature's covered components and parameters (RFC 9421).")),
        ("Signature", field("When asked for with Accept-Signature: each signature, Ed25519 (RFC 9421).")),
    ];
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        if path.ends_with("/stream") {
            continue;
        }
        let Some(ok) = item
            .get_mut("get")
            .and_then(|get| get["responses"].get_mut("200"))
        else {
            continue;
        };
        for (name, header) in &headers {
            ok["headers"][*name] = header.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_describes_the_keys_and_the_signed_fields_of_reads() {
        let doc: serde_json::Value =
            serde_json::from_str(&crate::routes::DOCUMENT).expect("the document is JSON");
        let key = &doc["components"]["schemas"]["SigningKey"]["properties"];
        for field in ["kty", "crv", "kid", "x", "use", "alg"] {
            assert!(key.get(field).is_some(), "SigningKey.{field}: {key}");
        }
        assert!(doc["paths"]["/api/v1/signing-keys"]["get"].is_object());
        for path in ["/api/v1/rates", "/api/v1/convert", "/api/v1/signing-keys"] {
            let headers = &doc["paths"][path]["get"]["responses"]["200"]["headers"];
            for name in ["Content-Digest", "Signature-Input", "Signature"] {
                assert!(headers.get(name).is_some(), "{path}: {name}");
            }
        }
        let stream = &doc["paths"]["/api/v1/stream"]["get"]["responses"]["200"]["headers"];
        assert!(
            stream.get("Signature").is_none(),
            "the stream is never signed"
        );
        assert!(doc["info"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("Accept-Signature")));
    }
}
