//! The demo's market: where each currency's mid rate stands on a day, and
//! how each demo bank quotes around it. Everything here depends only on
//! the date, the currency and the bank's code, so the year of history the
//! demo publishes, the National Bank's reference days and the live boards
//! tell one story, and making any day's board again gives the same bytes.

use std::f64::consts::TAU;

use chrono::{Datelike, NaiveDate};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rust_decimal::prelude::FromPrimitive;
use rust_decimal::Decimal;

/// A stable hash of `parts` (FNV-1a): the seed of everything made up per
/// bank, currency or day, the same in every build.
pub fn seed(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The market mid of `code` on `date`, around its `base`: a yearly swing
/// of ±4%, a seven-week one of ±1.5% and an eleven-day one of ±0.5%, each
/// currency in its own phase.
pub fn mid(code: &str, base: f64, date: NaiveDate) -> f64 {
    let day = f64::from(date.num_days_from_ce());
    let phase = (seed(&[code]) % 10_000) as f64 / 10_000.0 * TAU;
    let wave = |amplitude: f64, period: f64, turns: f64| {
        amplitude * (TAU * day / period + turns * phase).sin()
    };
    base * (1.0 + wave(0.04, 365.25, 1.0) + wave(0.015, 47.0, 2.0) + wave(0.005, 11.0, 3.0))
}

/// How a bank quotes: how far its mids sit from the market's, and its
/// cash and transactional spreads (each side's distance from the mid).
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub offset: f64,
    pub cash_spread: f64,
    pub transactional_spread: f64,
}

impl Style {
    /// The style of the bank with this code, the same on every run.
    pub fn of(bank_code: &str) -> Self {
        let mut rng = StdRng::seed_from_u64(seed(&["style", bank_code]));
        Self {
            offset: rng.gen_range(-0.005..0.005),
            cash_spread: rng.gen_range(0.010..0.020),
            transactional_spread: rng.gen_range(0.004..0.009),
        }
    }

    /// One rate entry of a board for a currency whose mid at this bank is
    /// `mid`, as push-body JSON: decimals go on the wire as bare numbers
    /// with their exact digits, which `serde_json::Value` cannot hold.
    pub fn entry(&self, code: &str, mid: f64) -> String {
        let quote = |spread: f64, side: f64| {
            let digits = if mid < 10.0 { 4 } else { 2 };
            Decimal::from_f64(mid * (1.0 + side * spread))
                .unwrap_or_default()
                .round_dp(digits)
        };
        format!(
            r#"{{"currency":"{code}","cashBuying":{},"cashSelling":{},"transactionalBuying":{},"transactionalSelling":{}}}"#,
            quote(self.cash_spread, -1.0),
            quote(self.cash_spread, 1.0),
            quote(self.transactional_spread, -1.0),
            quote(self.transactional_spread, 1.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_of_the_market_is_the_same_on_every_run_and_stays_near_its_base() {
        let date: NaiveDate = "2026-05-18".parse().unwrap();
        assert_eq!(mid("USD", 155.2, date), mid("USD", 155.2, date));
        assert_ne!(mid("USD", 155.2, date), mid("EUR", 155.2, date));
        for days in 0..730 {
            let day = date + chrono::Days::new(days);
            let m = mid("USD", 155.2, day);
            assert!((155.2 * 0.94..=155.2 * 1.06).contains(&m), "{day}: {m}");
        }
    }

    #[test]
    fn a_bank_keeps_its_style() {
        let cbe = Style::of("CBE");
        assert_eq!(
            cbe.entry("USD", 155.2),
            Style::of("CBE").entry("USD", 155.2)
        );
        assert!((0.010..0.020).contains(&cbe.cash_spread));
    }
}
