//! Query strings, read strictly: every bad parameter is named with a
//! human-readable message, unknown parameters are ignored (decisions.md),
//! the first of a repeated one is taken.
//!
//! A route's parameters are declared once, as a struct (`query!`): its
//! field types ([`params`]) say how each is read and described, so the
//! OpenAPI document, the parsing and the 400s come from the same lines;
//! [`checker`] holds the checks they are made of.

pub mod checker;
pub mod instants;
pub mod params;
pub mod request;

pub use checker::{
    day_has_come, days_in_order, start_of_day, Checker, CurrencyArg, KnownAt, Params, When,
};
pub use params::{Choice, QueryParam};
pub(crate) use request::query;
pub use request::{parameter, FromQuery, Query};
