//! Rate alerts and the webhooks they call: a subject of its own, which the
//! API (owners register webhooks and alerts), the fold (alerts are judged
//! as boards are applied) and the deliverer (webhooks are called) share.
//!
//! Modules, from the bottom up (each imports only those before it):
//! - [`error`]: the crate's one error type;
//! - [`schema`]: the alerts' tables, in a schema of their own, and the
//!   names (lock, channel, Redis stream) the processes agree on;
//! - [`settings`]: where the tables are, the sealing key, delivery's
//!   bounds;
//! - [`address`]: where a webhook may point (no internal addresses);
//!   [`signing`]: Standard Webhooks secrets and signatures; [`sealing`]:
//!   secrets sealed at rest under the operators' key;
//! - [`judge`]: whether an alert fires, decided on typed values;
//!   [`quotes`]: the banks' latest quotes as alerts see them;
//!   [`message`]: what a webhook receives, written by serde;
//!   [`evaluation`]: the judge in the fold's transaction, reading and
//!   storing the watches, quotes and crossings (and spread-cap breaches);
//! - [`registry`]: webhooks and alerts as their owners manage them (the
//!   API's endpoints store through it);
//! - [`watchdog`]: missed publications judged once every fold has passed
//!   them, recorded as events like the fold's breaches;
//! - [`delivery`]: the deliverer, which sends the outbox's messages beside
//!   the fold.
//!
//! Depends on the event contract, the read model (the rate fields, the
//! answers' number and time formats) and the service shell. Must not
//! depend on the processes: the projector calls the judge and runs the
//! deliverer, the API keeps its endpoints and stores through here.

pub mod address;
pub mod delivery;
pub mod error;
pub mod evaluation;
pub mod judge;
pub mod message;
pub mod quotes;
pub mod registry;
pub mod schema;
pub mod sealing;
pub mod settings;
pub mod signing;
pub mod watchdog;

pub use address::AddressPolicy;
pub use error::{Error, Result};
pub use judge::{Condition, Field};
pub use message::{THRESHOLD_CROSSED, WEBHOOK_TEST};
pub use schema::{migrate, EVALUATION_LOCK};
pub use sealing::SealingKey;
pub use settings::{AlertSettings, DeliverySettings};
pub use signing::Secret;
