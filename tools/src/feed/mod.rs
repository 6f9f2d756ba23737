//! Feed clients, the publisher side of ingest: the demo simulator the
//! stack runs (its market, and the year of history it can publish first),
//! the backfill of past boards from a file, and the fixed-rate
//! load the benchmarks use, and the National Bank's reference rates
//! imported from saved responses or polled from its endpoint; and a
//! webhook receiver to try alerts with.

pub mod backfill;
pub mod client;
pub mod demo;
pub mod history;
pub mod load;
pub mod market;
pub mod receive;
pub mod reference;
pub mod watch;

pub use demo::{run_demo, DemoSettings, DEMO_BANKS};
pub use market::DEMO_CURRENCIES;
