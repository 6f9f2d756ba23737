//! The live stream's source: what changed, as the projector recorded it.
//!
//! The projector adds an entry to the active generation's changes stream
//! (a Redis stream, see `ratewire_readmodel::redis`) in the same script
//! that writes the views, so an entry exists only once the REST views show
//! it. Each API instance follows that stream with one blocking read, reads
//! the views an entry names once, encodes them as server-sent events once
//! per variant, and offers the frames in log order to the subscribers that
//! follow its bank or currency ([`fanout`]): the API stays stateless
//! (any instance can serve any subscriber, a restarted one resumes from
//! Redis), and an event costs a pointer copy per interested subscriber,
//! nothing for the others.
//!
//! Why Redis and not the topic: the views are in Redis, an entry is written
//! atomically with them (a subscriber reacting with a GET sees at least
//! that board), the stream keeps an hour for resuming, and the API needs
//! no Kafka client (see the crate docs).
//!
//! Bottom-up: [`delivery`] (what is sent), [`fanout`] (who receives it),
//! [`changes`] (reading the stream's entries and their views),
//! [`follower`] (the blocking reads of a Redis stream, with their back-off
//! and shutdown), [`relay`] (the task that follows the changes stream);
//! [`alerts`] follows the alerts' stream beside it (crossings, for their
//! keys' subscribers).

pub mod alerts;
pub mod changes;
pub mod delivery;
pub mod fanout;
pub mod follower;
pub mod relay;

pub use changes::{Change, Reader};
pub use delivery::{frame, variant_index, Delivery, Position};
pub use relay::Relay;
