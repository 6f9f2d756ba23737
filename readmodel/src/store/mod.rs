//! Reads from the read model what the views need: one module per subject,
//! sharing here how a bank row and a rate row (with the same bank's
//! previous value of that currency) are selected and read.

mod banks;
mod best;
mod currencies;
mod history;
mod known_at;
mod outliers;
mod quality;
mod range;
mod reference;
mod series;
mod snapshot;

pub use crate::views::{ReferenceDay, ReferenceRow};
pub use banks::{
    active_bank_ids, active_bank_views, active_bank_views_in, bank, bank_ids, bank_view,
    bank_views, bank_views_at, latest_board,
};
pub use best::{best_entry, best_picks, best_rates, best_rates_from, best_rates_in};
pub use currencies::{currency_counts, currency_known, known_currencies, quotes, quotes_of};
pub use history::history;
pub use known_at::{begin_known_at, fold_positions, is_final, known_at_final, FoldPosition};
pub use outliers::{history_record, outliers_at, Outlier};
pub use quality::{active_banks, quality_reports, JudgedBoards, ReportsAsked, ReportsOf};
pub use range::{best_at, best_at_in, records_at, records_at_in, records_between, Best};
pub use reference::{
    in_force, reference_dates, reference_days, reference_series, reference_sources,
};
pub use series::{
    history_revisions, rates_after, series, series_bucket, series_read, Point, RateRow, SeriesRead,
    SERIES_BUCKET_SECONDS, SERIES_DAYS, SERIES_POINTS,
};
use snapshot::SNAPSHOT_VERSION;
pub use snapshot::{begin_snapshot, Version};

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode, SocialLink};
use rust_decimal::Decimal;
use sqlx::types::Json;
use sqlx::Row;

use crate::error::Result;
use crate::views::{BankInfo, PreviousRate, RateView};

/// The as-of of the latest board of the bank `$bank` names (an SQL
/// expression), as SQL: NULL when it has none. Read from the history of
/// each bank's latest as-of that the fold keeps (readmodel migration 0008),
/// one probe whatever the instant the model is read as known at; looked
/// for among the boards, a past instant had to pass every board not yet
/// known then.
macro_rules! latest_as_of {
    ($bank:literal) => {
        concat!(
            "(SELECT as_of FROM bank_latest WHERE bank_id = ",
            $bank,
            " ORDER BY known_from DESC LIMIT 1)"
        )
    };
}

/// [`latest_as_of!`] of the bank `$1`, for `format!`ed statements.
pub(super) const LATEST_AS_OF_PARAM: &str = latest_as_of!("$1");
/// [`latest_as_of!`] of the bank `w.bank_id`.
pub(super) const LATEST_AS_OF_LISTED: &str = latest_as_of!("w.bank_id");

macro_rules! bank_fields {
    () => {
        "b.id, b.code, b.name, b.image_url, b.social_links, b.active"
    };
}

/// A bank row's own columns (from `banks b`): with the time of its latest
/// board as `last_rates_updated_at`, what [`bank_from_row`] reads. For a
/// query that has that time already (its latest board joined).
pub(super) const BANK_FIELDS: &str = bank_fields!();

/// A bank row, as [`bank_from_row`] reads it (from `banks b`).
pub(super) const BANK_COLUMNS: &str = concat!(
    bank_fields!(),
    ",
    ",
    latest_as_of!("b.id"),
    " AS last_rates_updated_at"
);

pub(super) fn bank_from_row(
    row: &sqlx::postgres::PgRow,
) -> Result<(BankInfo, Option<DateTime<Utc>>)> {
    let id: i64 = row.try_get("id")?;
    let social: Json<Vec<SocialLink>> = row.try_get("social_links")?;
    let info = BankInfo {
        // The fold only ever stores ids that came in a valid BankId.
        id: BankId::new(id).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        code: row.try_get("code")?,
        name: row.try_get("name")?,
        image_url: row.try_get("image_url")?,
        social_links: social.0,
        active: row.try_get("active")?,
    };
    Ok((info, row.try_get("last_rates_updated_at")?))
}

/// A rate row and the same bank's previous value of that currency, as
/// [`rate_from_row`] reads them; used with [`PREVIOUS_JOIN`].
pub(super) const RATE_COLUMNS: &str = "r.currency, r.as_of, r.cash_buying, r.cash_selling,
    r.transactional_buying, r.transactional_selling,
    p.cash_buying AS p_cash_buying, p.cash_selling AS p_cash_selling,
    p.transactional_buying AS p_transactional_buying,
    p.transactional_selling AS p_transactional_selling, p.as_of AS p_as_of";

/// Joins `p`, the latest earlier rate of the same bank and currency as `r`.
pub(super) const PREVIOUS_JOIN: &str = "LEFT JOIN LATERAL (
        SELECT * FROM rates_of(r.currency) p
        WHERE p.bank_id = r.bank_id AND p.as_of < r.as_of
        ORDER BY p.as_of DESC LIMIT 1
    ) p ON true";

pub(super) fn rate_from_row(row: &sqlx::postgres::PgRow) -> Result<RateView> {
    let code: String = row.try_get("currency")?;
    let previous = match row.try_get::<Option<DateTime<Utc>>, _>("p_as_of")? {
        Some(_) => Some(PreviousRate {
            cash_buying: row.try_get("p_cash_buying")?,
            cash_selling: row.try_get("p_cash_selling")?,
            transactional_buying: row.try_get("p_transactional_buying")?,
            transactional_selling: row.try_get("p_transactional_selling")?,
        }),
        None => None,
    };
    Ok(RateView {
        currency: CurrencyCode::parse(code.trim()).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        updated_at: row.try_get("as_of")?,
        cash_buying: row.try_get::<Decimal, _>("cash_buying")?,
        cash_selling: row.try_get("cash_selling")?,
        transactional_buying: row.try_get("transactional_buying")?,
        transactional_selling: row.try_get("transactional_selling")?,
        previous,
    })
}

/// The latest board of every active bank that has one (`bank_id`, `as_of`
/// and the `currencies` it quotes), as a reusable SQL fragment. A board's
/// rates are found by the rates' key: `r.bank_id = l.bank_id AND
/// r.currency = ANY (l.currencies) AND r.as_of = l.as_of`.
pub(super) const ACTIVE_LATEST: &str = concat!(
    "SELECT l.bank_id, l.as_of, l.currencies
    FROM banks b
    CROSS JOIN LATERAL (SELECT bank_id, as_of, currencies FROM boards
                        WHERE bank_id = b.id AND as_of = ",
    latest_as_of!("b.id"),
    ") l
    WHERE b.active"
);
