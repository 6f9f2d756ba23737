//! How well a bank keeps to what is expected of it: its publishing
//! schedule ([`slots`]).

pub mod slots;

pub use slots::{judge, median, Judged};
