//! The shapes of the revision log and of a board's provenance.

use utoipa::ToSchema;

use super::shapes::HistoryRecord;

/// One value a revision changed.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionChange {
    /// The ISO 4217 code.
    pub currency_code: String,
    #[schema(pattern = "^(cashBuying|cashSelling|transactionalBuying|transactionalSelling)$")]
    pub field: String,
    /// The revised board's value; null when it did not quote it.
    #[schema(required = true)]
    pub before: Option<f64>,
    /// The value after the revision; null when it left (a retraction, or
    /// a correction without the currency or this rate).
    #[schema(required = true)]
    pub after: Option<f64>,
}

/// A revision: an event that replaced or withdrew a board.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    /// The revising event: the correcting board's, or the retraction's.
    #[schema(format = Uuid)]
    pub event_id: String,
    /// retraction, or correction (a board of the same bank and asOf
    /// replaced it).
    #[schema(pattern = "^(retraction|correction)$")]
    pub kind: String,
    /// The board it revised.
    #[schema(format = Uuid)]
    pub revised_event_id: String,
    pub bank_id: i64,
    /// The revised board's asOf.
    #[schema(format = DateTime)]
    pub as_of: String,
    /// When the revising event's append was acknowledged by the log.
    #[schema(format = DateTime)]
    pub known_at: String,
    /// The publisher's reason, or null.
    #[schema(required = true)]
    pub reason: Option<String>,
    /// Each value that differs, by currency code then field; a retraction
    /// lists every value the board quoted.
    pub changes: Vec<RevisionChange>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revisions {
    /// The bank asked for, or null for every bank.
    #[schema(required = true)]
    pub bank_id: Option<i64>,
    /// The range of known-at times asked for (each null when not given).
    #[schema(format = DateTime, required = true)]
    pub from: Option<String>,
    #[schema(format = DateTime, required = true)]
    pub to: Option<String>,
    /// The link (relative to this service) to the next page when there is
    /// more, then also in a `Link` header; otherwise null.
    #[schema(required = true)]
    pub next: Option<String>,
    /// Oldest known first; ties by eventId.
    pub revisions: Vec<Revision>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionsResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Revisions,
}

/// Where the board's event is on the log.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoardLog {
    pub topic: String,
    #[schema(minimum = 0)]
    pub partition: i32,
    #[schema(minimum = 0)]
    pub offset: i64,
}

/// Where the publisher says the numbers came from (as it sent them).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoardSource {
    #[schema(nullable = false, max_length = 2048)]
    pub url: Option<String>,
    #[schema(pattern = "^(api|page|file|manual)$")]
    pub method: String,
    #[schema(format = DateTime, nullable = false)]
    pub captured_at: Option<String>,
    /// 64 lower-case hex digits.
    #[schema(nullable = false, pattern = "^[0-9a-f]{64}$")]
    pub sha256: Option<String>,
}

/// A board as published, with its provenance.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Board {
    #[schema(format = Uuid)]
    pub event_id: String,
    pub bank_id: i64,
    #[schema(format = DateTime)]
    pub as_of: String,
    /// As published, by currency code (the shape of a /history record).
    pub rates: Vec<HistoryRecord>,
    /// When ingest received it; null for boards from before provenance
    /// was kept.
    #[schema(format = DateTime, required = true)]
    pub received_at: Option<String>,
    /// When the log acknowledged its append; null as `receivedAt`.
    #[schema(format = DateTime, required = true)]
    pub known_at: Option<String>,
    #[schema(required = true)]
    pub log: Option<BoardLog>,
    /// Null when the publisher sent none.
    #[schema(required = true)]
    pub source: Option<BoardSource>,
    /// The publisher's reason (sent with a correcting board), or null.
    #[schema(required = true)]
    pub reason: Option<String>,
    /// inForce (the bank's latest), superseded (a later board of the bank
    /// is in force), retracted or corrected.
    #[schema(pattern = "^(inForce|superseded|retracted|corrected)$")]
    pub status: String,
    /// The events that revised it, oldest first.
    pub revisions: Vec<Revision>,
    /// Its values that were outliers when it was published: each departed
    /// by more than RATEWIRE_OUTLIER_PERCENT (20 by default) from both the
    /// bank's previous value of the field and the median of the other
    /// active banks' values (when two or more quoted the currency), as
    /// known at `knownAt`. Empty for boards from before provenance was kept.
    pub outliers: Vec<BoardOutlier>,
}

/// One outlying value of a board.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoardOutlier {
    #[schema(pattern = "^[A-Z]{3}$")]
    pub currency_code: String,
    #[schema(pattern = "^(cashBuying|cashSelling|transactionalBuying|transactionalSelling)$")]
    pub field: String,
    pub value: f64,
    /// The bank's previous value of the field; null for its first.
    #[schema(required = true)]
    pub previous: Option<f64>,
    /// The median of the other active banks' values; null when fewer
    /// than two others quoted the currency.
    #[schema(required = true)]
    pub median: Option<f64>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoardResponse {
    /// "success"
    pub message: String,
    pub status: u16,
    pub data: Board,
}
