//! Which of a batch's messages are applied, from the partitions' stored
//! positions alone (no I/O): a message below its partition's next offset
//! was applied before; one beyond it is applied only across a hole the
//! read proved empty, otherwise the partition's rest of the batch waits
//! (a gap).

use ratewire_proto::{decode, Decoded, Event};

use super::message::Incoming;
use super::outcome::{BatchOutcome, Gap};
use crate::holes::Hole;

/// The messages of `batch` to apply, in order. `outcome.positions` holds
/// the partitions' stored next offsets and is moved past them; what is
/// skipped, and the gaps and holes met, are counted in `outcome`.
pub fn plan<'a>(
    batch: &'a [Incoming],
    holes: &[Hole],
    outcome: &mut BatchOutcome,
) -> Vec<&'a Incoming> {
    let mut apply = Vec::with_capacity(batch.len());
    for message in batch {
        if outcome
            .gaps
            .iter()
            .any(|g| g.partition == message.partition)
        {
            continue;
        }
        let next = outcome.positions.entry(message.partition).or_insert(0);
        if message.offset < *next {
            outcome.skipped += 1;
            // Applied already. When that was this projector's own batch
            // whose commit succeeded but answered an error, its views were
            // never refreshed: refresh them now (writing a view again is
            // harmless). Decoded on receipt; one that broke a rule of the
            // message (its key, its time) still names its bank.
            let again;
            let decoded = match message.decode() {
                Ok(decoded) => Some(decoded),
                Err(_) => {
                    again = decode(&message.payload).ok();
                    again.as_ref()
                }
            };
            if let Some(Decoded::Event(envelope)) = decoded {
                outcome.touch(envelope);
                if let Event::BoardPublished(board) = &envelope.event {
                    outcome
                        .currencies
                        .extend(board.rates().iter().map(|r| r.currency()));
                }
            }
            continue;
        }
        if message.offset > *next {
            let hole = Hole {
                partition: message.partition,
                from: *next,
                to: message.offset,
            };
            let proven = holes
                .iter()
                .any(|h| h.partition == hole.partition && h.from <= hole.from && h.to == hole.to);
            if !proven {
                outcome.gaps.push(Gap {
                    partition: message.partition,
                    expected: *next,
                    found: message.offset,
                });
                continue;
            }
            outcome.crossed.push(hole);
        }
        *next = message.offset + 1;
        apply.push(message);
    }
    apply
}
