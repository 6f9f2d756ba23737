//! `Accept-Signature` (RFC 9421, section 5.1): which signatures a client
//! asks for, checked against what this API can sign before the request is
//! answered. Request components (`;req`) are read here, while the request
//! is at hand.

use axum::http::request::Parts;
use axum::http::{header, HeaderName};
use sfv::{BareItem, Dictionary, Item, ListEntry, Parameters, Parser};

/// Signatures one request may ask for: a bound on the work a header makes.
pub const MOST_SIGNATURES: usize = 4;

/// What every signature covers, added after the components asked for when
/// they are not among them: the answer's status, its bytes and their type.
pub const ALWAYS_COVERED: [&str; 3] = ["@status", "content-digest", "content-type"];

/// The derived components of a request a response signature may cover (with
/// `;req`, RFC 9421 section 2.4). `@target-uri` and `@scheme` are not: the
/// scheme the client used is not known behind a TLS-terminating proxy.
const REQUEST_DERIVED: [&str; 5] = [
    "@method",
    "@authority",
    "@path",
    "@query",
    "@request-target",
];

/// One signature asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    pub label: sfv::Key,
    pub components: Vec<Component>,
    /// `nonce` and `tag` as asked, signed back.
    pub extra: Parameters,
}

/// A covered component: its identifier (with its parameters) and where its
/// value comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    pub id: Item,
    pub value: Source,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// `@status`.
    Status,
    /// A field of the response.
    Field(HeaderName),
    /// A value of the request, read when it came.
    Request(String),
}

/// The signatures `value` asks for, `kid` being the key this API signs
/// with; why they cannot be made otherwise (the 400's message).
pub fn parse(value: &[u8], request: &Parts, kid: &str) -> Result<Vec<Wanted>, String> {
    let dictionary: Dictionary = Parser::new(value)
        .parse()
        .map_err(|e| format!("Not a structured dictionary (RFC 9421, section 5.1): {e}."))?;
    if dictionary.len() > MOST_SIGNATURES {
        return Err(format!("At most {MOST_SIGNATURES} signatures per request."));
    }
    dictionary
        .into_iter()
        .map(|(label, entry)| {
            let ListEntry::InnerList(list) = entry else {
                return Err(format!(
                    "`{}` must be an inner list of components, such as (\"@status\" \"content-digest\").",
                    label.as_str()
                ));
            };
            let mut components = Vec::new();
            for item in list.items {
                let component = component(item, request)?;
                if components.iter().any(|c: &Component| c.id == component.id) {
                    return Err(format!("`{}` names a component twice.", label.as_str()));
                }
                components.push(component);
            }
            for name in ALWAYS_COVERED {
                let id = Item::new(string(name));
                if !components.iter().any(|c| c.id == id) {
                    components.push(component(id, request)?);
                }
            }
            let extra = parameters(list.params, kid)?;
            Ok(Wanted {
                label,
                components,
                extra,
            })
        })
        .collect()
}

fn string(text: &str) -> BareItem {
    BareItem::String(sfv::String::from_string(text.to_owned()).expect("a component name"))
}

fn component(item: Item, request: &Parts) -> Result<Component, String> {
    let Some(name) = item.bare_item.as_string().map(|s| s.as_str().to_owned()) else {
        return Err("Components are strings, such as \"content-type\".".to_owned());
    };
    let mut req = false;
    for (key, value) in &item.params {
        match (key.as_str(), value.as_boolean()) {
            ("req", Some(true)) => req = true,
            _ => {
                return Err(format!(
                    "\"{name}\": only the `req` parameter is supported on a component."
                ))
            }
        }
    }
    let value = match (name.as_str(), req) {
        ("@status", false) => Source::Status,
        (derived, true) if REQUEST_DERIVED.contains(&derived) => {
            Source::Request(derived_value(derived, request))
        }
        (derived, false) if REQUEST_DERIVED.contains(&derived) => {
            return Err(format!(
                "\"{derived}\" is of the request: ask for \"{derived}\";req (RFC 9421, section 2.4)."
            ))
        }
        (derived, _) if derived.starts_with('@') => {
            return Err(format!(
                "\"{derived}\" cannot be signed here; derived components: \"@status\", and {} with ;req.",
                REQUEST_DERIVED.join(", ")
            ))
        }
        (field, req) => {
            let header = HeaderName::from_bytes(field.as_bytes())
                .ok()
                .filter(|h| h.as_str() == field)
                .ok_or_else(|| format!("\"{field}\" is not a lower-case field name."))?;
            if !req {
                Source::Field(header)
            } else {
                let value = field_value(request.headers.get_all(&header).iter())
                    .ok_or_else(|| format!("\"{field}\";req: the request has no such field."))?;
                Source::Request(value)
            }
        }
    };
    Ok(Component { id: item, value })
}

/// A derived component's value for `request` (RFC 9421, section 2.2).
fn derived_value(name: &str, request: &Parts) -> String {
    let uri = &request.uri;
    let path = match uri.path() {
        "" => "/",
        path => path,
    };
    match name {
        "@method" => request.method.as_str().to_owned(),
        "@authority" => request
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| uri.authority().map(|a| a.as_str()))
            .unwrap_or_default()
            .to_ascii_lowercase(),
        "@path" => path.to_owned(),
        "@query" => format!("?{}", uri.query().unwrap_or_default()),
        _ => match uri.query() {
            Some(query) => format!("{path}?{query}"),
            None => path.to_owned(),
        },
    }
}

/// A field's value as a signature base holds it (RFC 9421, section 2.1):
/// each line trimmed, joined by `, `; None when absent or not text.
pub fn field_value<'a>(
    values: impl Iterator<Item = &'a axum::http::HeaderValue>,
) -> Option<String> {
    let mut joined: Option<String> = None;
    for value in values {
        let text = value.to_str().ok()?.trim();
        match &mut joined {
            Some(joined) => {
                joined.push_str(", ");
                joined.push_str(text);
            }
            None => joined = Some(text.to_owned()),
        }
    }
    joined
}

/// The signature parameters asked for: `keyid` and `alg` must be what this
/// API signs with; `created` and `expires` are always given; `nonce` and
/// `tag` are signed back as sent.
fn parameters(params: Parameters, kid: &str) -> Result<Parameters, String> {
    let mut extra = Parameters::new();
    for (key, value) in params {
        match (key.as_str(), &value) {
            ("keyid", BareItem::String(s)) if s.as_str() == kid => {}
            ("keyid", _) => {
                return Err(format!(
                    "`keyid` must be \"{kid}\", the current key (GET /api/v1/signing-keys)."
                ))
            }
            ("alg", BareItem::String(s)) if s.as_str() == "ed25519" => {}
            ("alg", _) => return Err("`alg` must be \"ed25519\".".to_owned()),
            ("created" | "expires", BareItem::Boolean(true)) => {}
            ("created" | "expires", _) => {
                return Err(format!(
                    "`{}` is set by the signer: ask for it without a value.",
                    key.as_str()
                ))
            }
            ("nonce" | "tag", BareItem::String(_)) => {
                extra.insert(key, value);
            }
            ("nonce" | "tag", _) => return Err(format!("`{}` must be a string.", key.as_str())),
            (other, _) => {
                return Err(format!(
                    "Unknown signature parameter `{other}`; supported: keyid, alg, created, expires, nonce, tag."
                ))
            }
        }
    }
    Ok(extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str) -> Parts {
        let (parts, _) = axum::http::Request::get(uri)
            .header("host", "Rates.Example:8080")
            .header("x-trace", "a")
            .body(())
            .unwrap()
            .into_parts();
        parts
    }

    fn ids(wanted: &Wanted) -> Vec<String> {
        wanted
            .components
            .iter()
            .map(|c| {
                sfv::ItemSerializer::new()
                    .bare_item(&c.id.bare_item)
                    .parameters(&c.id.params)
                    .finish()
            })
            .collect()
    }

    #[test]
    fn the_components_asked_for_come_first_then_those_always_covered() {
        let parts = request("/api/v1/convert?from=USD&to=ETB");
        let wanted = parse(
            br#"mine=("@method";req "@query";req "etag");tag="audit";created"#,
            &parts,
            "k",
        )
        .unwrap();
        assert_eq!(wanted.len(), 1);
        assert_eq!(wanted[0].label.as_str(), "mine");
        assert_eq!(
            ids(&wanted[0]),
            [
                r#""@method";req"#,
                r#""@query";req"#,
                r#""etag""#,
                r#""@status""#,
                r#""content-digest""#,
                r#""content-type""#
            ]
        );
        assert_eq!(
            wanted[0].components[1].value,
            Source::Request("?from=USD&to=ETB".into())
        );
        assert!(wanted[0].extra.contains_key("tag"));
    }

    #[test]
    fn request_components_are_read_as_rfc_9421_derives_them() {
        let parts = request("/api/v1/rates?bankId=1");
        let value = |name| derived_value(name, &parts);
        assert_eq!(value("@authority"), "rates.example:8080");
        assert_eq!(value("@path"), "/api/v1/rates");
        assert_eq!(value("@request-target"), "/api/v1/rates?bankId=1");
        assert_eq!(derived_value("@query", &request("/x")), "?");
    }

    #[test]
    fn what_cannot_be_signed_is_refused_with_a_reason() {
        let parts = request("/api/v1/rates");
        for (header, why) in [
            ("sig1", "inner list"),
            ("sig1=(\"@method\")", ";req"),
            ("sig1=(\"@target-uri\";req)", "cannot be signed"),
            ("sig1=(\"Content-Type\")", "lower-case"),
            ("sig1=(\"x-missing\";req)", "no such field"),
            ("sig1=(\"etag\" \"etag\")", "twice"),
            ("sig1=();keyid=\"other\"", "current key"),
            ("sig1=();alg=\"rsa-pss-sha512\"", "ed25519"),
            ("sig1=();created=1", "without a value"),
            ("sig1=();foo=1", "Unknown"),
            ("a=(), b=(), c=(), d=(), e=()", "At most"),
            ("sig1=(", "structured"),
        ] {
            let error = parse(header.as_bytes(), &parts, "k").unwrap_err();
            assert!(error.contains(why), "{header}: {error}");
        }
        assert!(parse(
            br#"sig1=("x-trace";req);keyid="k";alg="ed25519""#,
            &parts,
            "k"
        )
        .is_ok());
    }
}
