//! The signing keys: the current private key (`RATEWIRE_SIGNING_KEY_FILE`)
//! and the public keys of retired ones (`RATEWIRE_SIGNING_RETIRED_KEYS_FILE`),
//! each listed until the last signature it made expires, and the JWK Set
//! that publishes them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// The key answers are signed with, and its id.
#[derive(Clone)]
pub struct CurrentKey {
    key: Arc<SigningKey>,
    pub kid: String,
}

impl std::fmt::Debug for CurrentKey {
    // Never the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentKey")
            .field("kid", &self.kid)
            .finish()
    }
}

impl CurrentKey {
    /// Reads a PKCS#8 PEM Ed25519 private key (`openssl genpkey -algorithm
    /// ed25519`).
    pub fn read(path: &Path) -> Result<Self, String> {
        let pem = read_text(path)?;
        let key = SigningKey::from_pkcs8_pem(&pem).map_err(|e| {
            format!(
                "{} is not a PKCS#8 PEM Ed25519 private key: {e}",
                path.display()
            )
        })?;
        Ok(Self::new(key))
    }

    pub fn new(key: SigningKey) -> Self {
        let kid = thumbprint(&key.verifying_key());
        Self {
            key: Arc::new(key),
            kid,
        }
    }

    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }

    pub fn public(&self) -> VerifyingKey {
        self.key.verifying_key()
    }
}

/// The public key of a key no longer signing, listed until `expires` (when
/// the last signature it made expires).
#[derive(Debug, Clone)]
pub struct RetiredKey {
    pub public: VerifyingKey,
    pub expires: DateTime<Utc>,
}

/// The retired keys, one a line: `<expires, RFC 3339> <PEM file>`. The file
/// holds the public key (`openssl pkey -pubout`) or the old private key;
/// a relative path is taken from the list's directory. Blank lines and `#`
/// comments are skipped.
#[derive(Debug, Clone, Default)]
pub struct RetiredKeys(pub Vec<RetiredKey>);

impl RetiredKeys {
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = read_text(path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |why: String| format!("{} line {}: {why}", path.display(), number + 1);
            let (expires, file) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| at("expected `<expires> <PEM file>`".to_owned()))?;
            let expires = DateTime::parse_from_rfc3339(expires)
                .map_err(|e| at(format!("`{expires}` is not an RFC 3339 instant: {e}")))?
                .with_timezone(&Utc);
            let file = dir.join(PathBuf::from(file.trim()));
            let pem = read_text(&file).map_err(at)?;
            let public = VerifyingKey::from_public_key_pem(&pem)
                .or_else(|_| SigningKey::from_pkcs8_pem(&pem).map(|k| k.verifying_key()))
                .map_err(|_| {
                    at(format!(
                        "{} holds no PEM Ed25519 key (public or PKCS#8 private)",
                        file.display()
                    ))
                })?;
            keys.push(RetiredKey { public, expires });
        }
        Ok(Self(keys))
    }
}

/// `RATEWIRE_SIGNING_KEY_FILE`'s parser.
pub fn parse_key(path: &str) -> Result<CurrentKey, String> {
    CurrentKey::read(Path::new(path))
}

/// `RATEWIRE_SIGNING_RETIRED_KEYS_FILE`'s parser.
pub fn parse_retired(path: &str) -> Result<RetiredKeys, String> {
    RetiredKeys::read(Path::new(path))
}

fn read_text(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Every key a verifier may need, and how long signatures last.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    /// None: signing is off, `Accept-Signature` is ignored.
    pub current: Option<CurrentKey>,
    pub retired: Vec<RetiredKey>,
    /// Seconds from a signature's `created` to its `expires`.
    pub validity_secs: u64,
}

/// One key of the JWK Set (RFC 8037: an Ed25519 key is `OKP`).
#[derive(Debug, Serialize, PartialEq)]
pub struct Jwk {
    pub kty: &'static str,
    pub crv: &'static str,
    pub kid: String,
    pub x: String,
    #[serde(rename = "use")]
    pub use_: &'static str,
    pub alg: &'static str,
}

impl KeySet {
    /// The public keys a signature still unexpired at `now` may name: the
    /// current key first, then each retired key until its `expires`.
    pub fn published(&self, now: DateTime<Utc>) -> Vec<Jwk> {
        let current = self.current.iter().map(CurrentKey::public);
        let retired = self
            .retired
            .iter()
            .filter(|k| k.expires > now)
            .map(|k| k.public);
        let mut keys: Vec<Jwk> = Vec::new();
        for public in current.chain(retired) {
            let jwk = jwk(&public);
            if !keys.iter().any(|k| k.kid == jwk.kid) {
                keys.push(jwk);
            }
        }
        keys
    }
}

fn jwk(public: &VerifyingKey) -> Jwk {
    Jwk {
        kty: "OKP",
        crv: "Ed25519",
        kid: thumbprint(public),
        x: URL_SAFE_NO_PAD.encode(public.as_bytes()),
        use_: "sig",
        alg: "EdDSA",
    }
}

/// The key's id: its JWK thumbprint (RFC 7638, SHA-256), so the id is the
/// key's own and no setting can name two keys alike.
pub fn thumbprint(public: &VerifyingKey) -> String {
    // The required members in lexicographic order, without whitespace.
    let x = URL_SAFE_NO_PAD.encode(public.as_bytes());
    let canonical = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thumbprint_is_rfc_8037s_example() {
        // RFC 8037, appendix A.3.
        let x = URL_SAFE_NO_PAD
            .decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
            .unwrap();
        let public = VerifyingKey::from_bytes(&x.try_into().unwrap()).unwrap();
        assert_eq!(
            thumbprint(&public),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }

    #[test]
    fn a_retired_key_is_listed_until_it_expires() {
        let current = CurrentKey::new(SigningKey::from_bytes(&[1; 32]));
        let old = SigningKey::from_bytes(&[2; 32]).verifying_key();
        let now = Utc::now();
        let set = KeySet {
            current: Some(current.clone()),
            retired: vec![RetiredKey {
                public: old,
                expires: now + chrono::Duration::hours(1),
            }],
            validity_secs: 60,
        };
        let kids = |at| {
            set.published(at)
                .into_iter()
                .map(|k| k.kid)
                .collect::<Vec<_>>()
        };
        assert_eq!(kids(now), [current.kid.clone(), thumbprint(&old)]);
        assert_eq!(kids(now + chrono::Duration::hours(2)), [current.kid]);
    }
}
