//! One event applied on its own, by type. The set-based path for runs of
//! boards (`boards`) must give exactly what this gives.

use std::collections::BTreeSet;

use ratewire_proto::{BoardRetracted, CurrencyCode, Envelope, Event, ReferenceBoardPublished};
use sqlx::PgConnection;

use super::Incoming;

/// What became of an event the model took.
pub(super) enum Applied {
    Yes,
    Duplicate,
}

pub(super) enum Rejection {
    /// The event keeps the contract but contradicts the model (an unknown
    /// bank...): the rule's name and what happened.
    Invalid {
        rule: &'static str,
        reason: String,
    },
    Database(sqlx::Error),
}

impl Rejection {
    fn unknown_bank(bank: i64) -> Self {
        Rejection::Invalid {
            rule: "unknown-bank",
            reason: format!("bank {bank} is not registered"),
        }
    }
}

impl From<sqlx::Error> for Rejection {
    fn from(e: sqlx::Error) -> Self {
        Rejection::Database(e)
    }
}

/// Makes room for boards about to be written (`$1` bank ids and `$2`
/// as-ofs, paired), as the head of one statement:
/// - a board re-published for the same as-of replaces the earlier one, so
///   any stored board with that as-of goes, with its rates (nothing
///   cascades: see migration 0002);
/// - each bank given a board at or before its latest as-of (a backfill or a
///   replacement) gets its `history_rev` bumped: such a write changes
///   history behind the newest row, which readers of "the rows after the
///   newest I saw" (the best-rates series cache) would otherwise never see.
///
/// Every part reads the table as it was before the statement. The boards'
/// delete names both key columns with `= ANY` so that it stays an index
/// scan in the generic plan of the prepared statement (a join against the
/// unnested pairs became a scan of every board once Postgres stopped
/// planning each execution, and grew with the history); their rates are
/// found by the rates' key from the currencies each deleted board held
/// (OFFSET 0 keeps those probes from becoming a join), and deleted by row
/// address.
pub(super) const CLEAR_FOR_BOARDS: &str = "WITH incoming AS (
        SELECT * FROM UNNEST($1::bigint[], $2::timestamptz[]) AS i (bank_id, as_of)
    ), rewrites AS (
        UPDATE banks b SET history_rev = history_rev + 1
        FROM (SELECT bank_id, min(as_of) AS earliest FROM incoming GROUP BY bank_id) i
        WHERE b.id = i.bank_id
          AND i.earliest <= (SELECT max(as_of) FROM boards WHERE bank_id = i.bank_id)
    ), old_boards AS (
        DELETE FROM boards t
        WHERE t.bank_id = ANY($1) AND t.as_of = ANY($2)
          AND (t.bank_id, t.as_of) IN (SELECT bank_id, as_of FROM incoming)
        RETURNING t.bank_id, t.as_of, t.currencies
    ), old_rates AS (
        DELETE FROM rates t
        WHERE t.ctid = ANY (ARRAY(
            SELECT r.ctid FROM old_boards o
            CROSS JOIN LATERAL (SELECT ctid FROM rates r
                                WHERE r.bank_id = o.bank_id AND r.currency = ANY (o.currencies)
                                  AND r.as_of = o.as_of
                                OFFSET 0) r))
    )";

/// Records currencies as quoted: codes, names and board as-ofs in the
/// statement's parameters `$first`, `$first + 1` and `$first + 2`.
///
/// A currency's first quote is the earliest as-of of any board that named
/// it, replaced or not; not the first board in log order, which partitions
/// do not have between them (and lanes commit in any order), so a replay
/// gives the same answer. Currencies already known from an earlier board
/// are left out before the insert, so that lanes never wait on each other's
/// rows here.
pub(super) fn currencies_first_quoted(first: u8) -> String {
    let (codes, names, firsts) = (first, first + 1, first + 2);
    format!(
        "INSERT INTO currencies (code, name, first_quoted_at)
         SELECT c.code, c.name, c.first
         FROM UNNEST(${codes}::text[], ${names}::text[], ${firsts}::timestamptz[]) AS c (code, name, first)
         WHERE NOT EXISTS (SELECT 1 FROM currencies k
                           WHERE k.code = c.code::char(3) AND k.first_quoted_at <= c.first)
         ON CONFLICT (code) DO UPDATE SET first_quoted_at = EXCLUDED.first_quoted_at
         WHERE currencies.first_quoted_at > EXCLUDED.first_quoted_at"
    )
}

static CURRENCIES_FIRST_QUOTED: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| currencies_first_quoted(1));

/// The currencies on the bank's latest board.
async fn latest_currencies(db: &mut PgConnection, bank: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT unnest(currencies)::text FROM
             (SELECT currencies FROM boards WHERE bank_id = $1 ORDER BY as_of DESC LIMIT 1) l",
    )
    .bind(bank)
    .fetch_all(db)
    .await
}

/// Applies one event; adds to `touched` every currency whose best rates it
/// may change (the bank's board before and after).
pub(super) async fn apply_event(
    db: &mut PgConnection,
    envelope: &Envelope,
    message: &Incoming,
    touched: &mut BTreeSet<CurrencyCode>,
) -> Result<Applied, Rejection> {
    let first_time = sqlx::query(
        r#"INSERT INTO applied_events (event_id, partition, "offset") VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"#,
    )
    .bind(envelope.event_id)
    .bind(message.partition)
    .bind(message.offset)
    .execute(&mut *db)
    .await?
    .rows_affected()
        == 1;
    if !first_time {
        return Ok(Applied::Duplicate);
    }

    let bank = envelope.bank_id.get();
    let at = envelope.occurred_at;
    let unknown = || Rejection::unknown_bank(bank);
    if !matches!(
        envelope.event,
        Event::BankRegistered(_) | Event::ReferenceBoardPublished(_)
    ) {
        // Whatever the bank quoted so far may change its place in best rates.
        let before = latest_currencies(db, bank).await?;
        touched.extend(
            before
                .iter()
                .filter_map(|c| CurrencyCode::parse(c.trim()).ok()),
        );
    }
    match &envelope.event {
        Event::BankRegistered(e) => {
            let inserted = sqlx::query(
                "INSERT INTO banks (id, code, name, image_url, social_links, active, registered_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, TRUE, $6, $6) ON CONFLICT (id) DO NOTHING",
            )
            .bind(bank)
            .bind(&e.code)
            .bind(&e.name)
            .bind(&e.image_url)
            .bind(sqlx::types::Json(&e.social_links))
            .bind(at)
            .execute(&mut *db)
            .await?
            .rows_affected();
            if inserted == 0 {
                return Err(Rejection::Invalid {
                    rule: "bank-registered",
                    reason: format!("bank {bank} is already registered"),
                });
            }
        }
        Event::BankUpdated(e) => {
            let updated = sqlx::query(
                "UPDATE banks SET code = COALESCE($2, code), name = COALESCE($3, name),
                     image_url = COALESCE($4, image_url), social_links = COALESCE($5, social_links),
                     updated_at = $6
                 WHERE id = $1",
            )
            .bind(bank)
            .bind(&e.code)
            .bind(&e.name)
            .bind(&e.image_url)
            .bind(e.social_links.as_ref().map(sqlx::types::Json))
            .bind(at)
            .execute(&mut *db)
            .await?
            .rows_affected();
            if updated == 0 {
                return Err(unknown());
            }
        }
        Event::BankDeactivated(_) | Event::BankReactivated(_) => {
            let active = matches!(envelope.event, Event::BankReactivated(_));
            let updated =
                sqlx::query("UPDATE banks SET active = $2, updated_at = $3 WHERE id = $1")
                    .bind(bank)
                    .bind(active)
                    .bind(at)
                    .execute(&mut *db)
                    .await?
                    .rows_affected();
            if updated == 0 {
                return Err(unknown());
            }
        }
        Event::BoardPublished(board) => {
            let (known, retracted): (bool, bool) = sqlx::query_as(
                "SELECT EXISTS (SELECT 1 FROM banks WHERE id = $1),
                        EXISTS (SELECT 1 FROM retracted_boards WHERE event_id = $2 AND bank_id = $1)",
            )
            .bind(bank)
            .bind(envelope.event_id)
            .fetch_one(&mut *db)
            .await?;
            if !known {
                return Err(unknown());
            }
            if retracted {
                // Withdrawn before it was applied (a re-drive after its
                // retraction): it stays withdrawn.
                return Ok(Applied::Yes);
            }
            touched.extend(board.rates().iter().map(|r| r.currency()));
            sqlx::query(&format!("{CLEAR_FOR_BOARDS} SELECT 1"))
                .bind([bank])
                .bind([board.as_of()])
                .execute(&mut *db)
                .await?;
            let rates = board.rates();
            let currencies: Vec<String> = rates.iter().map(|r| r.currency().to_string()).collect();
            sqlx::query(
                "INSERT INTO boards (bank_id, as_of, event_id, currencies)
                 VALUES ($1, $2, $3, $4::text[]::char(3)[])",
            )
            .bind(bank)
            .bind(board.as_of())
            .bind(envelope.event_id)
            .bind(&currencies)
            .execute(&mut *db)
            .await?;
            let names: Vec<String> = rates.iter().map(|r| r.currency().name()).collect();
            let firsts = vec![board.as_of(); currencies.len()];
            sqlx::query(&CURRENCIES_FIRST_QUOTED)
                .bind(&currencies)
                .bind(&names)
                .bind(&firsts)
                .execute(&mut *db)
                .await?;
            let cash_buying: Vec<_> = rates.iter().map(|r| r.cash_buying()).collect();
            let cash_selling: Vec<_> = rates.iter().map(|r| r.cash_selling()).collect();
            let tx_buying: Vec<_> = rates.iter().map(|r| r.transactional_buying()).collect();
            let tx_selling: Vec<_> = rates.iter().map(|r| r.transactional_selling()).collect();
            sqlx::query(
                "INSERT INTO rates (bank_id, as_of, currency, cash_buying, cash_selling,
                                    transactional_buying, transactional_selling)
                 SELECT $1, $2, * FROM UNNEST($3::text[], $4::numeric[], $5::numeric[], $6::numeric[], $7::numeric[])",
            )
            .bind(bank)
            .bind(board.as_of())
            .bind(&currencies)
            .bind(&cash_buying)
            .bind(&cash_selling)
            .bind(&tx_buying)
            .bind(&tx_selling)
            .execute(&mut *db)
            .await?;
        }
        Event::BoardRetracted(retraction) => {
            let known: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM banks WHERE id = $1)")
                    .bind(bank)
                    .fetch_one(&mut *db)
                    .await?;
            if !known {
                return Err(unknown());
            }
            retract(db, bank, envelope, retraction, touched).await?;
        }
        Event::ReferenceBoardPublished(board) => reference_board(db, envelope, board).await?,
    }
    Ok(Applied::Yes)
}

/// Stores a reference day, replacing what the source published for it
/// before (a correction): its rates go with the old row.
async fn reference_board(
    db: &mut PgConnection,
    envelope: &Envelope,
    board: &ReferenceBoardPublished,
) -> Result<(), Rejection> {
    sqlx::query("DELETE FROM reference_boards WHERE source = $1 AND date = $2")
        .bind(board.source())
        .bind(board.date())
        .execute(&mut *db)
        .await?;
    sqlx::query(
        "INSERT INTO reference_boards (source, date, event_id, published_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(board.source())
    .bind(board.date())
    .bind(envelope.event_id)
    .bind(envelope.occurred_at)
    .execute(&mut *db)
    .await?;
    let rates = board.rates();
    let currencies: Vec<String> = rates.iter().map(|r| r.currency().to_string()).collect();
    let buying: Vec<_> = rates.iter().map(|r| r.buying()).collect();
    let selling: Vec<_> = rates.iter().map(|r| r.selling()).collect();
    let average: Vec<_> = rates.iter().map(|r| r.weighted_average()).collect();
    sqlx::query(
        "INSERT INTO reference_rates (source, date, currency, buying, selling, weighted_average)
         SELECT $1, $2, * FROM UNNEST($3::text[], $4::numeric[], $5::numeric[], $6::numeric[])",
    )
    .bind(board.source())
    .bind(board.date())
    .bind(&currencies)
    .bind(&buying)
    .bind(&selling)
    .bind(&average)
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// Withdraws a board: its rows go, so every reader (latest board,
/// differences, best rates, history) answers as if it had never been
/// published, and the retraction is remembered (see migration 0005). A
/// board not stored (never applied, replaced by a later one with the same
/// as-of, or of another bank) leaves the rows as they are.
async fn retract(
    db: &mut PgConnection,
    bank: i64,
    envelope: &Envelope,
    retraction: &BoardRetracted,
    touched: &mut BTreeSet<CurrencyCode>,
) -> Result<(), Rejection> {
    sqlx::query(
        "INSERT INTO retracted_boards (event_id, bank_id, retracted_by, reason, retracted_at)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (event_id) DO NOTHING",
    )
    .bind(retraction.board_event_id)
    .bind(bank)
    .bind(envelope.event_id)
    .bind(&retraction.reason)
    .bind(envelope.occurred_at)
    .execute(&mut *db)
    .await?;
    let as_of: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT as_of FROM boards WHERE event_id = $1 AND bank_id = $2")
            .bind(retraction.board_event_id)
            .bind(bank)
            .fetch_optional(&mut *db)
            .await?;
    let Some(as_of) = as_of else {
        tracing::info!(board = %retraction.board_event_id, bank,
            "a retraction names no stored board of its bank; nothing to withdraw");
        return Ok(());
    };
    // Its currencies may lose or change their best rates; so may those of
    // the board in force again.
    let withdrawn: Vec<String> = sqlx::query_scalar(
        "WITH board AS (DELETE FROM boards WHERE bank_id = $1 AND as_of = $2 RETURNING currencies),
         gone AS (DELETE FROM rates WHERE bank_id = $1 AND as_of = $2
                  AND currency = ANY ((SELECT currencies FROM board)::char(3)[])
                  RETURNING currency)
         SELECT currency::text FROM gone",
    )
    .bind(bank)
    .bind(as_of)
    .fetch_all(&mut *db)
    .await?;
    // History changed behind the newest row (see migration 0003).
    sqlx::query("UPDATE banks SET history_rev = history_rev + 1 WHERE id = $1")
        .bind(bank)
        .execute(&mut *db)
        .await?;
    let now_latest = latest_currencies(db, bank).await?;
    touched.extend(
        withdrawn
            .iter()
            .chain(&now_latest)
            .filter_map(|c| CurrencyCode::parse(c.trim()).ok()),
    );
    Ok(())
}
