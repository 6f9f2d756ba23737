//! The read model: what the projector (its only writer) and the API (a
//! reader) must agree on.
//!
//! - [`db`]: the Postgres schema, as embedded migrations, and its pools;
//! - [`board_months`]: the raw history's months, made ahead of the fold
//!   and dropped past the retention;
//! - [`store`]: the queries that read it back for the views;
//! - [`generation`]: which schema (and with it which Redis views) is
//!   active, switched by a replay;
//! - [`redis`]: the Redis connection and the keys the views live under;
//! - [`views`]: the API's response bodies as pure functions of what
//!   [`store`] reads (no I/O): the projector renders them into Redis, the
//!   API renders the same bytes from Postgres when a view is missing;
//! - [`settings`]: the settings both sides read to find the model;
//! - [`continuity`]: noticing that Redis lost its data or went back in time;
//! - [`revisions`]: the revision log and a board's provenance, read from
//!   the bitemporal board tables, and their bodies;
//! - [`quality`]: how well a bank keeps to its publishing schedule.
//!
//! Depends on the event contract (`ratewire-proto`, for ids) and the
//! service shell (`ratewire-service`, for the Postgres and settings
//! conventions every process shares). Must not depend on Kafka (rdkafka),
//! the projector or the API: writing the model (the fold, writing views to
//! Redis) is the projector's, serving it (keys, limits, routes) the API's.

pub mod board_months;
pub mod continuity;
pub mod db;
pub mod error;
pub mod generation;
pub mod quality;
pub mod redis;
pub mod revisions;
pub mod settings;
pub mod store;
pub mod views;

pub use error::{Error, Result};
pub use settings::ReadModelSettings;
