//! The public read API, api-v1: a reader of the read model.
//!
//! Modules, from the bottom up (each imports only those above it):
//! - [`config`], [`error`] (every failure mapped to the spec's envelope in
//!   one place), [`plans`], [`keys`] (hashed in Postgres, cached in Redis so
//!   a revocation reaches every instance at once), [`limits`] (counted in
//!   Redis), [`read_model`] (which generation is served), [`redis_guard`]
//!   (Redis on the request path, within a budget, behind a breaker) and
//!   [`state`], what every handler shares;
//! - [`query`] parses query strings strictly, naming every bad parameter,
//!   and [`requests`] turns them into what each endpoint was asked and the
//!   stored view that answers it;
//! - [`gate`]: who is calling and may they (keys, limits, rate-limit
//!   headers), for every public request; [`auth`] gives handlers the
//!   caller as extractors; [`conditional`] answers `If-None-Match`, and
//!   [`cors`] lets browsers on other origins read;
//! - [`routes`], one module per resource, merged in [`routes::router`];
//!   [`openapi`] describes them; [`web`] serves the dashboard and the
//!   reference built on them;
//! - [`app`] is the process; [`usage_sync`] and [`retention`] are tasks
//!   beside it.
//!
//! Responses come ready-made from the projector's Redis views; when a view
//! is missing, the read model's `store` and `views` (`ratewire-readmodel`)
//! render the same bytes from Postgres.
//!
//! Must not depend on the projector (nor on Kafka): what the API knows of
//! the model comes from `ratewire-readmodel`.

pub mod app;
pub mod auth;
pub mod conditional;
pub mod config;
pub mod cors;
pub mod db;
pub mod error;
pub mod fanout;
pub mod gate;
pub mod hot_metrics;
pub mod key_directory;
pub mod keys;
pub mod limits;
pub mod lists;
pub mod live;
pub mod openapi;
pub mod plans;
pub mod query;
pub mod read_model;
pub mod redis_guard;
pub mod requests;
pub mod retention;
pub mod routes;
pub mod shortcut;
pub mod state;
pub mod stream_slots;
pub mod usage_sync;
pub mod view_cache;
pub mod web;

pub use app::Application;
pub use config::Config;
pub use error::Error;
