//! Each event's known-at time: when its append was acknowledged, which is
//! the message's timestamp (the broker's log-append time on a topic made
//! with `message.timestamp.type=LogAppendTime`; the producer's time on a
//! CreateTime topic), to the millisecond. A partition's times never go
//! back: an event is known no earlier than the one before it on its
//! partition, so that "folded past T" means the same thing on every
//! replay. Only the log decides these times, never the clock of the
//! process folding them.

use std::collections::BTreeMap;

use chrono::{DateTime, SubsecRound, Utc};

use super::message::Incoming;

/// The last known-at time of each partition, moved on by every event.
#[derive(Debug, Default, Clone)]
pub struct Clock {
    last: BTreeMap<i32, DateTime<Utc>>,
}

impl Clock {
    /// A clock starting where the partitions' stored times left off.
    pub fn new(stored: BTreeMap<i32, DateTime<Utc>>) -> Self {
        Self { last: stored }
    }

    /// The known-at time of the event `message` holds, received at
    /// `occurred_at` (used when the log gives no time).
    pub fn stamp(&mut self, message: &Incoming, occurred_at: DateTime<Utc>) -> DateTime<Utc> {
        let own = message.timestamp.unwrap_or(occurred_at).trunc_subsecs(3);
        let last = self.last.entry(message.partition).or_insert(own);
        *last = (*last).max(own);
        *last
    }

    /// Each partition's last known-at time.
    pub fn last(&self) -> &BTreeMap<i32, DateTime<Utc>> {
        &self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewire_proto::BankId;

    fn at(partition: i32, millis: Option<i64>) -> Incoming {
        let mut m = Incoming::keyed(partition, 0, BankId::new(1).unwrap(), Vec::new());
        m.timestamp = millis.and_then(DateTime::from_timestamp_millis);
        m
    }

    #[test]
    fn a_partitions_known_at_times_never_go_back() {
        let t = |ms| DateTime::from_timestamp_millis(ms).unwrap();
        let mut clock = Clock::new(BTreeMap::from([(0, t(1_000))]));
        assert_eq!(clock.stamp(&at(0, Some(900)), t(0)), t(1_000));
        assert_eq!(clock.stamp(&at(0, Some(1_500)), t(0)), t(1_500));
        assert_eq!(clock.stamp(&at(1, Some(900)), t(0)), t(900));
        assert_eq!(clock.stamp(&at(1, None), t(2_000)), t(2_000));
    }

    #[test]
    fn a_time_is_kept_to_the_millisecond() {
        let received = DateTime::parse_from_rfc3339("2026-11-29T10:00:00.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        let stamped = Clock::default().stamp(&at(0, None), received);
        assert_eq!(stamped.timestamp_subsec_micros(), 123_000);
    }
}
