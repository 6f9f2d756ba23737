//! The quality reports' shapes.

use utoipa::ToSchema;

/// A bank's publishing schedule: `{"every": "PT1H"}` (a board in every
/// period, aligned to the Unix epoch), or `{"days": ["Mon", …], "by":
/// "HH:MM"}` (a board on each of those days by that time, in the service
/// time zone).
#[derive(ToSchema)]
pub struct QualitySchedule {
    /// An ISO 8601 duration of at least PT10S.
    #[schema(nullable = false)]
    pub every: Option<String>,
    #[schema(nullable = false)]
    pub days: Option<Vec<String>>,
    #[schema(nullable = false, pattern = "^[0-2][0-9]:[0-5][0-9]$")]
    pub by: Option<String>,
}

/// Consecutive missed slots: from the first one's start to the last one's
/// end.
#[derive(ToSchema)]
pub struct MissedSpan {
    #[schema(format = DateTime)]
    pub from: String,
    #[schema(format = DateTime)]
    pub to: String,
}

/// A span one pair of one currency was quoted over the spread cap: from
/// the as-of of the board that opened it to that of the board that closed
/// it (back within the cap, or not quoting the pair).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadCapBreach {
    #[schema(pattern = "^[A-Z]{3}$")]
    pub currency_code: String,
    #[schema(pattern = "^(cash|transactional)$")]
    pub pair: String,
    #[schema(format = DateTime)]
    pub from: String,
    /// Null while the breach is open.
    #[schema(format = DateTime, required = true)]
    pub to: Option<String>,
    /// The widest spread percent in the span.
    pub max_spread_percent: f64,
}

/// One component of the score: its share (0 to 1), its weight and the
/// points it gives (share × weight).
#[derive(ToSchema)]
pub struct ScoreComponent {
    pub weight: u8,
    #[schema(minimum = 0, maximum = 1)]
    pub share: f64,
    pub points: f64,
}

/// The score's components (docs/api.md, "Quality").
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScoreComponents {
    /// The share of the schedule's slots with a board (weight 40).
    pub publishing: ScoreComponent,
    /// The share of the boards without an outlier (weight 20).
    pub plausibility: ScoreComponent,
    /// One less the corrections and retractions per board (weight 20).
    pub stability: ScoreComponent,
    /// The share of the window no spread was over the cap (weight 20).
    pub spread_cap: ScoreComponent,
}

/// One bank's quality over a window of days.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Quality {
    pub bank_id: i64,
    #[schema(minimum = 1, maximum = 90)]
    pub days: u32,
    /// The window: `days` before its end, to now or `asKnownAt`.
    #[schema(format = DateTime)]
    pub from: String,
    #[schema(format = DateTime)]
    pub to: String,
    /// The schedule in force at the window's end; null without one.
    #[schema(required = true)]
    pub schedule: Option<QualitySchedule>,
    /// Slots that ended in the window while the bank was active with a
    /// schedule.
    pub publishes_expected: u64,
    /// Of them, those without a board received in them.
    pub publishes_missed: u64,
    /// The missed slots, consecutive ones as one span, oldest first (the
    /// latest 1,000 spans).
    pub missed: Vec<MissedSpan>,
    /// Boards received in the window, corrections included.
    pub boards: u64,
    pub corrections: u64,
    pub retractions: u64,
    /// Outlying values on the window's boards (as a board's provenance
    /// lists them).
    pub outliers: u64,
    /// RATEWIRE_SPREAD_CAP_PERCENT.
    pub spread_cap_percent: f64,
    /// Breaches open in the window, by when they opened.
    pub spread_cap_breaches: Vec<SpreadCapBreach>,
    /// The as-of of the bank's latest board; null without one.
    #[schema(format = DateTime, required = true)]
    pub last_board_at: Option<String>,
    /// For a daily schedule, the median delay of its boards after the
    /// deadline, in seconds (0 when on time); else null.
    #[schema(required = true)]
    pub median_delay_seconds: Option<i64>,
    /// 0 to 100: the sum of the components' points, rounded.
    #[schema(minimum = 0, maximum = 100)]
    pub score: u8,
    pub score_components: ScoreComponents,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QualityResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Quality,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QualityListResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    /// Every active bank's report, lowest score first (ties by bank id).
    pub data: Vec<Quality>,
    /// Only with `asKnownAt`: the instant the answer is as known at, to the
    /// millisecond, in UTC.
    #[schema(format = DateTime)]
    pub as_known_at: Option<String>,
}
