//! One message as read from the topic, decoded once by every rule of the
//! contract.

use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use ratewire_proto::{decode_message, BankId, DecodeError, Decoded, Message};
use ratewire_service::traces::TraceContext;

use super::model::Position;

#[derive(Debug, Clone)]
pub struct Incoming {
    pub partition: i32,
    pub offset: i64,
    /// Shared by the message's clones (a lane takes a copy of each message).
    pub payload: Arc<[u8]>,
    /// The partitioning key (a bank's id, by the contract).
    pub key: Option<Vec<u8>>,
    /// When the broker says it was produced or appended.
    pub timestamp: Option<DateTime<Utc>>,
    /// The W3C trace context its producer sent in the record's headers
    /// (read only while traces are exported).
    pub trace: Option<Arc<TraceContext>>,
    /// What [`Incoming::decode`] found, kept for the message's clones:
    /// the consumer decodes a batch as it receives it, while the batch
    /// before is still being written, so the lanes only write. Empty until
    /// then (a message is never changed once made).
    pub(crate) decoded: Arc<OnceLock<Result<Decoded, DecodeError>>>,
}

impl Incoming {
    /// A message as producers write them: keyed by `bank`, no timestamp.
    pub fn keyed(partition: i32, offset: i64, bank: BankId, payload: Vec<u8>) -> Self {
        Self {
            partition,
            offset,
            payload: payload.into(),
            key: Some(ratewire_proto::partition_key(bank).into_bytes()),
            timestamp: None,
            trace: None,
            decoded: Arc::default(),
        }
    }

    /// Decodes the message by every rule of the contract (once; its clones
    /// share the result).
    pub fn decode(&self) -> &Result<Decoded, DecodeError> {
        self.decoded.get_or_init(|| {
            decode_message(Message {
                key: self.key.as_deref(),
                payload: &self.payload,
                timestamp: self.timestamp,
            })
        })
    }

    pub fn position(&self) -> Position {
        Position {
            partition: self.partition,
            offset: self.offset,
        }
    }
}
