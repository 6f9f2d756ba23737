//! The reference-rate endpoints' shapes.

use utoipa::ToSchema;

use super::shapes::{ConvertBank, Currency};

/// One currency's reference rate on one day, as the National Bank
/// published it (numbers with exactly the published digits).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceRate {
    /// The day the rate applies to (a weekday in Addis Ababa).
    #[schema(format = Date)]
    pub date: String,
    /// "NBE": the National Bank of Ethiopia.
    pub source: String,
    pub currency: Currency,
    pub buying: f64,
    pub selling: f64,
    /// Not a midpoint (for USD it has equalled `buying`); premiums are
    /// measured against it.
    pub weighted_average: f64,
}

/// One currency's reference rate, or every currency's.
#[derive(ToSchema)]
#[serde(untagged)]
pub enum ReferenceRateData {
    One(ReferenceRate),
    Every(Vec<ReferenceRate>),
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceRateResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: ReferenceRateData,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

/// A reference day's rates of one currency.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferencePoint {
    #[schema(format = Date)]
    pub date: String,
    pub buying: f64,
    pub selling: f64,
    pub weighted_average: f64,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceSeries {
    pub currency: Currency,
    /// "NBE"
    pub source: String,
    /// The days published in the range, oldest first.
    pub points: Vec<ReferencePoint>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceSeriesResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: ReferenceSeries,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

/// The reference in force today.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadsReference {
    #[schema(format = Date)]
    pub date: String,
    pub buying: f64,
    pub selling: f64,
    pub weighted_average: f64,
}

/// One bank's figures. Spreads are exact (`selling − buying`); percents are
/// rounded to 4 decimals, half away from zero: `spreadPercent = spread /
/// ((buying + selling) / 2) × 100`, `premiumPercent = (side /
/// weightedAverage − 1) × 100` with the reference in force on the day of
/// the bank's board (null when none is). The `transactional…` fields are
/// present with `transactional=true`, null when the bank quotes no
/// transactional rate.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadRow {
    pub bank: ConvertBank,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub cash_buying: f64,
    pub cash_selling: f64,
    pub cash_spread: f64,
    pub cash_spread_percent: f64,
    pub cash_buying_premium_percent: Option<f64>,
    pub cash_selling_premium_percent: Option<f64>,
    pub transactional_buying: Option<f64>,
    pub transactional_selling: Option<f64>,
    pub transactional_spread: Option<f64>,
    pub transactional_spread_percent: Option<f64>,
    pub transactional_buying_premium_percent: Option<f64>,
    pub transactional_selling_premium_percent: Option<f64>,
    /// Whether `cashSpreadPercent` is above `spreadCapPercent`.
    pub cash_over_spread_cap: Option<bool>,
    /// Whether the transactional pair's spread percent is above
    /// `spreadCapPercent`; null when the bank quotes no transactional pair
    /// (present with or without `transactional=true`).
    pub transactional_over_spread_cap: Option<bool>,
    /// The reference day the premiums are measured against.
    #[schema(format = Date)]
    pub reference_date: Option<String>,
    /// Seconds since the bank's quote of this currency.
    pub age_seconds: i64,
    /// Older than `RATEWIRE_STALE_AFTER` (72 h unless configured).
    pub stale: bool,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Spreads {
    pub currency: Currency,
    /// The National Bank's rate in force today, or null.
    pub reference: Option<SpreadsReference>,
    /// The spread cap in percent (`RATEWIRE_SPREAD_CAP_PERCENT`, 2 unless
    /// configured): a pair whose spread percent is above it is over the cap.
    pub spread_cap_percent: f64,
    /// Every active bank quoting the currency, narrowest cash spread first
    /// (ties by bank id).
    pub banks: Vec<SpreadRow>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadsResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Spreads,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}
