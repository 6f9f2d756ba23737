//! Live deliveries routed to the subscribers that want them.
//!
//! A broadcast channel wakes every subscriber for every delivery, so with
//! 10,000 subscribers each following one bank, a board costs 10,000 task
//! wake-ups to reach 200 of them. Here subscribers are indexed by what
//! they follow (boards of a bank or of any bank, best rates of a currency
//! or of any currency), and a delivery is offered only to those listed
//! under its bank or currency. The one relay task offers deliveries in log
//! order, so each subscriber still receives them in that order.
//!
//! Each subscriber has a bounded queue of its own. One that lets it fill
//! has fallen behind: it is taken off the lists, receives what is queued,
//! then learns it was dropped ([`Ended::Behind`]).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ratewire_proto::{BankId, CurrencyCode};
use tokio::sync::mpsc;

use crate::live::delivery::Delivery;

/// What a subscriber follows; empty lists mean any.
#[derive(Debug, Clone, Default)]
pub struct Interest {
    pub boards: bool,
    pub banks: Vec<BankId>,
    pub best: bool,
    /// Currencies of best rates. Boards filtered by currency are listed
    /// under their banks (or any bank) and filtered by the subscriber.
    pub currencies: Vec<CurrencyCode>,
    /// The key (prefix) whose alerts it receives.
    pub alerts_of: Option<String>,
}

/// Why a subscriber's deliveries ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Its queue filled: it did not keep up.
    Behind,
    /// The relay is gone (the server is stopping).
    Closed,
}

struct Route {
    sender: mpsc::Sender<Arc<Delivery>>,
    behind: Arc<AtomicBool>,
}

type Listed = HashMap<u64, Arc<Route>>;

#[derive(Default)]
struct Lists {
    boards_of: HashMap<BankId, Listed>,
    boards_any: Listed,
    best_of: HashMap<CurrencyCode, Listed>,
    best_any: Listed,
    alerts_of: HashMap<String, Listed>,
    /// Every subscriber with what it follows, for resets and removal.
    every: HashMap<u64, (Arc<Route>, Interest)>,
}

impl Lists {
    fn remove(&mut self, id: u64) {
        let Some((_, interest)) = self.every.remove(&id) else {
            return;
        };
        if interest.boards {
            delist(
                &mut self.boards_any,
                &mut self.boards_of,
                &interest.banks,
                id,
            );
        }
        if interest.best {
            delist(
                &mut self.best_any,
                &mut self.best_of,
                &interest.currencies,
                id,
            );
        }
        if let Some(owner) = &interest.alerts_of {
            if let Some(listed) = self.alerts_of.get_mut(owner) {
                listed.remove(&id);
                if listed.is_empty() {
                    self.alerts_of.remove(owner);
                }
            }
        }
    }
}

/// Lists `route` under each of `keys`, or under any when there are none.
fn enlist<K: Hash + Eq + Copy>(
    any: &mut Listed,
    of: &mut HashMap<K, Listed>,
    keys: &[K],
    id: u64,
    route: &Arc<Route>,
) {
    if keys.is_empty() {
        any.insert(id, Arc::clone(route));
    }
    for key in keys {
        of.entry(*key).or_default().insert(id, Arc::clone(route));
    }
}

/// Undoes [`enlist`], dropping lists left empty.
fn delist<K: Hash + Eq>(any: &mut Listed, of: &mut HashMap<K, Listed>, keys: &[K], id: u64) {
    if keys.is_empty() {
        any.remove(&id);
    }
    for key in keys {
        if let Some(listed) = of.get_mut(key) {
            listed.remove(&id);
            if listed.is_empty() {
                of.remove(key);
            }
        }
    }
}

/// The subscribers of one API process.
pub struct Fanout {
    lists: Mutex<Lists>,
    next_id: AtomicU64,
    queue: usize,
}

impl Fanout {
    /// Subscribers may have `queue` deliveries waiting before they are
    /// dropped.
    pub fn new(queue: usize) -> Arc<Self> {
        Arc::new(Self {
            lists: Mutex::default(),
            next_id: AtomicU64::new(0),
            queue: queue.max(1),
        })
    }

    pub fn subscribe(self: &Arc<Self>, interest: Interest) -> Subscriber {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::channel(self.queue);
        let behind = Arc::new(AtomicBool::new(false));
        let route = Arc::new(Route {
            sender,
            behind: Arc::clone(&behind),
        });
        {
            let mut guard = self.lists.lock().expect("fanout lock");
            let lists = &mut *guard;
            if interest.boards {
                enlist(
                    &mut lists.boards_any,
                    &mut lists.boards_of,
                    &interest.banks,
                    id,
                    &route,
                );
            }
            if interest.best {
                enlist(
                    &mut lists.best_any,
                    &mut lists.best_of,
                    &interest.currencies,
                    id,
                    &route,
                );
            }
            if let Some(owner) = &interest.alerts_of {
                lists
                    .alerts_of
                    .entry(owner.clone())
                    .or_default()
                    .insert(id, Arc::clone(&route));
            }
            lists.every.insert(id, (route, interest));
        }
        Subscriber {
            id,
            fanout: Arc::clone(self),
            receiver,
            behind,
        }
    }

    /// Offers `delivery` to the subscribers listed for it, in the order
    /// deliveries are sent.
    pub fn send(&self, delivery: Delivery) {
        let delivery = Arc::new(delivery);
        let mut lists = self.lists.lock().expect("fanout lock");
        let mut dropped = Vec::new();
        let mut offer = |id: u64, route: &Route| match route.sender.try_send(Arc::clone(&delivery))
        {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                route.behind.store(true, Ordering::Relaxed);
                dropped.push(id);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => dropped.push(id),
        };
        match &*delivery {
            Delivery::Board { bank, .. } => {
                let listed = lists.boards_of.get(bank).into_iter().flatten();
                for (id, route) in listed.chain(&lists.boards_any) {
                    offer(*id, route);
                }
            }
            Delivery::Best { currency, .. } => {
                let listed = lists.best_of.get(currency).into_iter().flatten();
                for (id, route) in listed.chain(&lists.best_any) {
                    offer(*id, route);
                }
            }
            Delivery::Reset => {
                for (id, (route, _)) in &lists.every {
                    offer(*id, route);
                }
            }
            Delivery::Alert { owner, .. } => {
                for (id, route) in lists.alerts_of.get(owner).into_iter().flatten() {
                    offer(*id, route);
                }
            }
        }
        for id in dropped {
            // Its queue closes once drained: the subscriber then ends.
            lists.remove(id);
        }
    }

    pub fn subscribers(&self) -> usize {
        self.lists.lock().expect("fanout lock").every.len()
    }
}

/// One subscriber's queue; leaving the lists when dropped.
pub struct Subscriber {
    id: u64,
    fanout: Arc<Fanout>,
    receiver: mpsc::Receiver<Arc<Delivery>>,
    behind: Arc<AtomicBool>,
}

impl Subscriber {
    /// The next delivery, or why there are no more.
    pub async fn recv(&mut self) -> Result<Arc<Delivery>, Ended> {
        match self.receiver.recv().await {
            Some(delivery) => Ok(delivery),
            None if self.behind.load(Ordering::Relaxed) => Err(Ended::Behind),
            None => Err(Ended::Closed),
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if let Ok(mut lists) = self.fanout.lists.lock() {
            lists.remove(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::delivery::Position;
    use axum::body::Bytes;

    fn board(at: u64, bank: i64) -> Delivery {
        Delivery::Board {
            at: Position::parse(&format!("{at}-0")).expect("a position"),
            bank: BankId::new(bank).expect("a bank id"),
            currencies: vec![],
            frames: std::array::from_fn(|_| Bytes::new()),
        }
    }

    fn bank_of(delivery: &Delivery) -> i64 {
        match delivery {
            Delivery::Board { bank, .. } => bank.get(),
            _ => 0,
        }
    }

    #[tokio::test]
    async fn a_board_reaches_only_its_banks_followers_and_everyones_in_order() {
        let fanout = Fanout::new(16);
        let follows = |banks: &[i64]| Interest {
            boards: true,
            banks: banks
                .iter()
                .map(|b| BankId::new(*b).expect("a bank id"))
                .collect(),
            ..Interest::default()
        };
        let mut one = fanout.subscribe(follows(&[1]));
        let mut both = fanout.subscribe(follows(&[1, 2]));
        let mut any = fanout.subscribe(follows(&[]));
        let best_only = fanout.subscribe(Interest {
            best: true,
            ..Interest::default()
        });
        for (at, bank) in [(1, 1), (2, 2), (3, 3), (4, 1)] {
            fanout.send(board(at, bank));
        }
        drop(fanout);
        let got = |s: &mut Subscriber| {
            let mut banks = Vec::new();
            while let Ok(d) = s.receiver.try_recv() {
                banks.push(bank_of(&d));
            }
            banks
        };
        assert_eq!(got(&mut one), [1, 1]);
        assert_eq!(got(&mut both), [1, 2, 1]);
        assert_eq!(got(&mut any), [1, 2, 3, 1]);
        assert_eq!(best_only.receiver.len(), 0);
    }

    #[tokio::test]
    async fn an_alert_reaches_only_its_keys_subscribers() {
        let fanout = Fanout::new(4);
        let of = |owner: &str| Interest {
            alerts_of: Some(owner.into()),
            ..Interest::default()
        };
        let mut mine = fanout.subscribe(of("mine0001"));
        let mut theirs = fanout.subscribe(of("theirs01"));
        let mut boards = fanout.subscribe(Interest {
            boards: true,
            ..Interest::default()
        });
        fanout.send(Delivery::Alert {
            owner: "mine0001".into(),
            frame: Bytes::from_static(b"x"),
        });
        assert!(matches!(
            *mine.receiver.try_recv().unwrap(),
            Delivery::Alert { .. }
        ));
        assert!(theirs.receiver.try_recv().is_err());
        assert!(boards.receiver.try_recv().is_err());
    }

    #[tokio::test]
    async fn a_full_queue_drops_the_subscriber_after_what_it_holds() {
        let fanout = Fanout::new(2);
        let mut slow = fanout.subscribe(Interest {
            boards: true,
            ..Interest::default()
        });
        for at in 1..=3 {
            fanout.send(board(at, 1));
        }
        assert_eq!(fanout.subscribers(), 0, "taken off the lists");
        assert!(slow.recv().await.is_ok());
        assert!(slow.recv().await.is_ok());
        assert_eq!(slow.recv().await.err(), Some(Ended::Behind));
    }

    #[tokio::test]
    async fn a_dropped_subscriber_leaves_every_list() {
        let fanout = Fanout::new(4);
        let subscriber = fanout.subscribe(Interest {
            boards: true,
            banks: vec![BankId::new(7).expect("a bank id")],
            best: true,
            currencies: vec![CurrencyCode::parse("USD").expect("a code")],
            alerts_of: Some("abcd1234".into()),
        });
        assert_eq!(fanout.subscribers(), 1);
        drop(subscriber);
        let lists = fanout.lists.lock().expect("fanout lock");
        assert!(lists.every.is_empty() && lists.boards_of.is_empty() && lists.best_of.is_empty());
        assert!(lists.alerts_of.is_empty());
    }
}
