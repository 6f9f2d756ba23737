//! Ingest: the service bank feed publishers and operators talk to.
//!
//! - [`routes`] holds the HTTP surface: publishers push boards
//!   ([`routes::boards`]), operators manage banks and tokens
//!   ([`routes::admin`]), probes ask [`routes::health`], and
//!   [`routes::docs`] serves the OpenAPI documents, whose shapes are in
//!   [`openapi`].
//! - [`board`] turns a request body into a valid `BoardPublished`, reporting
//!   every problem at once.
//! - [`idempotency`] lets a publisher retry a push with its
//!   `Idempotency-Key` and get the same event id; [`retraction`] records
//!   every board before it is published, so a correction withdraws only a
//!   board its bank really published, and at most once.
//! - [`publisher`] puts events on the log and answers only once the broker
//!   has acknowledged them; bank changes go through the [`outbox`], so
//!   ingest's record and the log never disagree; [`appended`] tells
//!   projectors on the same database that the log has new events.
//! - [`banks`] keeps ingest's own state: bank ids (allocated here, carried
//!   in events) and hashed publisher tokens; [`known_tokens`] remembers
//!   the tokens that authenticated lately, so a push is checked in its
//!   [`board_records`] round alone; [`log_registry`] restores the banks the
//!   log has and the tables lack, before ingest takes anything.
//! - [`reference`](mod@reference) takes the National Bank's published reference rates
//!   as they are and publishes a day once per change.
//! - [`cli`] runs the same bank and token operations from a shell.
//! - [`app`] builds the process from its [`config`] and runs it until
//!   shutdown; [`db`] is the pool in ingest's own schema; [`error`] is the
//!   one error type and its mapping to responses; [`metrics`] lists what
//!   it reports.
//!
//! The client side (the demo simulator, backfill and load) is the tools
//! crate's `ratewire-feed`.
//!
//! Depends on the event contract (`ratewire-proto`), which it writes, and
//! the service shell (`ratewire-service`). Must not depend on the read
//! model, the projector or the API: ingest knows banks and tokens, never
//! what readers see.

pub mod app;
pub mod appended;
pub mod banks;
pub mod board;
pub mod board_records;
pub mod cli;
pub mod config;
pub mod db;
pub mod error;
pub mod idempotency;
pub mod known_tokens;
pub mod log_registry;
pub mod metrics;
pub mod openapi;
pub mod outbox;
pub mod publisher;
pub mod reference;
pub mod retraction;
pub mod routes;

pub use app::Application;
pub use config::Config;
pub use error::Error;
