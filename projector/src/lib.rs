//! The projector: the read model's only writer. It folds ratewire's event
//! log into Postgres and renders the API's views into Redis.
//!
//! Reading the flow top-down:
//! - [`app`] is the process: the health listener ([`http`]), the
//!   [`fold_loop`] and the alerts' deliverer (`ratewire_alerts::delivery`)
//!   beside it; [`cli`] holds the operator commands, [`config`] every
//!   setting, [`error`] the one error type, [`metrics`] what it counts;
//! - [`fold_loop`] takes a batch, folds it, hands the changed banks to the
//!   view tasks, and once a second follows a generation switch;
//!   [`assignment`] decides which partitions it reads and from where
//!   ([`holes`] for offsets that hold nothing, [`idle`] for pausing on a
//!   quiet log), and [`housekeeping`] keeps the views complete, purges old
//!   bookkeeping ([`retention`]) and counts the [`dead_letters`];
//! - [`consumer`] takes messages from the topic in per-partition order and
//!   hands them over in bounded batches; [`group`] shares the partitions
//!   among the live instances through Kafka's consumer group;
//! - [`fold`] applies a batch to Postgres in one transaction, together with
//!   the consumed offsets (exactly-once in effect: a crash before commit
//!   re-reads the batch, a crash after it finds the offsets already moved):
//!   its pure core decides, its loader and writer read and write sets of
//!   rows, and the alerts' judge (`ratewire_alerts::evaluation`) follows
//!   each event;
//! - the read model's `store` reads back what a view needs and its `views`
//!   render it (both in `ratewire-readmodel`); [`views`] writes them to
//!   Redis after the commit, each a task beside the fold. Redis is derived
//!   state, rendered again from Postgres when it lost them; a restored
//!   Postgres is told by [`restore_marks`];
//! - [`replay`] folds the whole log into a new generation; [`verify`]
//!   compares one generation with another, or with a replay of the log.
//!
//! Depends on the event contract (`ratewire-proto`), the read model
//! (`ratewire-readmodel`), the alerts (`ratewire-alerts`) and the service
//! shell (`ratewire-service`). Must
//! not depend on the API: readers learn about the model from
//! `ratewire-readmodel`, never from here.

pub mod app;
pub mod assignment;
pub mod cli;
pub mod config;
pub mod consumer;
pub mod dead_letters;
pub mod error;
pub mod fold;
pub mod fold_loop;
pub mod group;
pub mod holes;
pub mod housekeeping;
pub mod http;
pub mod idle;
pub mod metrics;
pub mod replay;
pub mod restore_marks;
pub mod retention;
pub mod stalls;
pub mod verify;
pub mod views;

pub use app::Application;
pub use config::Config;
pub use error::Error;
