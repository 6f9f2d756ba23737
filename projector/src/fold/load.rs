//! The slice of the model a set of events needs, read from Postgres in one
//! statement: for each bank they name, the bank and its latest boards (one
//! more than the events may withdraw, so the board in force after every
//! retraction is known), the boards they replace or retract, and the ids,
//! retractions and currencies they name.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode, Envelope, Event};
use sqlx::PgConnection;
use uuid::Uuid;

use super::columns::{BankColumns, RateColumns, RetractionColumns};
use super::model::{Board, Model, Position, Quote, Stored};

/// What the events name, by kind.
#[derive(Default)]
struct Named {
    ids: Vec<Uuid>,
    banks: BTreeMap<i64, i32>,
    /// Board ids published or retracted (their retractions are read).
    boards: Vec<Uuid>,
    targets: Vec<Uuid>,
    keys: BTreeSet<(i64, DateTime<Utc>)>,
    currencies: BTreeSet<String>,
}

impl Named {
    fn of<'a>(events: impl IntoIterator<Item = &'a Envelope>) -> Self {
        let mut named = Named::default();
        for envelope in events {
            named.ids.push(envelope.event_id);
            let bank = envelope.bank_id.get();
            match &envelope.event {
                Event::ReferenceBoardPublished(_) => continue,
                Event::BoardPublished(board) => {
                    named.boards.push(envelope.event_id);
                    named.keys.insert((bank, board.as_of()));
                    named
                        .currencies
                        .extend(board.rates().iter().map(|r| r.currency().to_string()));
                }
                Event::BoardRetracted(retraction) => {
                    named.boards.push(retraction.board_event_id);
                    named.targets.push(retraction.board_event_id);
                    *named.banks.entry(bank).or_default() += 1;
                }
                _ => {}
            }
            *named.banks.entry(bank).or_default() += 0;
        }
        named
    }
}

/// The slice of the model `events` need.
pub async fn load<'a>(
    db: &mut PgConnection,
    events: impl IntoIterator<Item = &'a Envelope>,
) -> sqlx::Result<Model> {
    let named = Named::of(events);
    let (banks, tops): (Vec<i64>, Vec<i32>) = named
        .banks
        .iter()
        .map(|(bank, retractions)| (*bank, retractions + 1))
        .unzip();
    let (key_banks, key_times): (Vec<i64>, Vec<DateTime<Utc>>) = named.keys.iter().copied().unzip();
    let currencies: Vec<String> = named.currencies.into_iter().collect();
    let rows: Slice = sqlx::query_as(LOAD)
        .bind(&named.ids)
        .bind(&banks)
        .bind(&tops)
        .bind(&named.boards)
        .bind(&named.targets)
        .bind(&key_banks)
        .bind(&key_times)
        .bind(&currencies)
        .fetch_one(db)
        .await?;
    Ok(rows.into_model())
}

/// Every part is an index probe or a short range of one, by a lateral
/// probe per key (a join here became a scan of every board once Postgres
/// kept one plan for the prepared statement). The fold reads
/// the versions in force now (`known_to IS NULL`) from the tables: the
/// views' filter, as known at a settable instant, costs planning on every
/// batch and means the same thing here.
const LOAD: &str = r#"
    WITH latest AS MATERIALIZED (
        SELECT t.bank_id, l.as_of FROM UNNEST($2::bigint[], $3::int[]) AS t (bank_id, n)
        CROSS JOIN LATERAL (SELECT as_of FROM board_versions b
                            WHERE b.bank_id = t.bank_id AND b.known_to IS NULL
                            ORDER BY as_of DESC LIMIT t.n) l
    ), replaced AS (
        -- Only a board at or before its bank's newest can replace one: a
        -- live board, newer than anything stored, costs no probe.
        SELECT k.bank_id, k.as_of
        FROM UNNEST($6::bigint[], $7::timestamptz[]) AS k (bank_id, as_of)
        JOIN (SELECT bank_id, max(as_of) AS newest FROM latest GROUP BY bank_id) n
          ON n.bank_id = k.bank_id AND k.as_of <= n.newest
    ), picked AS MATERIALIZED (
        SELECT bank_id, as_of FROM latest
        UNION
        SELECT bank_id, as_of FROM board_versions WHERE event_id = ANY ($5) AND known_to IS NULL
        UNION
        SELECT b.bank_id, b.as_of FROM replaced k
        CROSS JOIN LATERAL (SELECT bank_id, as_of FROM board_versions b
                            WHERE b.bank_id = k.bank_id AND b.as_of = k.as_of
                              AND b.known_to IS NULL OFFSET 0) b
    ), board AS MATERIALIZED (
        SELECT b.*, s.currencies AS base_currencies, s.cash_buying AS base_cash_buying,
               s.cash_selling AS base_cash_selling,
               s.transactional_buying AS base_transactional_buying,
               s.transactional_selling AS base_transactional_selling
        FROM picked p
        CROSS JOIN LATERAL (SELECT bank_id, as_of, event_id, currencies, cash_buying,
                                   cash_selling, transactional_buying, transactional_selling,
                                   base_id AS base_event_id
                            FROM board_versions b
                            WHERE b.bank_id = p.bank_id AND b.as_of = p.as_of
                              AND b.known_to IS NULL OFFSET 0) b
        LEFT JOIN LATERAL (SELECT currencies, cash_buying, cash_selling, transactional_buying,
                                  transactional_selling
                           FROM board_bases s
                           WHERE s.event_id = b.base_event_id LIMIT 1) s ON true
    ), rate AS MATERIALIZED (
        -- A value read from the base is stored as NULL (a cash value is
        -- never absent otherwise); a full board looks nothing up.
        SELECT b.bank_id, b.as_of, q.currency, q.cash_buying IS NULL AS same,
               CASE WHEN q.cash_buying IS NULL
                    THEN b.base_cash_buying[array_position(b.base_currencies, q.currency)]
                    ELSE q.cash_buying END AS cash_buying,
               CASE WHEN q.cash_buying IS NULL
                    THEN b.base_cash_selling[array_position(b.base_currencies, q.currency)]
                    ELSE q.cash_selling END AS cash_selling,
               CASE WHEN q.cash_buying IS NULL
                    THEN b.base_transactional_buying[array_position(b.base_currencies,
                                                                    q.currency)]
                    ELSE q.transactional_buying END AS transactional_buying,
               CASE WHEN q.cash_buying IS NULL
                    THEN b.base_transactional_selling[array_position(b.base_currencies,
                                                                     q.currency)]
                    ELSE q.transactional_selling END AS transactional_selling
        FROM board b
        CROSS JOIN LATERAL unnest(b.currencies, b.cash_buying, b.cash_selling,
                                  b.transactional_buying, b.transactional_selling)
            AS q (currency, cash_buying, cash_selling, transactional_buying,
                  transactional_selling)
    ), applied AS MATERIALIZED (
        SELECT event_id, partition, "offset" FROM applied_events WHERE event_id = ANY ($1)
    ), bank AS MATERIALIZED (
        SELECT b.* FROM UNNEST($2::bigint[]) AS k (id)
        CROSS JOIN LATERAL (SELECT * FROM bank_versions b
                            WHERE b.id = k.id AND b.known_to IS NULL OFFSET 0) b
    ), retracted AS MATERIALIZED (
        SELECT * FROM retracted_boards WHERE event_id = ANY ($4)
    ), currency AS MATERIALIZED (
        SELECT code::text, first_quoted_at FROM currencies_known
        WHERE code = ANY ($8::text[]::char(3)[])
    )
    SELECT ARRAY(SELECT event_id FROM applied) AS applied_ids,
           ARRAY(SELECT partition FROM applied) AS applied_partitions,
           ARRAY(SELECT "offset" FROM applied) AS applied_offsets,
           ARRAY(SELECT id FROM bank) AS bank_ids,
           ARRAY(SELECT code FROM bank) AS bank_codes,
           ARRAY(SELECT name FROM bank) AS bank_names,
           ARRAY(SELECT image_url FROM bank) AS bank_images,
           ARRAY(SELECT social_links FROM bank) AS bank_links,
           ARRAY(SELECT active FROM bank) AS bank_active,
           ARRAY(SELECT registered_at FROM bank) AS bank_registered,
           ARRAY(SELECT updated_at FROM bank) AS bank_updated,
           ARRAY(SELECT schedule FROM bank) AS bank_schedules,
           ARRAY(SELECT bank_id FROM board) AS board_banks,
           ARRAY(SELECT as_of FROM board) AS board_times,
           ARRAY(SELECT event_id FROM board) AS board_ids,
           ARRAY(SELECT base_event_id FROM board) AS board_bases,
           ARRAY(SELECT bank_id FROM rate) AS rate_banks,
           ARRAY(SELECT as_of FROM rate) AS rate_times,
           ARRAY(SELECT currency::text FROM rate) AS rate_currencies,
           ARRAY(SELECT same FROM rate) AS rate_same,
           ARRAY(SELECT cash_buying FROM rate) AS cash_buying,
           ARRAY(SELECT cash_selling FROM rate) AS cash_selling,
           ARRAY(SELECT transactional_buying FROM rate) AS transactional_buying,
           ARRAY(SELECT transactional_selling FROM rate) AS transactional_selling,
           ARRAY(SELECT event_id FROM retracted) AS retracted_ids,
           ARRAY(SELECT bank_id FROM retracted) AS retracted_banks,
           ARRAY(SELECT retracted_by FROM retracted) AS retracted_by,
           ARRAY(SELECT reason FROM retracted) AS retracted_reasons,
           ARRAY(SELECT retracted_at FROM retracted) AS retracted_at,
           ARRAY(SELECT code FROM currency) AS currency_codes,
           ARRAY(SELECT first_quoted_at FROM currency) AS currency_firsts"#;

/// The statement's answer: each part's rows as columns.
#[derive(sqlx::FromRow)]
struct Slice {
    applied_ids: Vec<Uuid>,
    applied_partitions: Vec<i32>,
    applied_offsets: Vec<i64>,
    #[sqlx(flatten)]
    banks: BankColumns,
    board_banks: Vec<i64>,
    board_times: Vec<DateTime<Utc>>,
    board_ids: Vec<Uuid>,
    board_bases: Vec<Option<Uuid>>,
    #[sqlx(flatten)]
    rates: RateColumns,
    #[sqlx(flatten)]
    retracted: RetractionColumns,
    currency_codes: Vec<String>,
    currency_firsts: Vec<DateTime<Utc>>,
}

impl Slice {
    fn into_model(self) -> Model {
        let mut model = Model::default();
        for ((id, partition), offset) in self
            .applied_ids
            .into_iter()
            .zip(self.applied_partitions)
            .zip(self.applied_offsets)
        {
            model.applied.insert(id, Position { partition, offset });
        }
        model.banks.extend(self.banks.rows());
        let mut quotes: BTreeMap<(i64, DateTime<Utc>), Vec<Quote>> = BTreeMap::new();
        let mut repeated: BTreeMap<(i64, DateTime<Utc>), BTreeSet<CurrencyCode>> = BTreeMap::new();
        for (bank, as_of, quote, same) in self.rates.rows() {
            if same {
                repeated
                    .entry((bank, as_of))
                    .or_default()
                    .insert(quote.currency);
            }
            quotes.entry((bank, as_of)).or_default().push(quote);
        }
        for (((bank, as_of), event_id), base) in self
            .board_banks
            .into_iter()
            .zip(self.board_times)
            .zip(self.board_ids)
            .zip(self.board_bases)
        {
            let Ok(bank) = BankId::new(bank) else {
                continue;
            };
            let board = Board::new(
                event_id,
                quotes.remove(&(bank.get(), as_of)).unwrap_or_default(),
            );
            if let Some(base) = base {
                let same = repeated.remove(&(bank.get(), as_of)).unwrap_or_default();
                model
                    .stored
                    .insert(event_id, Stored::Against { base, same });
            }
            model.boards.insert((bank, as_of), board);
        }
        model.retracted.extend(self.retracted.rows());
        for (code, first) in self.currency_codes.iter().zip(self.currency_firsts) {
            // A code this build no longer knows is left out of the slice.
            if let Ok(code) = CurrencyCode::parse(code.trim()) {
                model.first_quoted.insert(code, first);
            }
        }
        model
    }
}
