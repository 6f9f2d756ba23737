//! How well a bank keeps to what is expected of it: its publishing
//! schedule ([`slots`]) and plausible values ([`outliers`]).

pub mod outliers;
pub mod slots;

pub use outliers::{judge_market, OutlierRule, Quoted, References};
pub use slots::{judge, median, Judged};
