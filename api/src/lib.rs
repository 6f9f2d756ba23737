//! The public read API, api-v1: a reader of the read model.
//!
//! Modules, from the bottom up (each imports only those listed before it;
//! the layering test in `tests/` holds them to it):
//! - [`error`] (every failure mapped to the spec's envelope in one place),
//!   [`redis_guard`] (Redis on the request path, within a budget, behind a
//!   breaker), [`hot_metrics`] (the metrics it documents, and the request
//!   path's counters),
//!   [`conditional`] (`ETag` and `If-None-Match`), [`spreads`] (a bank's
//!   spread and premium, and a quote's age), [`db`] (the API's own
//!   schema), [`query`] (each route's query parameters declared once: the
//!   document's parameters, the parsing and the 400s), [`web`] (the
//!   dashboard and reference pages);
//! - [`views`]: which view a request names, kept in this process, read
//!   from Redis or rendered from Postgres, and the answers made of them;
//! - [`access`]: keys, plans, limits, stream slots and the gate every
//!   public request passes; [`cors`] lets browsers on other origins read;
//!   [`signing`] signs the answers asked to be (RFC 9421); [`config`]
//!   gathers every setting;
//! - [`alerting`]: keys' webhooks and rate alerts, stored and checked;
//!   [`live`]: the live stream's source and its fan-out;
//! - [`state`], what every handler shares;
//! - [`openapi`] describes the answers, and [`routes`] declares every
//!   route once (router and document alike) with thin handlers;
//! - [`app`] is the process.
//!
//! Responses come ready-made from the projector's Redis views; when a view
//! is missing, the read model's `store` and `views` (`ratewire-readmodel`)
//! render the same bytes from Postgres.
//!
//! Must not depend on the projector (nor on Kafka): what the API knows of
//! the model comes from `ratewire-readmodel`.

pub mod access;
pub mod alerting;
pub mod app;
pub mod conditional;
pub mod config;
pub mod cors;
pub mod db;
pub mod error;
pub mod hot_metrics;
pub mod live;
pub mod openapi;
pub mod query;
pub mod redis_guard;
pub mod routes;
pub mod signing;
pub mod spreads;
pub mod state;
pub mod views;
pub mod web;

pub use app::Application;
pub use config::Config;
pub use error::Error;
