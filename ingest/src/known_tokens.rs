//! Publisher tokens that authenticated lately, so that a push by a known
//! publisher asks Postgres nothing before its board-record round: the
//! round reads the token, its bank and the bank's outbox again in its one
//! statement, and the push is judged on that (`routes::boards`). So this
//! only ever answers an early yes: a token revoked, a bank deactivated or
//! in conflict with the log are refused by the round, at once and on every
//! instance, whoever made the change.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use ratewire_proto::BankId;
use ratewire_service::secret as secrets;

/// How long a token is taken as known without Postgres answering for it
/// outside a round: the longest a revoked token that pushes nowhere else
/// is remembered.
const KEEP_FOR: Duration = Duration::from_secs(300);
/// Most tokens held; past it the oldest answers are dropped all at once.
const MOST: usize = 10_000;

struct Known {
    hash: String,
    bank: BankId,
    at: Instant,
}

/// The tokens, by prefix.
#[derive(Default)]
pub struct KnownTokens {
    by_prefix: RwLock<HashMap<String, Known>>,
}

impl KnownTokens {
    /// The bank of the token `prefix` whose stored form is `hash`, if it
    /// authenticated within `KEEP_FOR`.
    pub fn bank_of(&self, prefix: &str, hash: &str) -> Option<BankId> {
        let held = self.by_prefix.read().unwrap_or_else(|e| e.into_inner());
        held.get(prefix)
            .filter(|k| k.at.elapsed() < KEEP_FOR && secrets::same_hash(&k.hash, hash))
            .map(|k| k.bank)
    }

    /// Notes a token Postgres has just found live, for an active bank.
    pub fn remember(&self, prefix: &str, hash: String, bank: BankId) {
        let mut held = self.by_prefix.write().unwrap_or_else(|e| e.into_inner());
        if held.len() >= MOST && !held.contains_key(prefix) {
            held.retain(|_, k| k.at.elapsed() < KEEP_FOR);
            if held.len() >= MOST {
                held.clear();
            }
        }
        held.insert(
            prefix.to_owned(),
            Known {
                hash,
                bank,
                at: Instant::now(),
            },
        );
    }

    /// Drops a token a round refused.
    pub fn forget(&self, prefix: &str) {
        self.by_prefix
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(prefix);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bank(id: i64) -> BankId {
        BankId::new(id).unwrap()
    }

    #[test]
    fn a_token_is_known_only_with_its_own_secret() {
        let known = KnownTokens::default();
        known.remember("abc", secrets::hash("rwp_abc_one"), bank(7));
        assert_eq!(
            known.bank_of("abc", &secrets::hash("rwp_abc_one")),
            Some(bank(7))
        );
        assert_eq!(known.bank_of("abc", &secrets::hash("rwp_abc_two")), None);
        assert_eq!(known.bank_of("abd", &secrets::hash("rwp_abc_one")), None);
    }

    #[test]
    fn a_refused_token_is_forgotten() {
        let known = KnownTokens::default();
        known.remember("abc", secrets::hash("rwp_abc_one"), bank(7));
        known.forget("abc");
        assert_eq!(known.bank_of("abc", &secrets::hash("rwp_abc_one")), None);
    }

    #[test]
    fn the_tokens_held_are_bounded() {
        let known = KnownTokens::default();
        for i in 0..MOST + 10 {
            known.remember(&format!("p{i}"), secrets::hash("x"), bank(1));
        }
        assert!(known.by_prefix.read().unwrap().len() <= MOST);
        assert_eq!(
            known.bank_of(&format!("p{}", MOST + 9), &secrets::hash("x")),
            Some(bank(1))
        );
    }
}
