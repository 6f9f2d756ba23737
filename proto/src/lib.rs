//! The vocabulary ratewire's processes share on the log.
//!
//! Everything that crosses the broker is defined here and nowhere else: the
//! envelope every event travels in ([`envelope`]), the events themselves
//! ([`event`]), the identifiers they carry ([`ids`]) and where they are
//! published ([`topic`]), and the rules every event obeys ([`rules`]), held
//! by the types themselves ([`rate`], [`board`], [`source`],
//! [`reference`](mod@reference)).
//! Ingest writes these types, the projector reads them.
//!
//! This crate is the contract and nothing else: a third party may depend on
//! it to read the topic. It must not depend on any other ratewire crate, nor
//! on a runtime, HTTP, CLI, database or metrics library.
//!
//! # Compatibility rule
//!
//! An event is identified by its `type` and `version`.
//! - Within a version, fields may only be *added*, and only as optional
//!   fields; a reader ignores fields it does not know.
//! - Any other change (renaming, removing, changing a type or a meaning)
//!   makes a new version. Readers keep decoding every older version and
//!   upcast it to the current shape (see [`envelope::decode`]); the log is
//!   never rewritten.
//! - A reader that meets an event type it does not know skips it with a
//!   warning; one that meets a *newer* version of a known type reports it as
//!   unsupported (the projector dead-letters it so a later release can apply
//!   it on replay). Neither ever crashes a consumer.
//!
//! The optional additions so far, all within version 1:
//! - `BoardPublished.source` (`{url?, method, capturedAt?, sha256?}`, see
//!   [`source`]) and `BoardPublished.reason` (at most
//!   [`rules::MAX_REASON_CHARS`] characters). A board without them is
//!   written exactly as before, so a reader that predates them reads every
//!   board as it did, ignoring them where present. A reader that knows
//!   them holds them to their rules ([`Rule::Source`], [`Rule::Reason`]),
//!   as every other field: a message whose source breaks one is refused
//!   whole, by whoever produced it.
//! - `BankRegistered.schedule` and `BankUpdated.schedule` (see
//!   [`schedule`]; on an update, `null` clears it), held to
//!   [`Rule::Schedule`]. A reader that predates them ignores them: it
//!   knows no schedules.

pub mod board;
pub mod envelope;
pub mod event;
pub mod ids;
pub mod rate;
pub mod reference;
pub mod rules;
pub mod schedule;
pub mod source;
pub mod topic;

pub use board::{BoardPublished, Pair, RateEntry};
pub use envelope::{decode, decode_message, encode, DecodeError, Decoded, Envelope, Message};
pub use event::{
    BankDeactivated, BankReactivated, BankRegistered, BankUpdated, BoardRetracted, Event,
    SocialLink,
};
pub use ids::{BankId, CurrencyCode, InvalidId};
pub use rate::Rate;
pub use reference::{ReferenceBoardPublished, ReferenceEntry, NATIONAL_BANK, REFERENCE_SUBJECT};
pub use rules::{Rule, Violation};
pub use schedule::{Period, Schedule};
pub use source::{Method, Source};
pub use topic::{partition_key, APPENDED_CHANNEL, DEFAULT_TOPIC};
