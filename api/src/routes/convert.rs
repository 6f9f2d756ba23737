//! `GET /api/v1/convert`: an amount converted at each active bank's
//! current board, best first.
//!
//! The birr is the base: a customer selling a currency to a bank gets the
//! bank's buying rate; one buying a currency pays its selling rate; a cross
//! pair goes through the birr (sell the first at buying, buy the second at
//! selling). The boards come from the stored list of every active bank
//! (read once per change of it, by its fingerprint), or from Postgres.

use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::store;
use ratewire_readmodel::views::{timestamp, BankRef, BankView, Num};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;
use utoipa::openapi::schema::Schema;

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::params::string;
use crate::query::{query, Checker, KnownAt, QueryParam};
use crate::spreads::Age;
use crate::state::AppState;
use crate::views::answer::aged_answer;
use crate::views::boards::boards;
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};
use crate::views::requests;
use crate::views::ViewRead;

/// The largest amount converted.
pub const MOST: Decimal = Decimal::from_parts(3_567_587_328, 232, 0, false, 0);

/// An amount to convert: a positive decimal, at most [`MOST`].
#[derive(Debug, Clone, Copy)]
pub struct Amount(pub Decimal);

impl QueryParam for Amount {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        check.amount(name, MOST).map(Amount)
    }

    /// Up to 12 integer digits (or [`MOST`] itself) and 15 fraction digits,
    /// not zero.
    fn schema() -> Schema {
        string(Some(
            r"^(1000000000000(\.0{1,15})?|[1-9][0-9]{0,11}(\.[0-9]{1,15})?|0\.[0-9]{0,14}[1-9])$",
        ))
    }
}

query! {
    /// `GET /api/v1/convert`: an amount of one currency in another.
    #[derive(Debug, Clone, Copy)]
    pub struct ConvertQuery {
        /// The currency given, an ISO 4217 code (ETB: birr); one no bank (or not that bank) quotes: 404
        pub from as "from": CurrencyCode,
        /// The currency wanted; `from` itself gives every bank at rate 1 with no legs
        pub to as "to": CurrencyCode,
        /// A positive decimal, at most 1000000000000
        pub amount as "amount": Amount,
        /// Only this bank (one not active: 404)
        pub bank_id as "bankId": Option<BankId>,
        /// Use transactional rates: true, false, 1 or 0
        pub transactional as "transactional": bool,
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
}

/// Fraction digits of a converted amount.
const AMOUNT_DIGITS: u32 = 4;
/// Fraction digits of an effective rate through the birr.
const RATE_DIGITS: u32 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Side {
    /// The bank buys the currency from the customer.
    Buying,
    /// The bank sells the currency to the customer.
    Selling,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Leg {
    pub currency: CurrencyCode,
    pub side: Side,
    pub rate: Decimal,
    pub updated_at: DateTime<Utc>,
}

/// One bank's conversion.
#[derive(Debug, Clone)]
pub struct Converted<'a> {
    pub bank: &'a BankView,
    pub amount: Decimal,
    pub rate: Decimal,
    pub legs: Vec<Leg>,
}

impl Converted<'_> {
    /// The newest quote used; with none (a currency to itself), the bank's
    /// board.
    fn updated_at(&self) -> DateTime<Utc> {
        self.legs
            .iter()
            .map(|l| l.updated_at)
            .max()
            .or(self.bank.last_rates_updated_at)
            .unwrap_or(DateTime::UNIX_EPOCH)
    }
}

/// The birr: what every rate is quoted in.
fn birr() -> CurrencyCode {
    CurrencyCode::parse("ETB").expect("ETB is ISO 4217")
}

/// The leg of `bank` that turns `currency` into birr (`Buying`) or birr
/// into it (`Selling`), when the bank quotes it.
fn leg(bank: &BankView, currency: CurrencyCode, side: Side, transactional: bool) -> Option<Leg> {
    let rate = bank.rates.iter().find(|r| r.currency == currency)?;
    let value = match (side, transactional) {
        (Side::Buying, false) => Some(rate.cash_buying),
        (Side::Selling, false) => Some(rate.cash_selling),
        (Side::Buying, true) => rate.transactional_buying,
        (Side::Selling, true) => rate.transactional_selling,
    }?;
    Some(Leg {
        currency,
        side,
        rate: value,
        updated_at: rate.updated_at,
    })
}

/// `amount` of `from` in `to` at each bank of `banks` that quotes what it
/// takes, best first (most received; ties to the earlier quote, then the
/// lower bank id).
pub fn convert_at<'a>(
    banks: &'a [BankView],
    from: CurrencyCode,
    to: CurrencyCode,
    amount: Decimal,
    transactional: bool,
) -> Vec<Converted<'a>> {
    if from == to {
        // Nothing to exchange: the amount itself at every bank, at rate 1.
        return banks
            .iter()
            .map(|bank| Converted {
                bank,
                amount: amount
                    .round_dp_with_strategy(AMOUNT_DIGITS, RoundingStrategy::MidpointAwayFromZero),
                rate: Decimal::ONE,
                legs: Vec::new(),
            })
            .collect();
    }
    let mut results: Vec<Converted<'a>> = banks
        .iter()
        .filter_map(|bank| {
            let mut legs = Vec::new();
            let mut value = amount;
            if from != birr() {
                let sold = leg(bank, from, Side::Buying, transactional)?;
                value = value.checked_mul(sold.rate)?;
                legs.push(sold);
            }
            if to != birr() {
                let bought = leg(bank, to, Side::Selling, transactional)?;
                value = value.checked_div(bought.rate)?;
                legs.push(bought);
            }
            let rate = value
                .checked_div(amount)?
                .round_dp_with_strategy(RATE_DIGITS, RoundingStrategy::MidpointAwayFromZero)
                .normalize();
            Some(Converted {
                bank,
                amount: value
                    .round_dp_with_strategy(AMOUNT_DIGITS, RoundingStrategy::MidpointAwayFromZero),
                rate,
                legs,
            })
        })
        .collect();
    results.sort_by(|a, b| {
        b.amount
            .cmp(&a.amount)
            .then(a.updated_at().cmp(&b.updated_at()))
            .then(a.bank.bank.id.cmp(&b.bank.bank.id))
    });
    results
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LegJson {
    currency: CurrencyCode,
    side: Side,
    rate: Num,
    updated_at: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResultJson<'a> {
    bank: BankRef<'a>,
    amount: Num,
    rate: Num,
    legs: Vec<LegJson>,
    updated_at: String,
    /// `None` in the body the `ETag` is made from.
    #[serde(skip_serializing_if = "Option::is_none")]
    age_seconds: Option<i64>,
    stale: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Data<'a> {
    from: CurrencyCode,
    to: CurrencyCode,
    amount: Num,
    transactional: bool,
    results: Vec<ResultJson<'a>>,
}

#[derive(Serialize)]
struct Envelope<'a> {
    message: &'static str,
    status: u16,
    data: Data<'a>,
}

/// `amount` of `from` converted to `to` at each active bank (or one),
/// best first, with the rates and sides used.
#[utoipa::path(get, path = requests::CONVERT, tag = "rates",
    params(ConvertQuery),
    responses(
        (status = 200, description = "success", body = crate::openapi::ConvertResponse),
        (status = 404, description = "Bank not found (`bankId` is no active bank); `Currency not found: ...` (no bank, or not that one, quotes `from` or `to`); `No rates found: ...` (no single bank quotes both)", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn convert(
    _: Authorized,
    State(state): State<AppState>,
    ViewRead { query, named }: ViewRead<ConvertQuery>,
    known: KnownAtRequest,
) -> Result<Response> {
    if let Some(at) = query.as_known_at {
        let (model, pool) = (&named.read, &named.read.pool);
        let mut read = match state.views.known_at(model, pool, known, "", at).await? {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let boards = store::active_bank_views_in(read.db()).await?;
        let banks = asked_banks(&boards, query.bank_id)?;
        let body = conversion(&state, &banks, &query, read.now())?;
        let body = serde_json::to_string(&body).expect("the answer serializes");
        return read.answer(Rendered::Json(body), None).await;
    }
    let boards = boards(&state.views, named).await?;
    let banks = asked_banks(&boards, query.bank_id)?;
    let body = conversion(&state, &banks, &query, Utc::now())?;
    Ok(aged_answer(body, |body| {
        for result in &mut body.data.results {
            result.age_seconds = None;
        }
    }))
}

/// The boards of every active bank, or of the one asked for (404 when it
/// is not active).
fn asked_banks(boards: &[BankView], bank_id: Option<BankId>) -> Result<Vec<BankView>> {
    Ok(match bank_id {
        Some(id) => {
            let bank = boards.iter().find(|b| b.bank.id == id);
            vec![bank.ok_or(Error::NotFound("Bank not found"))?.clone()]
        }
        None => boards.to_vec(),
    })
}

/// The answer to `query` at `banks`' boards, ages as of `now`.
fn conversion<'a>(
    state: &AppState,
    banks: &'a [BankView],
    query: &ConvertQuery,
    now: DateTime<Utc>,
) -> Result<Envelope<'a>> {
    let ConvertQuery {
        from,
        to,
        amount: Amount(amount),
        bank_id,
        transactional,
        ..
    } = *query;
    let results = convert_at(banks, from, to, amount, transactional);
    let age = |c: &Converted| Age::of(c.updated_at(), now, state.stale_after);
    if results.is_empty() {
        return Err(unquoted(banks, from, to, transactional, bank_id));
    }
    Ok(Envelope {
        message: "success",
        status: 200,
        data: Data {
            from,
            to,
            amount: Num(amount),
            transactional,
            results: results
                .iter()
                .map(|c| {
                    let age = age(c);
                    ResultJson {
                        bank: BankRef(&c.bank.bank),
                        amount: Num(c.amount),
                        rate: Num(c.rate),
                        legs: c
                            .legs
                            .iter()
                            .map(|l| LegJson {
                                currency: l.currency,
                                side: l.side,
                                rate: Num(l.rate),
                                updated_at: timestamp(l.updated_at),
                            })
                            .collect(),
                        updated_at: timestamp(c.updated_at()),
                        age_seconds: Some(age.seconds),
                        stale: age.stale,
                    }
                })
                .collect(),
        },
    })
}

/// Why nothing could be converted, as a 404 of the spec's family: the
/// currency no bank (or not that bank) quotes, or the pair no one bank
/// quotes. The request was well formed; what it names is not there.
fn unquoted(
    banks: &[BankView],
    from: CurrencyCode,
    to: CurrencyCode,
    transactional: bool,
    bank_id: Option<BankId>,
) -> Error {
    let kind = if transactional { "transactional " } else { "" };
    let by = match bank_id {
        Some(id) => format!("bank {id}"),
        None => "any active bank".to_owned(),
    };
    let quoted = |code: CurrencyCode, side: Side| {
        code == birr()
            || banks
                .iter()
                .any(|b| leg(b, code, side, transactional).is_some())
    };
    // The first currency no bank quotes; else it is the pair.
    let code = if quoted(from, Side::Buying) { to } else { from };
    Error::NotFoundBecause(if quoted(from, Side::Buying) && quoted(to, Side::Selling) {
        format!("No rates found: no single bank quotes both {from} and {to} ({kind}rates)")
    } else {
        format!("Currency not found: {code} has no {kind}rates from {by}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewire_readmodel::views::{BankInfo, RateView};
    use std::str::FromStr;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn bank(id: i64, rates: &[(&str, &str, &str)]) -> BankView {
        BankView {
            bank: BankInfo {
                id: BankId::new(id).unwrap(),
                code: format!("B{id}"),
                name: format!("Bank {id}"),
                image_url: "https://i.test/b.png".into(),
                social_links: vec![],
                active: true,
            },
            last_rates_updated_at: None,
            rates: rates
                .iter()
                .map(|(code, buying, selling)| RateView {
                    currency: CurrencyCode::parse(code).unwrap(),
                    updated_at: "2026-11-23T08:00:00Z".parse().unwrap(),
                    cash_buying: dec(buying),
                    cash_selling: dec(selling),
                    transactional_buying: None,
                    transactional_selling: None,
                    previous: None,
                })
                .collect(),
        }
    }

    fn code(s: &str) -> CurrencyCode {
        CurrencyCode::parse(s).unwrap()
    }

    #[test]
    fn selling_a_currency_gets_the_buying_rate_best_bank_first() {
        let banks = [
            bank(1, &[("USD", "155.10", "158.20")]),
            bank(2, &[("USD", "156", "159")]),
        ];
        let results = convert_at(&banks, code("USD"), code("ETB"), dec("100"), false);
        assert_eq!(results[0].bank.bank.id.get(), 2);
        assert_eq!(results[0].amount, dec("15600"));
        assert_eq!(results[0].legs[0].side, Side::Buying);
        assert_eq!(results[1].amount.to_string(), "15510.00");
    }

    #[test]
    fn buying_a_currency_pays_the_selling_rate() {
        let banks = [bank(1, &[("USD", "155", "160")])];
        let results = convert_at(&banks, code("ETB"), code("USD"), dec("16000"), false);
        assert_eq!(results[0].amount, dec("100"));
        assert_eq!(results[0].legs[0].side, Side::Selling);
        assert_eq!(results[0].rate, dec("0.00625"));
    }

    #[test]
    fn a_cross_pair_goes_through_the_birr_at_one_bank() {
        let banks = [
            bank(1, &[("USD", "150", "160"), ("EUR", "170", "180")]),
            bank(2, &[("USD", "150", "160")]),
        ];
        let results = convert_at(&banks, code("USD"), code("EUR"), dec("180"), false);
        assert_eq!(results.len(), 1, "bank 2 quotes no EUR");
        assert_eq!(results[0].amount, dec("150"));
        let sides: Vec<Side> = results[0].legs.iter().map(|l| l.side).collect();
        assert_eq!(sides, [Side::Buying, Side::Selling]);
    }

    #[test]
    fn a_currency_to_itself_is_the_amount_at_rate_one_at_every_bank() {
        let banks = [bank(1, &[("USD", "150", "160")]), bank(2, &[])];
        let results = convert_at(&banks, code("AED"), code("AED"), dec("12.5"), false);
        assert_eq!(results.len(), 2, "no quote is needed");
        for converted in &results {
            assert_eq!(
                (converted.amount, converted.rate),
                (dec("12.5"), Decimal::ONE)
            );
            assert!(converted.legs.is_empty());
        }
    }
}
