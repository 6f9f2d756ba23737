//! The end-to-end harness: a whole ratewire per test.
//!
//! [`Stack::start`] gives each test its own world: its own topic on a shared
//! Apache Kafka broker, its own Postgres database and Redis key prefix, and
//! the three real binaries (`ratewire-ingest`, `ratewire-projector`,
//! `ratewire-api`) on free ports. [`Stack::builder`] asks for more, typed:
//! a Redis, broker or Postgres of the stack's own, a proxy to cut, more
//! projectors, settings. Dropping the stack stops the processes and removes
//! the database and keys.
//!
//! Binaries come from the same target directory as the test; build them
//! first (`cargo build --workspace --bins`, which the test command does).
//! Brokers are run by `deploy/stack kafka-exec` (see `broker`).
//!
//! - [`Stack`] (`stack`): starting, stopping and breaking the processes and
//!   the world they run in;
//! - [`Board`] (`board`): a rate board as publishers push it;
//! - `client`: what tests do with a stack (register banks, push boards and
//!   wait until they are served, call the API, checked against its OpenAPI
//!   document, read the database);
//! - `alerting`: webhooks and alerts, and waiting until every call the
//!   fold decided is made;
//! - `streams`: load (many banks' boards, reference days) pushed while a
//!   test breaks something;
//! - `support`: dates, ports and polling with a deadline;
//! - `broker`: the shared broker and the command that runs one;
//! - `own_postgres`: a cluster of a test's own, to lose, replace or
//!   restore from a backup;
//! - [`signatures`]: signed answers checked by an independent verifier;
//! - [`known_at`]: what every endpoint answered live at recorded instants,
//!   asked again with `asKnownAt` and compared byte for byte;
//! - [`contract`], [`fold_check`], [`proxy`]: the OpenAPI check, the
//!   comparison of a fold with a replay, and a TCP proxy to cut;
//! - [`receiver`]: a webhook receiver on loopback; [`otlp`]: a trace
//!   collector on loopback (OTLP/HTTP); [`browser`]: a headless chromium
//!   for the dashboard's tests.
//!
//! Depends on no ratewire crate: it drives the built binaries from outside,
//! over HTTP, Kafka, Postgres and Redis, as operators and clients do. Two
//! subjects of the suite use the processes as libraries (dev-dependencies):
//! `tests/tests/reads`, whose in-process world runs the API's routers, the
//! projector's fold and views and ingest's board parser for tests whose
//! subject is what the API answers, and `tests/tests/readme_settings.rs`,
//! which reads their clap definitions.

mod alerting;
mod board;
mod broker;
pub mod browser;
mod client;
pub mod contract;
pub mod fold_check;
pub mod known_at;
pub mod otlp;
mod own_postgres;
pub mod proxy;
pub mod receiver;
pub mod redis_cluster;
pub mod repo;
pub mod signatures;
pub mod sse;
mod stack;
mod streams;
mod support;

pub use board::{Board, Quote};
pub use stack::{binary, forget, Stack, StackBuilder};
pub use streams::reference_day;
pub use support::{
    ago, at, day, earlier_today, eventually, free_port, hours_apart_in_one_month, made_up_key,
    minutes_ago, room_in_this_minute, sample, without_computed_time, VISIBLE_WITHIN,
};

pub const ADMIN_TOKEN: &str = "e2e-operator-token-4f1c9a7be02d6c35";
/// The SCRAM user of a [`StackBuilder::sasl_ssl_broker`].
pub const SASL_USER: &str = "ratewire-e2e";
/// The three processes of a stack, in start order.
pub const PROCESSES: [&str; 3] = ["ratewire-ingest", "ratewire-projector", "ratewire-api"];
/// The stacks' key sealing webhook secrets (32 bytes, base64).
pub const WEBHOOK_SECRETS_KEY: &str = "cmF0ZXdpcmUtZTJlLXdlYmhvb2stc2VjcmV0cy1rZXk=";
/// The stacks' key signing answers (PKCS#8 PEM, Ed25519; a test's own
/// is made with `openssl genpkey -algorithm ed25519`).
pub const SIGNING_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIFdRYDTp+RRZwFII4pH5+RhJ1aPoBy1yOeahu5Zmvp6W
-----END PRIVATE KEY-----
";
/// The machine's Postgres and Redis, which tests share (each in a
/// database and a key prefix of its own).
pub const POSTGRES: &str = "postgres://postgres@127.0.0.1:5432";
pub const REDIS: &str = "redis://127.0.0.1:6379/0";
