//! A rate: birr per unit of a currency, kept exactly as published.

use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::rules::{MAX_DIGITS, MAX_RATE};

/// Birr per unit of a currency: a positive decimal of at most
/// [`MAX_DIGITS`] significant digits, at most [`MAX_RATE`], kept exactly
/// as published (155.10 stays 155.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rate(Decimal);

impl Rate {
    pub fn new(value: Decimal) -> Result<Rate, String> {
        if value <= Decimal::ZERO {
            return Err("must be greater than zero".into());
        }
        if value > MAX_RATE {
            return Err(format!("must be at most {MAX_RATE}"));
        }
        if digits(value) > MAX_DIGITS {
            return Err(too_many_digits());
        }
        Ok(Rate(value))
    }

    /// A number's text (a JSON number, or the decimal string the log
    /// carries) read exactly: never through a float, never rounded.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let is_number = text.starts_with(|c: char| c == '-' || c.is_ascii_digit());
        if !is_number {
            return Err("must be a number".into());
        }
        // Counted on the text: a decimal would round what it cannot hold.
        if significant_digits(text) > MAX_DIGITS as usize {
            return Err(too_many_digits());
        }
        let value = if text.contains(['e', 'E']) {
            Decimal::from_scientific(text)
        } else {
            Decimal::from_str_exact(text)
        }
        .map_err(|_| "must be a finite number within range".to_owned())?;
        Rate::new(value)
    }

    pub fn get(self) -> Decimal {
        self.0
    }
}

fn too_many_digits() -> String {
    format!(
        "must have at most {MAX_DIGITS} significant digits (they are kept exactly, never rounded)"
    )
}

/// The significant digits of a decimal: those of its mantissa (trailing
/// zeros count: 155.10 has five).
fn digits(value: Decimal) -> u32 {
    let mantissa = value.mantissa().unsigned_abs();
    if mantissa == 0 {
        1
    } else {
        mantissa.ilog10() + 1
    }
}

/// The significant digits of a number's text: those of its mantissa
/// without leading zeros.
fn significant_digits(text: &str) -> usize {
    let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
    mantissa
        .chars()
        .filter(char::is_ascii_digit)
        .skip_while(|d| *d == '0')
        .count()
}

impl TryFrom<String> for Rate {
    type Error = String;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Rate::parse(&text)
    }
}

impl From<Rate> for String {
    fn from(rate: Rate) -> String {
        rate.0.to_string()
    }
}

impl FromStr for Rate {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Rate::parse(text)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
