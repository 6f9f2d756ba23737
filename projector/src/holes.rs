//! Offsets that hold no message, and when the fold may step over them.
//!
//! A partition's offsets need not reach a consumer one by one: compaction
//! removes records, transaction markers take offsets, and a broker may serve
//! a fetch that starts inside a record batch from the next batch (some
//! Kafka-compatible brokers do), so a read started at offset P can begin
//! past P although P exists.
//! The fold keeps its stored position until the message at that position
//! arrives; it steps over a hole only when the read itself proves the hole:
//! within one read (no re-assignment in between) the message before the hole
//! was delivered and the next one delivered is past it, or the read started
//! at the log's first offset. A read whose first message lands past the
//! stored position proves nothing (it may have started inside a batch, or be
//! left over from before a re-assignment); the fold loop starts that
//! partition again further back ([`Rewind`]).

use std::collections::BTreeMap;

/// Offsets `from..to` of a partition hold no message for this consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    pub partition: i32,
    pub from: i64,
    pub to: i64,
}

/// Where a partition's read was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub offset: i64,
    /// The offset is the first the broker holds: nothing before the first
    /// message delivered can be read.
    pub at_log_start: bool,
}

#[derive(Debug, Clone, Copy)]
struct Read {
    start: Start,
    last: Option<i64>,
}

/// What the consumer delivered per partition since it was last assigned.
#[derive(Debug, Default)]
pub struct Reads {
    reads: BTreeMap<i32, Read>,
}

impl Reads {
    /// The consumer was (re-)assigned: every read starts afresh. Messages
    /// taken from the consumer before this call must not be passed to
    /// [`Reads::holes`] afterwards.
    pub fn started(&mut self, starts: &BTreeMap<i32, Start>) {
        self.reads = starts
            .iter()
            .map(|(partition, start)| {
                (
                    *partition,
                    Read {
                        start: *start,
                        last: None,
                    },
                )
            })
            .collect();
    }

    /// The holes the next messages delivered, as (partition, offset) in
    /// order, prove.
    pub fn holes(&mut self, delivered: impl IntoIterator<Item = (i32, i64)>) -> Vec<Hole> {
        let mut holes = Vec::new();
        for (partition, offset) in delivered {
            let Some(read) = self.reads.get_mut(&partition) else {
                continue;
            };
            let from = match read.last {
                Some(last) => Some(last + 1),
                None if read.start.at_log_start => Some(read.start.offset),
                None => None,
            };
            if let Some(from) = from.filter(|from| offset > *from) {
                holes.push(Hole {
                    partition,
                    from,
                    to: offset,
                });
            }
            read.last = Some(read.last.map_or(offset, |l| l.max(offset)));
        }
        holes
    }
}

/// How far back a partition is started after reads that began past its
/// stored position: 64 offsets, then eight times as many each time the same
/// position is missed again, down to the log's first offset.
#[derive(Debug, Default)]
pub struct Rewind {
    /// Per partition: the stored position missed, and how far back to start.
    by: BTreeMap<i32, (i64, i64)>,
}

impl Rewind {
    const FIRST: i64 = 64;
    const FACTOR: i64 = 8;

    /// A read of `partition` began past `position`.
    pub fn missed(&mut self, partition: i32, position: i64) {
        let entry = self.by.entry(partition).or_insert((position, 0));
        *entry = if entry.0 == position && entry.1 > 0 {
            (position, entry.1.saturating_mul(Self::FACTOR))
        } else {
            (position, Self::FIRST)
        };
    }

    /// Where to start `partition`, stored at `position`, when the log now
    /// begins at `low`.
    pub fn start(&mut self, partition: i32, position: i64, low: i64) -> Start {
        let back = match self.by.get(&partition) {
            Some((missed, back)) if *missed == position => *back,
            Some(_) => {
                // The position moved on: the miss is behind us.
                self.by.remove(&partition);
                0
            }
            None => 0,
        };
        let offset = position.saturating_sub(back).max(low);
        Start {
            offset,
            at_log_start: offset <= low,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(partition: i32, offset: i64) -> (i32, i64) {
        (partition, offset)
    }

    fn started(partition: i32, offset: i64, at_log_start: bool) -> Reads {
        let mut reads = Reads::default();
        reads.started(&BTreeMap::from([(
            partition,
            Start {
                offset,
                at_log_start,
            },
        )]));
        reads
    }

    #[test]
    fn a_jump_inside_one_read_is_a_hole() {
        let mut reads = started(0, 10, false);
        assert_eq!(reads.holes([message(0, 10), message(0, 11)]), vec![]);
        assert_eq!(
            reads.holes([message(0, 14), message(0, 15)]),
            vec![Hole {
                partition: 0,
                from: 12,
                to: 14
            }]
        );
    }

    #[test]
    fn a_read_that_begins_past_its_start_proves_nothing() {
        let mut reads = started(0, 10, false);
        assert_eq!(reads.holes([message(0, 12), message(0, 13)]), vec![]);
    }

    #[test]
    fn from_the_log_start_the_first_message_proves_the_offsets_before_it() {
        let mut reads = started(0, 0, true);
        assert_eq!(
            reads.holes([message(0, 3)]),
            vec![Hole {
                partition: 0,
                from: 0,
                to: 3
            }]
        );
    }

    #[test]
    fn a_new_assignment_forgets_what_was_delivered() {
        let mut reads = started(0, 10, false);
        reads.holes([message(0, 10)]);
        reads.started(&BTreeMap::from([(
            0,
            Start {
                offset: 10,
                at_log_start: false,
            },
        )]));
        assert_eq!(reads.holes([message(0, 20)]), vec![]);
    }

    #[test]
    fn other_partitions_do_not_prove_anything_for_each_other() {
        let mut reads = started(0, 10, false);
        assert_eq!(reads.holes([message(1, 10), message(1, 30)]), vec![]);
    }

    #[test]
    fn rewinds_grow_while_the_same_position_is_missed() {
        let mut rewind = Rewind::default();
        assert_eq!(rewind.start(0, 5000, 0).offset, 5000);
        rewind.missed(0, 5000);
        assert_eq!(rewind.start(0, 5000, 0).offset, 5000 - 64);
        rewind.missed(0, 5000);
        assert_eq!(rewind.start(0, 5000, 0).offset, 5000 - 512);
        rewind.missed(0, 5000);
        let start = rewind.start(0, 5000, 1000);
        assert_eq!(
            start,
            Start {
                offset: 1000,
                at_log_start: true
            }
        );
        // Once the position moves on, reads start at it again.
        assert_eq!(rewind.start(0, 5001, 0).offset, 5001);
        rewind.missed(0, 5001);
        assert_eq!(rewind.start(0, 5001, 0).offset, 5001 - 64);
    }
}
