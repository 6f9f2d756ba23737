//! The public read API, api-v1.
//!
//! - [`routes`] is the HTTP surface, one module per resource, merged in
//!   [`routes::router`]; [`error`] maps every failure to the spec's envelope.
//! - [`auth`] checks `x-api-key` as an extractor, against [`keys`] (hashed
//!   in Postgres, cached in Redis so a revocation reaches every instance at
//!   once).
//! - [`query`] parses query strings strictly, naming every bad parameter.
//! - Responses come ready-made from the projector's Redis views; when a view
//!   is missing, the projector's own `store` and `views` render the same
//!   bytes from Postgres.

pub mod app;
pub mod auth;
pub mod config;
pub mod db;
pub mod error;
pub mod gate;
pub mod keys;
pub mod limits;
pub mod openapi;
pub mod plans;
pub mod query;
pub mod read_model;
pub mod routes;
pub mod usage_sync;

pub use app::Application;
pub use config::Config;
pub use error::Error;
