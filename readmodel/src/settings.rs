//! Where the read model is: the settings the projector and the API both
//! read, defined once and flattened into each process's `Config`, so the
//! writer and its readers cannot be configured apart by a typo.

use ratewire_service::settings::parse_schema;
use rust_decimal::Decimal;

use crate::quality::OutlierRule;
use crate::views::ViewStyle;

#[derive(clap::Args, Debug, Clone)]
pub struct ReadModelSettings {
    /// Postgres schema holding the read model (history, banks, offsets),
    /// until a replay switches to another generation.
    #[arg(long, env = "RATEWIRE_READ_SCHEMA", default_value = "readmodel", value_parser = parse_schema)]
    pub read_schema: String,
    /// Postgres schema of the control table that names the active read-model
    /// generation (written by `ratewire-projector replay`); shared by
    /// projectors and API instances.
    #[arg(long, env = "RATEWIRE_CONTROL_SCHEMA", default_value = "ratewire", value_parser = parse_schema)]
    pub control_schema: String,
    /// Redis URL of the read views (and, for the API, its key cache and
    /// counters): `redis://host:port/db`, or for a Redis Cluster
    /// `redis-cluster://host:port,host:port,...` (seed nodes; see
    /// docs/scaling.md).
    #[arg(
        long,
        env = "RATEWIRE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379/0"
    )]
    pub redis_url: String,
    /// Prefix of every Redis key ratewire uses.
    #[arg(long, env = "RATEWIRE_REDIS_PREFIX", default_value = "rw:")]
    pub redis_prefix: String,
    /// Base URL of currency images; `/{code}.png` (lower case) is appended.
    /// The projector and the API must agree on it.
    #[arg(
        long,
        env = "RATEWIRE_CURRENCY_IMAGE_BASE",
        default_value = "https://assets.ratewire.example/currencies"
    )]
    pub currency_image_base: String,
    /// Seconds the changes stream keeps an entry: a client of the live
    /// stream (`/api/v1/stream`) that reconnects within it gets what it
    /// missed; later, a fresh snapshot.
    #[arg(long, env = "RATEWIRE_STREAM_RETENTION_SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(10..=604_800))]
    pub stream_retention_secs: u64,
    /// The service time zone (IANA name): history days are calendar days
    /// here, quota months are months here, and daily publishing schedules
    /// are kept here.
    #[arg(long, env = "RATEWIRE_TIMEZONE", default_value = "UTC")]
    pub timezone: chrono_tz::Tz,
    /// The spread cap, in percent: a pair whose `spreadPercent` (as
    /// /rates/spreads shows it) is above it is over the cap. 2 by default,
    /// after the National Bank of Ethiopia's directive of 2024-10-16 (a
    /// bank's trading spread on posted rates "generally should not exceed
    /// 2 per cent"); a number above 0 and at most 100.
    #[arg(long, env = "RATEWIRE_SPREAD_CAP_PERCENT", default_value = "2", value_parser = parse_cap)]
    pub spread_cap_percent: Decimal,
    /// The outlier percent: a published value that departs by more than
    /// this from both the bank's previous value of the field and the median
    /// of the other active banks' current values (when two or more others
    /// quote the currency) is an outlier; 20 by default, a number above 0
    /// and at most 1000.
    #[arg(long, env = "RATEWIRE_OUTLIER_PERCENT", default_value = "20", value_parser = parse_outlier_percent)]
    pub outlier_percent: Decimal,
    /// Whether an outlier may still be a best rate: false (the default)
    /// leaves flagged values out of best-rates, true restores the plain
    /// rule (the best value wins, whatever it is).
    #[arg(long, env = "RATEWIRE_OUTLIERS_IN_BEST", default_value_t = false, action = clap::ArgAction::Set)]
    pub outliers_in_best: bool,
}

/// A spread cap: a decimal number above 0 and at most 100.
fn parse_cap(text: &str) -> Result<Decimal, String> {
    parse_percent(text, Decimal::ONE_HUNDRED)
}

/// An outlier percent: a decimal number above 0 and at most 1000 (a
/// tenfold typo departs by 900%).
fn parse_outlier_percent(text: &str) -> Result<Decimal, String> {
    parse_percent(text, Decimal::ONE_THOUSAND)
}

/// A percent above 0 and at most `most`.
fn parse_percent(text: &str, most: Decimal) -> Result<Decimal, String> {
    let percent: Decimal = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number such as 2 or 12.5"))?;
    if percent <= Decimal::ZERO || percent > most {
        return Err(format!("`{text}` is not above 0 and at most {most}"));
    }
    Ok(percent.normalize())
}

impl ReadModelSettings {
    pub fn stream_retention(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.stream_retention_secs)
    }

    pub fn view_style(&self) -> ViewStyle {
        ViewStyle {
            currency_image_base: self.currency_image_base.trim_end_matches('/').to_owned(),
            outliers: OutlierRule {
                percent: self.outlier_percent,
                in_best: self.outliers_in_best,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_cap_is_a_percent_above_zero() {
        assert_eq!(parse_cap("2"), Ok(Decimal::TWO));
        assert_eq!(parse_cap(" 2.50 "), Ok(Decimal::new(25, 1)));
        for bad in ["", "two", "0", "-1", "100.5", "2%"] {
            assert!(parse_cap(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_outlier_percent_is_above_zero_and_at_most_a_thousand() {
        assert_eq!(parse_outlier_percent("20"), Ok(Decimal::from(20)));
        assert_eq!(parse_outlier_percent("1000"), Ok(Decimal::ONE_THOUSAND));
        for bad in ["", "twenty", "0", "-5", "1000.5", "20%"] {
            assert!(parse_outlier_percent(bad).is_err(), "{bad:?}");
        }
    }
}
