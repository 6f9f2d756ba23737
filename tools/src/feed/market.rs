//! The demo's market: its currencies, where each one's mid rate stands on
//! a day, the National Bank's reference board of that day, and how each
//! demo bank quotes around the mid. Everything here depends only on
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

/// The chance that a bank reprices a currency from one of its boards to
/// the next: most publications repeat most of the board before them.
pub const MOVE_CHANCE: f64 = 0.1;

/// The demo bank whose spreads are wider than the National Bank's 2% cap
/// (`spreadPercent`, as /rates/spreads shows it): the watchdog's case.
pub const WIDE_SPREAD_BANK: &str = "BERHAN";

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
    /// Spreads keep under the 2% cap (a side at most 0.9% from the mid),
    /// but for [`WIDE_SPREAD_BANK`]'s (2.5% cash, 2.2% transactional).
    pub fn of(bank_code: &str) -> Self {
        let mut rng = StdRng::seed_from_u64(seed(&["style", bank_code]));
        let offset = rng.gen_range(-0.005..0.005);
        if bank_code == WIDE_SPREAD_BANK {
            return Self {
                offset,
                cash_spread: 0.0125,
                transactional_spread: 0.011,
            };
        }
        Self {
            offset,
            cash_spread: rng.gen_range(0.004..0.009),
            transactional_spread: rng.gen_range(0.002..0.004),
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

/// Currencies and a plausible mid rate in birr per unit.
pub const DEMO_CURRENCIES: [(&str, f64); 18] = [
    ("USD", 155.20),
    ("EUR", 180.40),
    ("GBP", 207.10),
    ("SAR", 41.35),
    ("AED", 42.25),
    ("CNY", 21.80),
    ("CHF", 193.60),
    ("JPY", 1.03),
    ("CAD", 111.20),
    ("KES", 1.20),
    ("AUD", 101.40),
    ("SEK", 16.20),
    ("DKK", 24.18),
    ("NOK", 15.10),
    ("INR", 1.77),
    ("ZAR", 8.70),
    ("KWD", 505.30),
    ("DJF", 0.87),
];

/// A plausible reference board for `date`, in the National Bank's
/// published shape: its buying a little under the market's mid that day, selling 1%
/// above buying, and the weighted average between (equal to buying for
/// USD, as published). The same date always gives the same values, so
/// importing it again changes nothing.
pub fn reference_board(date: NaiveDate) -> String {
    let mut data = Vec::new();
    let mids = DEMO_CURRENCIES.iter().copied().chain([("XDR", 213.40)]);
    for (i, (code, base)) in mids.enumerate() {
        let mid = self::mid(code, base, date);
        let digits = if mid < 10.0 { 6 } else { 4 };
        let value = |x: f64| Decimal::from_f64(x).unwrap_or_default().round_dp(digits);
        let buying = mid * 0.995;
        let selling = buying * 1.01;
        let average = if code == "USD" {
            buying
        } else {
            buying * 1.004
        };
        data.push(format!(
            r#"{{"id":"demo-{date}-{i}","currency_id":"demo-{code}","buying":"{}","selling":"{}","date":"{date}","weighted_average":"{}","currency":{{"id":"demo-{code}","name":"{code}","code":"{code}"}}}}"#,
            value(buying),
            value(selling),
            value(average),
        ));
    }
    format!(
        r#"{{"success":true,"message":"OK","status":200,"data":[{}]}}"#,
        data.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demo_reference_day_is_valid_for_ingest_and_the_same_each_time() {
        let date: NaiveDate = "2026-05-18".parse().unwrap();
        let body = reference_board(date);
        let board = ratewire_ingest::reference::parse(body.as_bytes(), chrono::Utc::now()).unwrap();
        assert_eq!(board.rates().len(), DEMO_CURRENCIES.len() + 1);
        assert_eq!(reference_board(date), body);
        let usd = board
            .rates()
            .iter()
            .find(|r| r.currency().as_str() == "USD")
            .unwrap();
        assert_eq!(usd.weighted_average(), usd.buying());
    }

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
        assert!((0.004..0.009).contains(&cbe.cash_spread));
    }

    #[test]
    fn one_demo_bank_quotes_spreads_over_the_cap_and_the_others_under() {
        for (code, _) in crate::feed::demo::DEMO_BANKS {
            let style = Style::of(code);
            // spreadPercent = 2 × side / mid × 100, with side = spread × mid.
            let percents = [style.cash_spread, style.transactional_spread].map(|s| 200.0 * s);
            match code == WIDE_SPREAD_BANK {
                true => assert!(percents.iter().all(|p| *p > 2.0), "{code}: {percents:?}"),
                false => assert!(percents.iter().all(|p| *p < 2.0), "{code}: {percents:?}"),
            }
        }
    }
}
