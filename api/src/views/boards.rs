//! The boards a conversion reads: every active bank's current board, from
//! the stored list of every active bank (read back once per change of it,
//! by its fingerprint), or from Postgres.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use axum::body::Bytes;
use ratewire_readmodel::store;
use ratewire_readmodel::views::{rates_elements, BankView};

use crate::error::{Error, Result};
use crate::views::requests::{List, ViewRef, BOARDS};
use crate::views::{Cached, Named, Views};

/// The boards last read back from the stored list, by its fingerprint.
#[derive(Default)]
pub struct ReadBack(ArcSwapOption<(String, Arc<Vec<BankView>>)>);

impl ReadBack {
    fn boards(&self, etag: &str, body: &Bytes) -> Result<Arc<Vec<BankView>>> {
        if let Some(kept) = self.0.load_full() {
            if kept.0 == etag {
                return Ok(Arc::clone(&kept.1));
            }
        }
        let boards = Arc::new(rates_elements(body).map_err(|e| {
            Error::Startup(format!("the stored list of boards does not read back: {e}"))
        })?);
        self.0
            .store(Some(Arc::new((etag.to_owned(), Arc::clone(&boards)))));
        Ok(boards)
    }
}

/// Every active bank's current board: from the stored list (read back once
/// per change of it; `named` is the list as the gate found it), else from
/// Postgres.
pub async fn boards(views: &Arc<Views>, named: Named) -> Result<Arc<Vec<BankView>>> {
    let Named {
        read, view, stored, ..
    } = named;
    let view = view.unwrap_or_else(|| Arc::new(ViewRef::list(&read.views, List::Rates(BOARDS))));
    match views.cached(stored, &view).await {
        Cached::Found(stored) => match &stored.etag {
            Some(etag) => views.read_back.boards(etag, &stored.body),
            None => rates_elements(&stored.body)
                .map(Arc::new)
                .map_err(|e| Error::Startup(format!("the stored list does not read back: {e}"))),
        },
        _ => Ok(Arc::new(store::active_bank_views(&read.pool).await?)),
    }
}
