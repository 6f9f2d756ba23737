//! Reads from the read model what the views need.

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode, SocialLink};
use rust_decimal::Decimal;
use sqlx::types::Json;
use sqlx::{PgExecutor, Row};

use crate::error::Result;
use crate::views::{BankInfo, BankView, PreviousRate, RateView};

const BANK_COLUMNS: &str = "b.id, b.code, b.name, b.image_url, b.social_links, b.active,
    (SELECT max(as_of) FROM boards WHERE bank_id = b.id) AS last_rates_updated_at";

fn bank_from_row(row: &sqlx::postgres::PgRow) -> Result<(BankInfo, Option<DateTime<Utc>>)> {
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

/// One bank, active or not, with the time of its latest board.
pub async fn bank<'e>(
    db: impl PgExecutor<'e>,
    id: BankId,
) -> Result<Option<(BankInfo, Option<DateTime<Utc>>)>> {
    let row = sqlx::query(&format!(
        "SELECT {BANK_COLUMNS} FROM banks b WHERE b.id = $1"
    ))
    .bind(id.get())
    .fetch_optional(db)
    .await?;
    row.as_ref().map(bank_from_row).transpose()
}

/// Every bank id, active or not, in id order.
pub async fn bank_ids<'e>(db: impl PgExecutor<'e>) -> Result<Vec<BankId>> {
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM banks ORDER BY id")
        .fetch_all(db)
        .await?;
    Ok(ids
        .into_iter()
        .filter_map(|id| BankId::new(id).ok())
        .collect())
}

/// The bank's latest board, each currency with its previous value.
pub async fn latest_board<'e>(db: impl PgExecutor<'e>, id: BankId) -> Result<Vec<RateView>> {
    let rows = sqlx::query(
        "WITH latest AS (
             SELECT as_of FROM boards WHERE bank_id = $1 ORDER BY as_of DESC LIMIT 1
         )
         SELECT r.currency, r.as_of, r.cash_buying, r.cash_selling,
                r.transactional_buying, r.transactional_selling,
                p.cash_buying AS p_cash_buying, p.cash_selling AS p_cash_selling,
                p.transactional_buying AS p_transactional_buying,
                p.transactional_selling AS p_transactional_selling,
                p.as_of AS p_as_of
         FROM rates r
         JOIN latest l ON r.as_of = l.as_of
         LEFT JOIN LATERAL (
             SELECT * FROM rates p
             WHERE p.bank_id = r.bank_id AND p.currency = r.currency AND p.as_of < r.as_of
             ORDER BY p.as_of DESC LIMIT 1
         ) p ON true
         WHERE r.bank_id = $1
         ORDER BY r.currency",
    )
    .bind(id.get())
    .fetch_all(db)
    .await?;
    rows.iter()
        .map(|row| {
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
                currency: CurrencyCode::parse(code.trim())
                    .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
                updated_at: row.try_get("as_of")?,
                cash_buying: row.try_get::<Decimal, _>("cash_buying")?,
                cash_selling: row.try_get("cash_selling")?,
                transactional_buying: row.try_get("transactional_buying")?,
                transactional_selling: row.try_get("transactional_selling")?,
                previous,
            })
        })
        .collect()
}

/// Everything a bank's views are made of; `None` for an unknown bank.
pub async fn bank_view(pool: &sqlx::PgPool, id: BankId) -> Result<Option<BankView>> {
    // One snapshot for both reads, so the board matches the bank row.
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let Some((bank, last_rates_updated_at)) = bank(&mut *tx, id).await? else {
        return Ok(None);
    };
    let rates = latest_board(&mut *tx, id).await?;
    tx.commit().await?;
    Ok(Some(BankView {
        bank,
        last_rates_updated_at,
        rates,
    }))
}

/// Views of every active bank, in id order.
pub async fn active_bank_views(pool: &sqlx::PgPool) -> Result<Vec<BankView>> {
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM banks WHERE active ORDER BY id")
        .fetch_all(pool)
        .await?;
    let mut views = Vec::with_capacity(ids.len());
    for id in ids.into_iter().filter_map(|id| BankId::new(id).ok()) {
        if let Some(view) = bank_view(pool, id).await? {
            if view.bank.active {
                views.push(view);
            }
        }
    }
    Ok(views)
}
