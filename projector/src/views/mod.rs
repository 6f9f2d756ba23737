//! The API's views, written to Redis after each commit: [`redis`] stores
//! rendered views under the read model's keys; [`banks`] writes the views
//! of the banks a batch changed and hands them to [`aggregates`], the
//! views over all banks (keeping the best quotes' series in
//! [`series_cache`]); [`mod@reference`] writes the reference sources' views;
//! [`rebuild`] renders everything again from Postgres.
//! Bottom-up: `redis` and `series_cache`, then `reference`, `aggregates`, `rebuild`
//! (through `aggregates`) and `banks` (whose task also runs rebuilds).

pub mod aggregates;
pub mod banks;
pub mod rebuild;
pub mod redis;
pub mod reference;
pub mod series_cache;

pub use banks::BankViews;
pub use redis::{RedisViews, Target, ViewUpdate};
