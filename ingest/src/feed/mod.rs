//! Feed clients, the publisher side of ingest: the demo simulator the
//! stack runs, and the backfill of past boards from a file.

pub mod backfill;
pub mod client;
pub mod demo;

pub use demo::{run_demo, DemoSettings, DEMO_BANKS, DEMO_CURRENCIES};
