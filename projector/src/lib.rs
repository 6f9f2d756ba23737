//! The projector folds ratewire's event log into read models.
//!
//! Reading the flow top-down:
//! - [`consumer`] takes messages from the topic in per-partition order and
//!   hands them over in bounded batches;
//! - [`fold`] applies a batch to Postgres in one transaction, together with
//!   the consumed offsets (exactly-once in effect: a crash before commit
//!   re-reads the batch, a crash after it finds the offsets already moved);
//! - [`store`] reads back what a view needs, [`views`] renders it as the
//!   API's ready-to-serve JSON (pure, no I/O), and [`redis_views`] writes it
//!   to Redis after the commit ([`bank_views`] for the banks a batch
//!   changed, [`aggregates`] for the views over all banks, each a task
//!   beside the fold). Redis is derived state: [`app`] rebuilds it
//!   from Postgres on start, so a crash between commit and Redis loses nothing.
//!
//! The api crate reuses [`store`] and [`views`] to answer from Postgres when a
//! Redis view is missing.

pub mod aggregates;
pub mod app;
pub mod bank_views;
pub mod config;
pub mod consumer;
pub mod db;
pub mod error;
pub mod fold;
pub mod generation;
pub mod http;
pub mod metrics;
pub mod redis_views;
pub mod replay;
pub mod series_cache;
pub mod store;
pub mod views;

pub use app::Application;
pub use config::Config;
pub use error::Error;
