//! Standard Webhooks 1.0 signatures: `v1,` + base64 of HMAC-SHA256 over
//! `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the secret's
//! bytes (a secret is written `whsec_` + base64).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// Random bytes in a new secret (the spec asks for 24 to 64).
const SECRET_BYTES: usize = 32;
const PREFIX: &str = "whsec_";

/// A signing secret's bytes (never printed).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    pub fn generate() -> Self {
        let mut bytes = vec![0; SECRET_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Secret(bytes)
    }

    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Secret(bytes)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// As shown to its owner: `whsec_` + base64.
    pub fn encoded(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(&self.0))
    }

    /// A secret as written (with or without its `whsec_` prefix).
    pub fn decode(written: &str) -> Option<Self> {
        let base64 = written.strip_prefix(PREFIX).unwrap_or(written);
        STANDARD.decode(base64).ok().map(Secret)
    }

    /// One signature: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The `webhook-signature` header: one signature per secret in force,
/// space separated (during a rotation receivers may hold either).
pub fn signature_header(secrets: &[&Secret], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| s.sign(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of the Standard Webhooks specification.
    #[test]
    fn signs_the_specifications_test_vector() {
        let secret = Secret::decode("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            secret.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_new_secret_reads_back_and_has_enough_bytes() {
        let secret = Secret::generate();
        let written = secret.encoded();
        assert!(written.starts_with("whsec_"));
        assert_eq!(Secret::decode(&written), Some(secret.clone()));
        assert!(secret.bytes().len() >= 24);
        assert_ne!(Secret::generate(), secret);
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }

    #[test]
    fn during_a_rotation_both_secrets_sign() {
        let (new, old) = (Secret::generate(), Secret::generate());
        let header = signature_header(&[&new, &old], "msg_1", 1, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(
            parts,
            [new.sign("msg_1", 1, b"{}"), old.sign("msg_1", 1, b"{}")]
        );
    }
}
