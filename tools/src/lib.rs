//! ratewire's tools: the feed clients a publisher or an operator runs
//! (`ratewire-feed`: the demo simulator the stack runs, the backfill of
//! past boards from a file, the fixed-rate load the benchmarks use;
//! [`feed`]), the benchmarks: their harness (`ratewire-bench`,
//! [`bench`](mod@bench)) and their own clients and baseline (`examples/`),
//! and the nemesis that proves the cluster topology under mixed faults
//! (`ratewire-nemesis`, [`nemesis`]).
//!
//! A client of the services only: it talks to ingest and the API over
//! HTTP, and borrows ingest's board parser to check a file before it
//! sends a line of it.

pub mod bench;
pub mod feed;
pub mod nemesis;
