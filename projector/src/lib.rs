//! The projector: the read model's only writer. It folds ratewire's event
//! log into Postgres and renders the API's views into Redis.
//!
//! Reading the flow top-down:
//! - [`app`] is the process: the health listener and the [`fold_loop`]
//!   beside it;
//! - [`consumer`] takes messages from the topic in per-partition order and
//!   hands them over in bounded batches; [`group`] shares the partitions
//!   among the live instances through Kafka's consumer group;
//! - [`fold`] applies a batch to Postgres in one transaction, together with
//!   the consumed offsets (exactly-once in effect: a crash before commit
//!   re-reads the batch, a crash after it finds the offsets already moved);
//! - the read model's `store` reads back what a view needs and its `views`
//!   render it (both in `ratewire-readmodel`); [`redis_views`] writes them
//!   to Redis after the commit ([`bank_views`] for the banks a batch
//!   changed, [`aggregates`] for the views over all banks, each a task
//!   beside the fold, [`series_cache`] keeping what the latter read).
//!   Redis is derived state: [`rebuild`] renders it again from Postgres on
//!   start, so a crash between commit and Redis loses nothing;
//! - [`replay`] folds the whole log into a new generation;
//! - [`retention`] purges old bookkeeping (applied event ids, resolved
//!   [`dead_letters`]) beside the fold.
//!
//! Depends on the event contract (`ratewire-proto`), the read model
//! (`ratewire-readmodel`) and the service shell (`ratewire-service`). Must
//! not depend on the API: readers learn about the model from
//! `ratewire-readmodel`, never from here.

pub mod aggregates;
pub mod app;
pub mod bank_views;
pub mod config;
pub mod consumer;
pub mod dead_letters;
pub mod error;
pub mod fold;
pub mod fold_loop;
pub mod group;
pub mod holes;
pub mod http;
pub mod idle;
pub mod metrics;
pub mod rebuild;
pub mod redis_views;
pub mod replay;
pub mod restore_marks;
pub mod retention;
pub mod series_cache;

pub use app::Application;
pub use config::Config;
pub use error::Error;
