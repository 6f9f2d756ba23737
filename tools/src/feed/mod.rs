//! Feed clients, the publisher side of ingest: the demo simulator the
//! stack runs, the backfill of past boards from a file, and the fixed-rate
//! load the benchmarks use.

pub mod backfill;
pub mod client;
pub mod demo;
pub mod load;
pub mod watch;

pub use demo::{run_demo, DemoSettings, DEMO_BANKS, DEMO_CURRENCIES};
