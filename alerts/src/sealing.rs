//! Webhook secrets at rest: sealed with AES-256-GCM under the operators'
//! key (`RATEWIRE_WEBHOOK_SECRETS_KEY`), bound to their webhook's id, so a
//! copy of the database alone signs nothing and a sealed secret moved to
//! another webhook's row does not open.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::RngCore;
use uuid::Uuid;

use crate::signing::Secret;

const NONCE_BYTES: usize = 12;

/// The sealing key (never printed).
#[derive(Clone)]
pub struct SealingKey(Aes256Gcm);

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealingKey(..)")
    }
}

impl std::str::FromStr for SealingKey {
    type Err = String;

    /// 32 bytes, base64 (`openssl rand -base64 32`).
    fn from_str(s: &str) -> Result<Self, String> {
        let bytes = STANDARD
            .decode(s.trim())
            .map_err(|_| "must be base64 (openssl rand -base64 32)".to_string())?;
        let cipher = Aes256Gcm::new_from_slice(&bytes)
            .map_err(|_| format!("must be 32 bytes, base64; this is {}", bytes.len()))?;
        Ok(SealingKey(cipher))
    }
}

impl SealingKey {
    pub fn seal(&self, webhook: Uuid, secret: &Secret) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let sealed = self
            .0
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: secret.bytes(),
                    aad: webhook.as_bytes(),
                },
            )
            .expect("sealing a short secret cannot fail");
        [&nonce[..], &sealed].concat()
    }

    /// `None` when `sealed` was not sealed under this key for `webhook`.
    pub fn open(&self, webhook: Uuid, sealed: &[u8]) -> Option<Secret> {
        if sealed.len() < NONCE_BYTES {
            return None;
        }
        let (nonce, body) = sealed.split_at(NONCE_BYTES);
        self.0
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: webhook.as_bytes(),
                },
            )
            .ok()
            .map(Secret::from_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SealingKey {
        STANDARD.encode([7u8; 32]).parse().unwrap()
    }

    #[test]
    fn a_sealed_secret_opens_only_for_its_webhook_and_key() {
        let (id, other) = (Uuid::new_v4(), Uuid::new_v4());
        let secret = Secret::generate();
        let sealed = key().seal(id, &secret);
        assert!(!sealed
            .windows(secret.bytes().len())
            .any(|w| w == secret.bytes()));
        assert_eq!(key().open(id, &sealed), Some(secret));
        assert_eq!(key().open(other, &sealed), None);
        let another: SealingKey = STANDARD.encode([8u8; 32]).parse().unwrap();
        assert_eq!(another.open(id, &sealed), None);
    }

    #[test]
    fn the_key_must_be_32_bytes_of_base64() {
        assert!("not base64!".parse::<SealingKey>().is_err());
        let short = STANDARD.encode([1u8; 16]);
        assert!(short
            .parse::<SealingKey>()
            .unwrap_err()
            .contains("32 bytes"));
        assert_eq!(format!("{:?}", key()), "SealingKey(..)");
    }
}
