//! The shapes of ingest's OpenAPI documents (assembled in
//! `routes::docs` from the handlers' `#[utoipa::path]` annotations).
//!
//! Text fields are not blank (whitespace as the server trims it) and hold
//! no NUL (Postgres cannot store it); URLs are http(s).
//!
//! The documents state every rule JSON Schema can state, so a client
//! generated from them sends what the server takes: known currency codes,
//! rates within range, at most 500 entries, a whole transactional pair,
//! an event id that is a UUID. Three rules of a board are beyond a schema
//! and are stated in words: selling not below buying, each currency once,
//! and an `asOf` between 1990-01-01 and five minutes after the push. The
//! schemas are also a little stricter than the server where generated
//! numbers would otherwise break the exactness rule (rates at least
//! 0.0000001, which every real quote is).
#![allow(dead_code)]

pub use ratewire_service::openapi::{ErrorBody, OperatorErrors, ValidationErrorBody};
use utoipa::ToSchema;

/// A board: every currency one bank quotes at one time. Rules a schema
/// cannot state: each currency at most once; in each pair selling not
/// below buying; `asOf` not before 1990-01-01T00:00:00Z and not more than
/// 5 minutes after the push is received.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Board {
    /// When the rates took effect (RFC 3339); default: when received.
    #[schema(format = DateTime, nullable = false)]
    pub as_of: Option<String>,
    #[schema(min_items = 1, max_items = 500)]
    pub rates: Vec<BoardRate>,
    #[schema(nullable = false)]
    pub source: Option<BoardSource>,
    /// Why the board is published, for whoever reads the revision log: a
    /// board that replaces one of the same `asOf` is a correction, shown
    /// there with this reason.
    #[schema(max_length = 500, pattern = r"^[^\u0000]*$", nullable = false)]
    pub reason: Option<String>,
}

/// Where the board's numbers came from. Rule a schema cannot state:
/// `capturedAt` not before 1990-01-01T00:00:00Z and not more than 5
/// minutes after the push is received.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoardSource {
    /// The page, file or API the numbers were read from.
    #[schema(
        max_length = 2048,
        pattern = r"^https?://[^/?#\s\u0000-\u001f\u007f-\u009f]+[^\s\u0000-\u001f\u007f-\u009f]*$",
        nullable = false
    )]
    pub url: Option<String>,
    pub method: SourceMethod,
    /// When the publisher read them (RFC 3339).
    #[schema(format = DateTime, nullable = false)]
    pub captured_at: Option<String>,
    /// The SHA-256 of what was read (either case; kept in lower case).
    #[schema(pattern = "^[0-9a-fA-F]{64}$", nullable = false)]
    pub sha256: Option<String>,
}

/// How the publisher got the numbers: the bank's API, a web page, a
/// published file, or typed in by a person.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourceMethod {
    Api,
    Page,
    File,
    Manual,
}

/// One currency of a board, in birr per unit. Numbers are kept exactly as
/// published (at most 28 significant digits), never rounded.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoardRate {
    /// ISO 4217 code (any case; listed upper case).
    pub currency: String,
    #[schema(minimum = 0.0000001, maximum = 1000000000)]
    pub cash_buying: f64,
    /// Not below `cashBuying`.
    #[schema(minimum = 0.0000001, maximum = 1000000000)]
    pub cash_selling: f64,
    /// With `transactionalSelling` or not at all.
    #[schema(minimum = 0.0000001, maximum = 1000000000, nullable = false)]
    pub transactional_buying: Option<f64>,
    /// With `transactionalBuying` or not at all; not below it.
    #[schema(minimum = 0.0000001, maximum = 1000000000, nullable = false)]
    pub transactional_selling: Option<f64>,
}

/// A retraction's optional body.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Retraction {
    /// Why the board is withdrawn, for whoever reads the log.
    #[schema(max_length = 500, pattern = r"^[^\u0000]*$", nullable = false)]
    pub reason: Option<String>,
}

/// The event is on the log (durably acknowledged by the broker).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub status: u16,
    /// "Accepted"
    pub message: String,
    /// The event's id: a board's is what a retraction names.
    #[schema(format = Uuid)]
    pub event_id: String,
}

/// A board is on the log (durably acknowledged by the broker).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcceptedBoard {
    pub status: u16,
    /// "Accepted"
    pub message: String,
    /// The board's event id: what a retraction names.
    #[schema(format = Uuid)]
    pub event_id: String,
    /// The board's known-at time: the broker's log-append time, to the
    /// millisecond, in UTC; absent when the topic does not stamp messages
    /// so. Reads `asKnownAt` this instant or later include the board.
    #[schema(format = DateTime)]
    pub known_at: Option<String>,
}

/// A day of reference rates imported.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceImported {
    /// 202 when published, 200 when the day was already published with
    /// these values.
    pub status: u16,
    /// "Accepted" or "Unchanged"
    pub message: String,
    /// The event carrying the day's values (the earlier one when unchanged).
    #[schema(format = Uuid)]
    pub event_id: String,
    /// "NBE"
    pub source: String,
    #[schema(format = Date)]
    pub date: String,
    /// How many currencies the day has.
    pub currencies: u32,
    /// `published` (a new day), `corrected` (other values for a day
    /// published before: they replace it) or `unchanged`.
    pub outcome: String,
}

/// The National Bank's published `filter-exchange-rates` response, as it
/// is: numbers are decimal strings; names and ids are ignored (currencies
/// are keyed on `currency.code`); a field the published shape does not
/// have is refused. Rules beyond the schema: every entry is for the same
/// day, not after today in Addis Ababa; each currency once; `selling` not
/// below `buying`.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishedReference {
    /// Must not be false.
    pub success: Option<bool>,
    pub message: Option<String>,
    /// 200 when present.
    #[schema(minimum = 200, maximum = 200)]
    pub status: Option<u16>,
    #[schema(min_items = 1, max_items = 500)]
    pub data: Vec<PublishedReferenceRate>,
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishedReferenceRate {
    pub id: Option<String>,
    pub currency_id: Option<String>,
    /// A positive decimal string, e.g. "157.227" (at most 1,000,000,000).
    #[schema(pattern = r"^(?:[1-9][0-9]{0,8}(?:\.[0-9]{1,10})?|0\.[0-9]{0,9}[1-9])$")]
    pub buying: String,
    /// Not below `buying`.
    #[schema(pattern = r"^(?:[1-9][0-9]{0,8}(?:\.[0-9]{1,10})?|0\.[0-9]{0,9}[1-9])$")]
    pub selling: String,
    /// The day the rate applies to (YYYY-MM-DD), from 1990 to today in Addis Ababa.
    #[schema(format = Date)]
    pub date: String,
    #[schema(pattern = r"^(?:[1-9][0-9]{0,8}(?:\.[0-9]{1,10})?|0\.[0-9]{0,9}[1-9])$")]
    pub weighted_average: String,
    pub currency: PublishedCurrency,
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishedCurrency {
    pub id: Option<String>,
    pub name: Option<String>,
    /// An ISO 4217 code (XDR included), any case.
    pub code: String,
}

#[derive(ToSchema)]
pub struct SocialLink {
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$"
    )]
    pub platform: String,
    #[schema(max_length = 2048, pattern = r"^https?://[^\u0000]*$")]
    pub url: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bank {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub image_url: String,
    pub social_links: Vec<SocialLink>,
    pub active: bool,
}

/// A bank to register (publishes BankRegistered).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewBank {
    /// Short unique code, e.g. CBE.
    #[schema(
        min_length = 1,
        max_length = 32,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$"
    )]
    pub code: String,
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$"
    )]
    pub name: String,
    #[schema(max_length = 2048, pattern = r"^https?://[^\u0000]*$")]
    pub image_url: String,
    #[schema(nullable = false)]
    pub social_links: Option<Vec<SocialLink>>,
}

/// What changes; at least one field.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BankPatch {
    #[schema(
        min_length = 1,
        max_length = 32,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$",
        nullable = false
    )]
    pub code: Option<String>,
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000]*[^\s\u0085\u0000][^\u0000]*$",
        nullable = false
    )]
    pub name: Option<String>,
    #[schema(
        max_length = 2048,
        pattern = r"^https?://[^\u0000]*$",
        nullable = false
    )]
    pub image_url: Option<String>,
    #[schema(nullable = false)]
    pub social_links: Option<Vec<SocialLink>>,
    /// false takes the bank out of every list; true brings it back.
    #[schema(nullable = false)]
    pub active: Option<bool>,
}

/// A publisher token, shown only this once.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    pub token: String,
    pub prefix: String,
    pub bank_id: i64,
}
