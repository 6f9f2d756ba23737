//! The end-to-end harness: a whole ratewire per test.
//!
//! [`Stack::start`] gives each test its own world: its own topic on a shared
//! Apache Kafka broker (or a broker of its own, [`OWN_BROKER`]), its own
//! Postgres database and Redis key prefix, and the three real binaries
//! (`ratewire-ingest`, `ratewire-projector`, `ratewire-api`) on free ports.
//! Dropping the stack stops the processes and removes the database and keys.
//!
//! Binaries come from the same target directory as the test; build them
//! first (`cargo build --workspace --bins`, which the test command does).
//! Brokers are run by `deploy/stack kafka-exec` (see `broker`).
//!
//! - [`Stack`] (`stack`): starting, stopping and breaking the processes and
//!   the world they run in;
//! - `client`: what tests do with a stack (register banks, push boards,
//!   call the API, checked against its OpenAPI document, read the database);
//! - `support`: dates, ports and polling with a deadline;
//! - `broker`: the shared broker and the command that runs one;
//! - `own_postgres`: a cluster of a test's own, to lose, replace or
//!   restore from a backup;
//! - [`contract`], [`fold_check`], [`proxy`]: the OpenAPI check, the
//!   comparison of a fold with a replay, and a TCP proxy to cut;
//! - [`receiver`]: a webhook receiver on loopback; [`browser`]: a headless
//!   chromium for the dashboard's tests.
//!
//! Depends on no ratewire crate: it drives the built binaries from outside,
//! over HTTP, Kafka, Postgres and Redis, as operators and clients do. Only
//! the README's settings test (`tests/tests/readme_settings.rs`) links the three
//! processes, as dev-dependencies, to read their clap definitions.

mod broker;
pub mod browser;
mod client;
pub mod contract;
pub mod fold_check;
mod own_postgres;
pub mod proxy;
pub mod receiver;
pub mod redis_cluster;
pub mod sse;
mod stack;
mod support;

pub use stack::{binary, Stack};
pub use support::{
    ago, at, day, eventually, free_port, made_up_key, room_in_this_minute, sample,
    without_computed_time, VISIBLE_WITHIN,
};

pub const ADMIN_TOKEN: &str = "e2e-operator-token-4f1c9a7be02d6c35";
/// A setting for [`Stack::start_with`]: give the stack a Redis of its own,
/// which the test may stop and start.
pub const OWN_REDIS: &str = "own redis";
/// A setting for [`Stack::start_with`]: give the stack a broker of its own,
/// which the test may pause ([`Stack::pause_broker`]), kill and start again
/// with its log kept. Other stacks share one broker, a topic each.
pub const OWN_BROKER: &str = "own broker";
/// A setting for [`Stack::start_with`]: a broker of its own ([`OWN_BROKER`])
/// whose clients' listener takes only SCRAM-SHA-512 over TLS, with
/// certificates the test makes; the processes connect there with the user
/// [`SASL_USER`], their password in a file ([`Stack::sasl_password_file`]).
pub const SASL_SSL_BROKER: &str = "sasl_ssl broker";
/// The SCRAM user of a [`SASL_SSL_BROKER`].
pub const SASL_USER: &str = "ratewire-e2e";
/// A setting for [`Stack::start_with`]: a PostgreSQL cluster of the stack's
/// own (`deploy/stack postgres-cluster`), which the test may back up,
/// restore ([`Stack::restore_postgres`]) or replace with an empty one.
pub const OWN_POSTGRES: &str = "own postgres";
/// A setting for [`Stack::start_with`]: the processes reach Postgres through
/// a proxy the test may cut ([`Stack::postgres_down`]) and restore.
pub const POSTGRES_PROXY: &str = "postgres through a proxy";
/// A setting for [`Stack::start_with`]: the API reads history and series
/// through `RATEWIRE_READ_DATABASE_URL`, a second way to the same database
/// (standing in for a replica) that the test may cut
/// ([`Stack::replica_down`]) and restore.
pub const READ_REPLICA: &str = "history from a read replica";
/// The three processes of a stack, in start order.
pub const PROCESSES: [&str; 3] = ["ratewire-ingest", "ratewire-projector", "ratewire-api"];
/// The stacks' key sealing webhook secrets (32 bytes, base64).
pub const WEBHOOK_SECRETS_KEY: &str = "cmF0ZXdpcmUtZTJlLXdlYmhvb2stc2VjcmV0cy1rZXk=";
pub(crate) const POSTGRES: &str = "postgres://postgres@127.0.0.1:5432";
pub(crate) const REDIS: &str = "redis://127.0.0.1:6379/0";
