//! How well a bank keeps to what is expected of it: its publishing
//! schedule ([`slots`]), plausible values ([`outliers`]) and the spread cap
//! ([`spread`]), brought together in a report with a score ([`report`])
//! (the store reads what they judge; the views write the reports). The
//! fold keeps a [`screen`] of each board so that reports judge the rates
//! of only the boards that may matter.

pub mod outliers;
pub mod report;
pub mod screen;
pub mod slots;
pub mod spread;

pub use outliers::{judge_market, OutlierRule, Quoted, References};
pub use screen::Screen;
pub use slots::{judge, median, Judged};
