//! The messages this instance holds: claimed (leased) and waiting for a
//! slot, or in flight. Claiming a few rounds ahead lets a finished call
//! start the next at once, with no database round trip between them;
//! the outbox is read beside the calls, not between them.
//!
//! What one endpoint may hold is bounded so that its last message still
//! starts and ends well inside its lease (`HELD_PER_SLOT` rounds of the
//! longest call), and a message held too long is let go unsent: its lease
//! ends and it is claimed again, with the same `webhook-id`.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::Claimed;

/// Messages held per endpoint slot: in flight, plus those waiting.
pub const HELD_PER_SLOT: usize = 4;
/// A message waiting longer than this since its claim is let go: with a
/// 60 s lease and calls of at most 10 s, it could otherwise end after
/// its lease, while another instance sends it too.
const WAIT_AT_MOST: Duration = Duration::from_secs(40);

#[derive(Default)]
pub struct Ready {
    waiting: HashMap<Uuid, VecDeque<(Instant, Claimed)>>,
    /// Endpoints with messages waiting, in turn.
    turn: VecDeque<Uuid>,
    flying: HashMap<Uuid, usize>,
    flying_total: usize,
}

impl Ready {
    pub fn add(&mut self, message: Claimed) {
        let endpoint = message.webhook_id;
        let queue = self.waiting.entry(endpoint).or_default();
        if queue.is_empty() {
            self.turn.push_back(endpoint);
        }
        queue.push_back((Instant::now(), message));
    }

    /// The next message to send, taking endpoints in turn: `None` when
    /// `total` calls are in flight, or every endpoint with messages has
    /// `per_endpoint` in flight. Messages held too long are let go, and
    /// returned in `expired`.
    pub fn next(
        &mut self,
        per_endpoint: usize,
        total: usize,
        expired: &mut Vec<Claimed>,
    ) -> Option<Claimed> {
        if self.flying_total >= total {
            return None;
        }
        for _ in 0..self.turn.len() {
            let endpoint = self.turn.pop_front()?;
            if self.flying.get(&endpoint).copied().unwrap_or(0) >= per_endpoint {
                self.turn.push_back(endpoint);
                continue;
            }
            let Some(queue) = self.waiting.get_mut(&endpoint) else {
                continue;
            };
            let found = loop {
                match queue.pop_front() {
                    Some((claimed_at, message)) if claimed_at.elapsed() > WAIT_AT_MOST => {
                        expired.push(message);
                    }
                    other => break other.map(|(_, message)| message),
                }
            };
            if queue.is_empty() {
                self.waiting.remove(&endpoint);
            } else {
                self.turn.push_back(endpoint);
            }
            if let Some(message) = found {
                *self.flying.entry(endpoint).or_default() += 1;
                self.flying_total += 1;
                return Some(message);
            }
        }
        None
    }

    /// A call to `endpoint` is over.
    pub fn done(&mut self, endpoint: Uuid) {
        if let Some(n) = self.flying.get_mut(&endpoint) {
            *n -= 1;
            self.flying_total -= 1;
            if *n == 0 {
                self.flying.remove(&endpoint);
            }
        }
    }

    /// What each endpoint holds (waiting plus in flight), as the claim
    /// counts it.
    pub fn held(&self) -> (Vec<Uuid>, Vec<i32>) {
        let mut held: HashMap<Uuid, usize> = self.flying.clone();
        for (endpoint, queue) in &self.waiting {
            *held.entry(*endpoint).or_default() += queue.len();
        }
        held.into_iter().map(|(id, n)| (id, n as i32)).unzip()
    }

    pub fn held_total(&self) -> usize {
        self.flying_total + self.waiting.values().map(VecDeque::len).sum::<usize>()
    }

    /// Every message still waiting (at shutdown: their leases are given
    /// back).
    pub fn drain(&mut self) -> Vec<Claimed> {
        self.turn.clear();
        self.waiting
            .drain()
            .flat_map(|(_, queue)| queue.into_iter().map(|(_, m)| m))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(endpoint: Uuid, n: u32) -> Claimed {
        Claimed {
            id: format!("msg_{n}"),
            webhook_id: endpoint,
            body: String::new(),
            attempts: 1,
            traceparent: None,
            url: String::new(),
            secret: Vec::new(),
            previous_secret: None,
        }
    }

    #[test]
    fn endpoints_take_turns_and_each_keeps_to_its_slots() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut ready = Ready::default();
        for n in 0..4 {
            ready.add(message(a, n));
        }
        ready.add(message(b, 9));
        let mut expired = Vec::new();
        let sent: Vec<Uuid> = std::iter::from_fn(|| ready.next(2, 10, &mut expired))
            .map(|m| m.webhook_id)
            .collect();
        assert_eq!(sent, [a, b, a], "a has two slots, b one message");
        assert_eq!(ready.held_total(), 5);
        ready.done(a);
        assert_eq!(
            ready.next(2, 10, &mut expired).map(|m| m.id),
            Some("msg_2".into())
        );
        assert_eq!(ready.held_total(), 4);
        assert!(expired.is_empty());
    }

    #[test]
    fn the_total_bounds_the_calls_in_flight_and_drain_gives_back_the_rest() {
        let a = Uuid::from_u128(1);
        let mut ready = Ready::default();
        for n in 0..3 {
            ready.add(message(a, n));
        }
        let mut expired = Vec::new();
        assert!(ready.next(8, 1, &mut expired).is_some());
        assert!(ready.next(8, 1, &mut expired).is_none());
        assert_eq!(ready.drain().len(), 2);
        assert_eq!(ready.held(), (vec![a], vec![1]), "the one in flight");
    }
}
