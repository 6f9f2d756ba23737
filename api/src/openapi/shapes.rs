//! The shapes of api-v1's answers, as the hand-serialized views write them.
#![allow(dead_code)]

use utoipa::ToSchema;

/// A key to create. The name is 1 to 200 characters once trimmed.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewKey {
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$"
    )]
    pub name: String,
    /// One of the plans of `RATEWIRE_PLANS` but `anonymous`; default free
    /// (required when there is no free plan).
    #[schema(nullable = false)]
    pub plan: Option<String>,
}

/// A key as operators see it: never its secret.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfo {
    pub prefix: String,
    pub name: String,
    pub plan: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Null while the key works.
    #[schema(format = DateTime, required = true)]
    pub revoked_at: Option<String>,
}

/// A key just created: `key` is its secret, shown only here.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedKey {
    /// `rwk_<prefix>_<32 characters>`; only its SHA-256 is stored.
    pub key: String,
    pub prefix: String,
    pub name: String,
    pub plan: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime, required = true)]
    pub revoked_at: Option<String>,
}

/// A currency, keyed by its ISO 4217 code.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Currency {
    /// The ISO 4217 code, as a stable id.
    pub id: String,
    /// English name.
    pub name: String,
    /// The ISO 4217 code.
    pub symbol: String,
    pub image_url: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SocialLink {
    pub platform: String,
    pub url: String,
}

/// Change from the bank's previous published value (0 when there is none).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    pub cash_buying: f64,
    pub cash_selling: f64,
    /// Present with `transactional=true`; null when not published.
    pub transactional_buying: Option<f64>,
    pub transactional_selling: Option<f64>,
}

/// One currency of a bank's current board on /rates.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeRate {
    pub cash_buying: f64,
    pub cash_selling: f64,
    /// Present with `transactional=true`; null when not published.
    pub transactional_buying: Option<f64>,
    pub transactional_selling: Option<f64>,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub currency: Currency,
    pub difference: Difference,
}

/// A bank on /rates: the id is a number.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RatesBank {
    pub id: i64,
    /// Null until the bank's first board.
    #[schema(format = DateTime, required = true)]
    pub last_rates_updated_at: Option<String>,
    pub name: String,
    pub code: String,
    pub image_url: String,
    pub exchange_rates: Vec<ExchangeRate>,
    /// Present with `socialLinks=true`.
    pub social_links: Option<Vec<SocialLink>>,
}

/// One element of /rates: an inner envelope holding one bank.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RatesElement {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Vec<RatesBank>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RatesResponse {
    /// "Success"
    pub message: String,
    pub status: u16,
    pub data: Vec<RatesElement>,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

/// A board entry on /banks (no difference).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecentRate {
    pub cash_buying: f64,
    pub cash_selling: f64,
    #[schema(required = true)]
    pub transactional_buying: Option<f64>,
    #[schema(required = true)]
    pub transactional_selling: Option<f64>,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub currency: Currency,
}

/// A bank on /banks: the id is a string.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bank {
    pub id: String,
    #[schema(format = DateTime, required = true)]
    pub last_rates_updated_at: Option<String>,
    pub name: String,
    pub code: String,
    pub image_url: String,
    /// Present with `withRecentEx=true`.
    pub exchange_rates: Option<Vec<RecentRate>>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BanksResponse {
    /// "Success"
    pub message: String,
    pub status: u16,
    pub data: Vec<Bank>,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrenciesResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Vec<Currency>,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

/// The bank of a best rate.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestRateBank {
    pub id: i64,
    pub name: String,
    pub code: String,
    pub image_url: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RatePoint {
    pub value: f64,
    #[schema(format = DateTime)]
    pub timestamp: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestRate {
    pub price: f64,
    /// When that bank published it.
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// When this view was computed.
    #[schema(format = DateTime)]
    pub timestamp: String,
    /// Signed change from the bank's previous value, 4 fraction digits ("+0.2500").
    #[schema(pattern = r"^([+-][0-9]+\.[0-9]{4}|0\.0000)$")]
    pub difference: String,
    pub bank: BestRateBank,
    /// The bank's values over the last 30 days, oldest first, at most 100.
    pub rates: Vec<RatePoint>,
}

/// Null where no active bank quotes the field.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestRates {
    #[schema(required = true)]
    pub cash_buying: Option<BestRate>,
    #[schema(required = true)]
    pub cash_selling: Option<BestRate>,
    #[schema(required = true)]
    pub transactional_buying: Option<BestRate>,
    #[schema(required = true)]
    pub transactional_selling: Option<BestRate>,
}

/// The data of a live stream's `best` event: the currency, then its best
/// rates as `data` on best-rates (each names its bank).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestEvent {
    /// The ISO 4217 code these best rates are of.
    pub currency_code: String,
    #[schema(required = true)]
    pub cash_buying: Option<BestRate>,
    #[schema(required = true)]
    pub cash_selling: Option<BestRate>,
    #[schema(required = true)]
    pub transactional_buying: Option<BestRate>,
    #[schema(required = true)]
    pub transactional_selling: Option<BestRate>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestRatesResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: BestRates,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRecord {
    pub cash_buying: f64,
    pub cash_selling: f64,
    #[schema(required = true)]
    pub transactional_buying: Option<f64>,
    #[schema(required = true)]
    pub transactional_selling: Option<f64>,
    /// When the record was published.
    #[schema(format = DateTime)]
    pub timestamp: String,
    pub currency: Currency,
}

/// One point of a bank's series: the interval's start (or the publish
/// time, raw), the value in force at its end and when it was published.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BankSeriesPoint {
    #[schema(format = DateTime)]
    pub timestamp: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// `hour` and `day` only: `updatedAt` when the value was published
    /// before the interval (carried into it, as over a weekend), null when
    /// it was published within it. Absent on `raw` points.
    #[schema(format = DateTime)]
    pub carried_from: Option<String>,
    pub cash_buying: f64,
    pub cash_selling: f64,
    #[schema(required = true)]
    pub transactional_buying: Option<f64>,
    #[schema(required = true)]
    pub transactional_selling: Option<f64>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BankSeries {
    pub bank_id: i64,
    pub currency_code: String,
    /// raw, hour or day
    pub interval: String,
    #[schema(format = DateTime)]
    pub from: String,
    #[schema(format = DateTime)]
    pub to: String,
    /// The link (relative to this service) to the rest of the range when
    /// this answer is one page of it, then also in a `Link` header;
    /// otherwise null.
    #[schema(required = true)]
    pub next: Option<String>,
    pub points: Vec<BankSeriesPoint>,
}

/// One point of a best-across-banks series.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestSeriesPoint {
    #[schema(format = DateTime)]
    pub timestamp: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// `hour` and `day` only: `updatedAt` when the value was published
    /// before the interval (carried into it, as over a weekend), null when
    /// it was published within it. Absent on `raw` points.
    #[schema(format = DateTime)]
    pub carried_from: Option<String>,
    pub value: f64,
    pub bank_id: i64,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BestSeries {
    pub currency_code: String,
    /// cashBuying, cashSelling, transactionalBuying or transactionalSelling
    pub field: String,
    /// hour or day
    pub interval: String,
    #[schema(format = DateTime)]
    pub from: String,
    #[schema(format = DateTime)]
    pub to: String,
    /// The link (relative to this service) to the rest of the range when
    /// this answer is one page of it, then also in a `Link` header;
    /// otherwise null.
    #[schema(required = true)]
    pub next: Option<String>,
    pub points: Vec<BestSeriesPoint>,
}

#[derive(ToSchema)]
#[serde(untagged)]
pub enum SeriesData {
    Bank(BankSeries),
    Best(BestSeries),
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeriesResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: SeriesData,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConvertLeg {
    pub currency: String,
    /// buying (the bank buys it from the customer) or selling
    #[schema(pattern = "^(buying|selling)$")]
    pub side: String,
    pub rate: f64,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConvertBank {
    pub id: i64,
    pub name: String,
    pub code: String,
    pub image_url: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConvertResult {
    pub bank: ConvertBank,
    /// The amount received, rounded to 4 fraction digits.
    pub amount: f64,
    /// Units of `to` per unit of `from` (8 fraction digits at most).
    pub rate: f64,
    pub legs: Vec<ConvertLeg>,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// Seconds since `updatedAt`.
    pub age_seconds: i64,
    /// Older than `RATEWIRE_STALE_AFTER` (72 h unless configured).
    pub stale: bool,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conversion {
    pub from: String,
    pub to: String,
    pub amount: f64,
    pub transactional: bool,
    /// Best first.
    pub results: Vec<ConvertResult>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConvertResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Conversion,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    /// The requested day, YYYY-MM-DD.
    #[schema(format = Date)]
    pub date: String,
    pub data: HistoryRecord,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanLimits {
    pub per_minute: u64,
    pub per_month: u64,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub name: String,
    pub plan: String,
    pub limits: PlanLimits,
    /// Null for anonymous access.
    #[schema(format = DateTime, required = true)]
    pub created_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeResponse {
    pub message: String,
    pub status: u16,
    pub data: Me,
}

/// One window: `reset` is in seconds from now.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageWindow {
    pub limit: u64,
    pub used: u64,
    pub remaining: u64,
    pub reset: u64,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub minute: UsageWindow,
    pub month: UsageWindow,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageResponse {
    pub message: String,
    pub status: u16,
    pub data: Usage,
}
