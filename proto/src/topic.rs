//! Where events are published and how they are partitioned.

use crate::ids::BankId;

/// The topic every ratewire event is published to unless configured otherwise.
/// The `v1` names the envelope format, not an event version: events evolve
/// inside it by the compatibility rule in the crate docs.
pub const DEFAULT_TOPIC: &str = "ratewire.events.v1";

/// The Postgres notification channel on which ingest says, after the broker
/// acknowledged an event, that the topic named in the payload has new events.
///
/// Only a hint, for projectors that pause their reads while the log is quiet
/// (a broker that holds every fetch for its full wait makes polling costly):
/// nothing depends on it arriving, since a paused projector also looks at the
/// log on a timer. It reaches projectors on the same database as ingest.
pub const APPENDED_CHANNEL: &str = "ratewire_log_appended";

/// The message key: the bank id in decimal.
///
/// Keying by bank puts all of a bank's events on one partition, which is what
/// gives the projector per-bank ordering; changing it would reorder history.
pub fn partition_key(bank_id: BankId) -> String {
    bank_id.get().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_key_is_the_decimal_bank_id() {
        assert_eq!(partition_key(BankId::new(42).unwrap()), "42");
    }
}
