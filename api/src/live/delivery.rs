//! What the live stream sends: positions in the changes stream, and
//! changes ready to send as server-sent events.

use axum::body::Bytes;
use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::views::RatesVariant;

/// A position in the changes stream (`ms-seq`), ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position(u64, u64);

impl Position {
    pub const START: Position = Position(0, 0);

    pub fn parse(id: &str) -> Option<Position> {
        let (ms, seq) = id.split_once('-')?;
        Some(Position(ms.parse().ok()?, seq.parse().ok()?))
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.0, self.1)
    }
}

/// One change, ready to send.
#[derive(Debug)]
pub enum Delivery {
    /// A bank's /rates element changed; one frame per variant
    /// ([`variant_index`]).
    Board {
        at: Position,
        bank: BankId,
        currencies: Vec<CurrencyCode>,
        frames: [Bytes; 4],
    },
    /// A currency's best rates changed.
    Best {
        at: Position,
        currency: CurrencyCode,
        /// The banks holding any of its best quotes (for `bankId` filters).
        banks: Vec<BankId>,
        frame: Bytes,
    },
    /// The stream the positions refer to is another now (a replay switched
    /// generations): subscribers start again from a snapshot.
    Reset,
    /// An alert of the key `owner` fired (no position: alert events are
    /// live only).
    Alert { owner: String, frame: Bytes },
}

/// The index of `variant` among a board delivery's frames.
pub fn variant_index(variant: RatesVariant) -> usize {
    RatesVariant::ALL
        .iter()
        .position(|v| *v == variant)
        .expect("every variant is listed")
}

/// A server-sent event's bytes.
pub fn frame(event: &str, id: Option<Position>, data: &str) -> Bytes {
    let id = id.map(|p| format!("id: {p}\n")).unwrap_or_default();
    Bytes::from(format!("{id}event: {event}\ndata: {data}\n\n"))
}
