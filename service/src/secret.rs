//! The credential format every ratewire secret shares (publisher tokens,
//! API keys): generated at random, shown once, stored as a SHA-256 hash and
//! named by a short public prefix; and the operators' token check. It lives
//! here because ingest and the API must agree on it.
//!
//! A fast hash is enough: the secrets are 128 random bits, not passwords, so
//! there is nothing to brute-force.

use axum::http::header::AUTHORIZATION;
use axum::http::HeaderMap;
use rand::distributions::Alphanumeric;
use rand::Rng;
use sha2::{Digest, Sha256};

/// A freshly made secret: `{kind}_{prefix}_{random}`.
pub struct NewSecret {
    pub prefix: String,
    pub secret: String,
    pub hash: String,
}

pub fn generate(kind: &str) -> NewSecret {
    let mut rng = rand::thread_rng();
    let prefix: String = (&mut rng)
        .sample_iter(Alphanumeric)
        .take(8)
        .map(char::from)
        .collect();
    let body: String = (&mut rng)
        .sample_iter(Alphanumeric)
        .take(32)
        .map(char::from)
        .collect();
    let secret = format!("{kind}_{prefix}_{body}");
    let hash = hash(&secret);
    NewSecret {
        prefix,
        secret,
        hash,
    }
}

/// The stored form of `secret`: its [`digest`] in hex.
pub fn hash(secret: &str) -> String {
    hex::encode(digest(secret))
}

/// The SHA-256 of `secret`, raw (what [`hash`] writes in hex).
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// The prefix of a well-formed secret of `kind`, if it is one.
pub fn prefix_of<'a>(kind: &str, secret: &'a str) -> Option<&'a str> {
    let rest = secret.strip_prefix(kind)?.strip_prefix('_')?;
    let (prefix, body) = rest.split_once('_')?;
    (is_prefix(prefix) && body.len() == 32 && body.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(prefix)
}

/// Whether `prefix` has the form of a secret's prefix: no secret has
/// another, so nothing else needs looking up.
pub fn is_prefix(prefix: &str) -> bool {
    prefix.len() == 8 && prefix.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The token of an `Authorization: Bearer <token>` header value.
pub fn bearer(authorization: &str) -> Option<&str> {
    authorization
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Why an operator call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorDenied {
    Disabled,
    Missing,
    Invalid,
}

impl OperatorDenied {
    pub fn message(self) -> &'static str {
        match self {
            OperatorDenied::Disabled => {
                "Operator endpoints are disabled: RATEWIRE_ADMIN_TOKEN is not set"
            }
            OperatorDenied::Missing => "Operator token is required",
            OperatorDenied::Invalid => "Invalid operator token",
        }
    }
}

/// Checks a request's `Authorization` header against the operators' token;
/// with no token configured, every call is refused.
pub fn check_operator_headers(
    headers: &HeaderMap,
    expected: Option<&str>,
) -> Result<(), OperatorDenied> {
    let authorization = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    check_operator(authorization, expected)
}

/// Checks an `Authorization` header value against the operators' token;
/// with no token configured, every call is refused.
pub fn check_operator(
    authorization: Option<&str>,
    expected: Option<&str>,
) -> Result<(), OperatorDenied> {
    let expected = expected
        .filter(|t| !t.is_empty())
        .ok_or(OperatorDenied::Disabled)?;
    let given = authorization
        .and_then(bearer)
        .ok_or(OperatorDenied::Missing)?;
    if matches(given, expected) {
        Ok(())
    } else {
        Err(OperatorDenied::Invalid)
    }
}

/// Whether `given` equals `expected`, compared through their hashes so the
/// time taken says nothing about where they differ.
pub fn matches(given: &str, expected: &str) -> bool {
    same_hash(&hash(given), &hash(expected))
}

/// Compares two hex hashes without an early exit.
pub fn same_hash(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_secret_names_its_prefix_and_matches_its_hash() {
        let s = generate("rwp");
        assert_eq!(prefix_of("rwp", &s.secret), Some(s.prefix.as_str()));
        assert!(same_hash(&hash(&s.secret), &s.hash));
        assert_ne!(generate("rwp").secret, s.secret);
    }

    #[test]
    fn operators_need_the_configured_token() {
        assert_eq!(
            check_operator(Some("Bearer s3cret"), Some("s3cret")),
            Ok(())
        );
        assert_eq!(
            check_operator(Some("Bearer wrong"), Some("s3cret")),
            Err(OperatorDenied::Invalid)
        );
        assert_eq!(
            check_operator(Some("Basic s3cret"), Some("s3cret")),
            Err(OperatorDenied::Missing)
        );
        assert_eq!(
            check_operator(None, Some("s3cret")),
            Err(OperatorDenied::Missing)
        );
        assert_eq!(
            check_operator(Some("Bearer "), None),
            Err(OperatorDenied::Disabled)
        );
    }

    #[test]
    fn malformed_secrets_have_no_prefix() {
        assert_eq!(prefix_of("rwp", "rwp_short"), None);
        assert_eq!(
            prefix_of("rwp", "rwk_abcdefgh_0123456789abcdef0123456789abcdef"),
            None
        );
        assert_eq!(prefix_of("rwp", ""), None);
    }
}
