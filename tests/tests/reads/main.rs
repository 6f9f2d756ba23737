//! What the API answers to its public reads, each file a subject of
//! api-v1: tests run on an in-process [`world`] (the API's routers, the
//! projector's fold and views, ingest's board parser, on real Postgres and
//! Redis), with a few that need the real processes on a `Stack`.

mod world;

mod banks;
mod best_rates;
mod currencies;
mod errors;
mod history;
mod rates;
mod series_convert;
