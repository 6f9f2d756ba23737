//! The all-banks lists (`/rates`, `/banks`, and the boards `/convert`
//! reads), joined in this process from their banks' elements.
//!
//! Each active bank's element of each list is stored on its own by the
//! projector, in the same script as the bank's other views and its entry
//! on the changes stream. A list is those elements of the active banks
//! (`view:banks:active`), comma-joined in id order, joined here rather
//! than stored whole by the projector (rewriting every list on each
//! bank's board cost the projector much of its CPU: docs/benchmarks.md). A
//! list is joined only when asked for, from the elements this process
//! keeps (the same entries as `/rates?bankId=N`), reading from Redis only
//! the elements it does not keep; a bank's change drops the lists with
//! its elements (the live stream's changes), so a list is as fresh as the
//! bank views it is made of.
//!
//! The list's fingerprint is made of its elements' fingerprints, in order,
//! so every instance gives the same `ETag` for the same list.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use ratewire_proto::BankId;
use ratewire_readmodel::redis::Keys;

use crate::redis_guard::Unavailable;
use crate::views::requests::{List, Stored, ViewRef};
use crate::views::Views;

/// Most lists with a join lock: six per generation of the views, so this
/// is only reached after many generation switches, when the locks are
/// forgotten and made again.
const MOST_LOCKS: usize = 64;

/// One join of each list at a time: when a kept list runs out or changes,
/// every request for it in the next moments would otherwise join it on its
/// own, each reading every element from Redis. The first joins; the others
/// wait and take what it kept.
#[derive(Default)]
pub struct Joins(Mutex<HashMap<String, Arc<Turns>>>);

/// One list's joins, one at a time, and how many were done.
#[derive(Default)]
struct Turns {
    lock: tokio::sync::Mutex<()>,
    done: AtomicU64,
}

impl Joins {
    fn turns_of(&self, key: &str) -> Arc<Turns> {
        let mut locks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if locks.len() >= MOST_LOCKS && !locks.contains_key(key) {
            locks.clear();
        }
        Arc::clone(locks.entry(key.to_owned()).or_default())
    }
}

/// `list` as of now, kept in this process unless something changed while
/// it was being joined; `None` while Redis does not hold every view (a
/// flush, or before the projector's first rebuild: see
/// `Keys::views_built`), so the caller renders it from Postgres.
pub async fn join(
    state: &Views,
    view: &ViewRef,
    list: List,
    views: &Keys,
) -> Result<Option<Stored>, Unavailable> {
    // Waiting is only worth it when what the first join keeps can be
    // served (the cache follows the changes stream). Only a join that
    // ended while this one waited counts: a list read again ahead of its
    // age (see `views::cache`) is still kept, and must be joined anew.
    let turns = state
        .cache
        .enabled()
        .then(|| state.lists.turns_of(&view.key));
    let _turn = match &turns {
        Some(turns) => {
            let seen = turns.done.load(Ordering::Acquire);
            let turn = turns.lock.lock().await;
            if turns.done.load(Ordering::Acquire) != seen {
                if let Some(kept) = state.cache.peek(&view.key) {
                    return Ok(Some(kept));
                }
            }
            Some(turn)
        }
        None => None,
    };
    let ticket = state.cache.ticket();
    let (built, ids): (bool, Vec<i64>) = state
        .redis
        .call("reading the active banks", |mut conn| async move {
            redis::pipe()
                .exists(views.views_built())
                .zrange(views.active_banks(), 0, -1)
                .query_async(&mut conn)
                .await
        })
        .await?;
    if !built {
        return Ok(None);
    }
    let keys: Vec<String> = ids
        .into_iter()
        .filter_map(|id| BankId::new(id).ok())
        .map(|id| list.element(views, id))
        .collect();
    let mut elements: Vec<Option<Stored>> = keys.iter().map(|k| state.cache.peek(k)).collect();
    let missing: Vec<&String> = keys
        .iter()
        .zip(&elements)
        .filter(|(_, kept)| kept.is_none())
        .map(|(key, _)| key)
        .collect();
    if !missing.is_empty() {
        let etags = &view.etags;
        let (bodies, tags): (Vec<Option<Vec<u8>>>, Vec<Option<String>>) = state
            .redis
            .call("reading list elements", |mut conn| async move {
                // MGET and HMGET by name: redis's `mget` and `hget` send GET
                // and HGET for a single key, which answer a value, not a list.
                redis::pipe()
                    .cmd("MGET")
                    .arg(&missing)
                    .cmd("HMGET")
                    .arg(etags)
                    .arg(&missing)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        // In the order of the missing slots below.
        let mut read = bodies.into_iter().zip(tags);
        for (key, slot) in keys.iter().zip(elements.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            let Some((body, etag)) = read.next() else {
                break;
            };
            // None: the bank left the active set after it was read.
            *slot = body.map(|body| {
                let stored = Stored {
                    body: Bytes::from(body),
                    etag,
                };
                state.cache.keep(ticket, key, &stored);
                stored
            });
        }
    }
    let stored = joined(elements.iter().flatten());
    state.cache.keep(ticket, &view.key, &stored);
    if let Some(turns) = &turns {
        turns.done.fetch_add(1, Ordering::AcqRel);
    }
    Ok(Some(stored))
}

/// The elements comma-joined, fingerprinted by their fingerprints.
fn joined<'a>(elements: impl Iterator<Item = &'a Stored> + Clone) -> Stored {
    let size = elements.clone().map(|e| e.body.len() + 1).sum();
    let mut body = Vec::with_capacity(size);
    let mut marks = String::new();
    for (i, element) in elements.enumerate() {
        if i > 0 {
            body.push(b',');
            marks.push(',');
        }
        body.extend_from_slice(&element.body);
        marks.push_str(element.etag.as_deref().unwrap_or("-"));
    }
    Stored {
        body: Bytes::from(body),
        etag: Some(ratewire_readmodel::views::digest(&marks)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element(body: &str, etag: Option<&str>) -> Stored {
        Stored {
            body: Bytes::from(body.to_owned()),
            etag: etag.map(str::to_owned),
        }
    }

    #[test]
    fn a_list_is_its_elements_comma_joined_in_order() {
        let elements = [
            element("{\"a\":1}", Some("aa")),
            element("{\"b\":2}", Some("bb")),
        ];
        let list = joined(elements.iter());
        assert_eq!(&list.body[..], b"{\"a\":1},{\"b\":2}");
        let none: [Stored; 0] = [];
        assert_eq!(&joined(none.iter()).body[..], b"");
    }

    #[test]
    fn a_list_changes_its_fingerprint_with_any_element_and_only_then() {
        let first = [element("x", Some("aa")), element("y", Some("bb"))];
        let same = [element("x", Some("aa")), element("y", Some("bb"))];
        let changed = [element("x", Some("aa")), element("z", Some("cc"))];
        let reordered = [element("y", Some("bb")), element("x", Some("aa"))];
        let tag = |e: &[Stored]| joined(e.iter()).etag;
        assert_eq!(tag(&first), tag(&same));
        assert_ne!(tag(&first), tag(&changed));
        assert_ne!(tag(&first), tag(&reordered));
    }
}
