//! Signing an answer: its `Content-Digest` (RFC 9530), then per signature
//! asked for, the signature base (RFC 9421, section 2.5), its Ed25519
//! signature, and `Signature-Input` and `Signature`.

use axum::http::response::Parts;
use axum::http::{HeaderName, HeaderValue};
use sfv::{key_ref, DictSerializer, Item, ItemSerializer, ListSerializer, Parameters, RefBareItem};
use sha2::{Digest, Sha256};

use super::accept::{field_value, Source, Wanted};
use super::keys::CurrentKey;

pub const CONTENT_DIGEST: HeaderName = HeaderName::from_static("content-digest");
pub const SIGNATURE_INPUT: HeaderName = HeaderName::from_static("signature-input");
pub const SIGNATURE: HeaderName = HeaderName::from_static("signature");

/// `Content-Digest` of `content`, the bytes as sent (after any content
/// coding, as RFC 9530 defines it).
pub fn content_digest(content: &[u8]) -> HeaderValue {
    let digest = Sha256::digest(content);
    let mut value = DictSerializer::new();
    value.bare_item(key_ref("sha-256"), RefBareItem::ByteSequence(&digest));
    header_value(value.finish())
}

fn header_value(text: Option<String>) -> HeaderValue {
    HeaderValue::try_from(text.unwrap_or_default()).expect("structured fields are visible ASCII")
}

/// When a signature was made and until when it holds (Unix seconds).
#[derive(Debug, Clone, Copy)]
pub struct Period {
    pub created: i64,
    pub expires: i64,
}

/// Signs the answer whose head is `parts` (its `Content-Digest` set) with
/// `key`, for each of `wanted`; a signature whose components the answer
/// lacks is left out (RFC 9421, section 5.2 lets a signer ignore it).
pub fn sign(parts: &mut Parts, wanted: &[Wanted], key: &CurrentKey, period: Period) {
    let mut inputs = DictSerializer::new();
    let mut signatures = DictSerializer::new();
    let mut signed = 0;
    for wanted in wanted {
        let Some(lines) = covered_lines(parts, wanted) else {
            tracing::debug!(
                label = wanted.label.as_str(),
                "a covered component is missing: not signed"
            );
            continue;
        };
        let params = parameters(wanted, &key.kid, period);
        let items: Vec<Item> = wanted.components.iter().map(|c| c.id.clone()).collect();
        // `@signature-params` is the inner list as Signature-Input holds it.
        let mut list = ListSerializer::new();
        let mut inner = list.inner_list();
        inner.items(&items);
        let _ = inner.finish().parameters(&params);
        let signature_params = list.finish().unwrap_or_default();
        let base = format!("{lines}\"@signature-params\": {signature_params}");
        let signature = key.sign(base.as_bytes());
        let mut input = inputs.inner_list(&wanted.label);
        input.items(&items);
        let _ = input.finish().parameters(&params);
        signatures.bare_item(&wanted.label, RefBareItem::ByteSequence(&signature));
        signed += 1;
    }
    if signed > 0 {
        parts
            .headers
            .insert(SIGNATURE_INPUT, header_value(inputs.finish()));
        parts
            .headers
            .insert(SIGNATURE, header_value(signatures.finish()));
    }
}

/// The signature base's lines for the covered components, each ending
/// with a newline; None when the answer lacks one of them.
fn covered_lines(parts: &Parts, wanted: &Wanted) -> Option<String> {
    let mut lines = String::new();
    for component in &wanted.components {
        let value = match &component.value {
            Source::Status => parts.status.as_str().to_owned(),
            Source::Field(name) => field_value(parts.headers.get_all(name).iter())?,
            Source::Request(value) => value.clone(),
        };
        let id = ItemSerializer::new()
            .bare_item(&component.id.bare_item)
            .parameters(&component.id.params)
            .finish();
        lines.push_str(&id);
        lines.push_str(": ");
        lines.push_str(&value);
        lines.push('\n');
    }
    Some(lines)
}

fn parameters(wanted: &Wanted, kid: &str, period: Period) -> Parameters {
    let mut params = Parameters::new();
    let mut set = |name: &str, value: sfv::BareItem| {
        params.insert(
            sfv::Key::from_string(name.to_owned()).expect("a parameter name"),
            value,
        );
    };
    set("created", sfv::BareItem::Integer(integer(period.created)));
    set("expires", sfv::BareItem::Integer(integer(period.expires)));
    set("keyid", text(kid));
    set("alg", text("ed25519"));
    for (name, value) in &wanted.extra {
        params.insert(name.clone(), value.clone());
    }
    params
}

fn integer(n: i64) -> sfv::Integer {
    sfv::Integer::try_from(n).expect("Unix seconds fit a structured integer")
}

fn text(s: &str) -> sfv::BareItem {
    sfv::BareItem::String(sfv::String::from_string(s.to_owned()).expect("an ASCII key id"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::accept;
    use ed25519_dalek::{Signature, SigningKey, Verifier};

    #[test]
    fn the_content_digest_is_the_sha_256_of_the_bytes_sent() {
        // RFC 9530, section 2: the digest of `{"hello": "world"}`.
        assert_eq!(
            content_digest(b"{\"hello\": \"world\"}"),
            "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
        );
    }

    #[test]
    fn the_signature_verifies_over_the_base_rfc_9421_describes() {
        let key = CurrentKey::new(SigningKey::from_bytes(&[7; 32]));
        let (request, _) = axum::http::Request::get("/api/v1/convert?amount=1")
            .body(())
            .unwrap()
            .into_parts();
        let wanted = accept::parse(br#"sig1=("@path";req);tag="t""#, &request, &key.kid).unwrap();
        let (mut parts, _) = axum::http::Response::builder()
            .header("content-type", "application/json")
            .body(())
            .unwrap()
            .into_parts();
        parts.headers.insert(CONTENT_DIGEST, content_digest(b"{}"));
        let period = Period {
            created: 1_700_000_000,
            expires: 1_700_000_060,
        };
        sign(&mut parts, &wanted, &key, period);
        let params = format!(
            r#"("@path";req "@status" "content-digest" "content-type");created=1700000000;expires=1700000060;keyid="{}";alg="ed25519";tag="t""#,
            key.kid
        );
        assert_eq!(parts.headers[&SIGNATURE_INPUT], format!("sig1={params}"));
        let base = format!(
            "\"@path\";req: /api/v1/convert\n\"@status\": 200\n\"content-digest\": {}\n\"content-type\": application/json\n\"@signature-params\": {params}",
            content_digest(b"{}").to_str().unwrap()
        );
        let signature = parts.headers[&SIGNATURE].to_str().unwrap();
        let encoded = signature
            .strip_prefix("sig1=:")
            .and_then(|s| s.strip_suffix(':'))
            .unwrap();
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap();
        let signature = Signature::from_slice(&bytes).unwrap();
        key.public().verify(base.as_bytes(), &signature).unwrap();
    }
}
