//! `GET /api/v1/rates/spreads`: each active bank's spread on one currency,
//! and its premium over the National Bank's reference rate in force on the
//! day of the bank's board, narrowest spread first.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, NaiveDate, Utc};
use ratewire_proto::reference::reference_day;
use ratewire_proto::{CurrencyCode, NATIONAL_BANK};
use ratewire_readmodel::store::{self, in_force, ReferenceRow};
use ratewire_readmodel::views::{
    timestamp, BankRef, BankView, CurrencyJson, Envelope, Num, ReferencePoint,
};
use rust_decimal::Decimal;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::{query, CurrencyArg, KnownAt};
use crate::spreads::{over_cap, premium_percent, spread, spread_percent, Age};
use crate::state::AppState;
use crate::views::answer::aged_text;
use crate::views::boards::boards;
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};
use crate::views::reference::{self, Reader};
use crate::views::{requests, ViewRead};

/// One pair's figures: exact values and spread, rounded percents, and
/// premiums when a reference is in force.
struct PairFigures {
    buying: Decimal,
    selling: Decimal,
    weighted_average: Option<Decimal>,
}

impl PairFigures {
    fn write<M: SerializeMap>(&self, map: &mut M, kind: &str) -> Result<(), M::Error> {
        let premium = |side| {
            self.weighted_average
                .and_then(|wa| premium_percent(side, wa))
        };
        map.serialize_entry(&format!("{kind}Buying"), &Num(self.buying))?;
        map.serialize_entry(&format!("{kind}Selling"), &Num(self.selling))?;
        map.serialize_entry(
            &format!("{kind}Spread"),
            &Num(spread(self.buying, self.selling)),
        )?;
        map.serialize_entry(
            &format!("{kind}SpreadPercent"),
            &spread_percent(self.buying, self.selling).map(Num),
        )?;
        map.serialize_entry(
            &format!("{kind}BuyingPremiumPercent"),
            &premium(self.buying).map(Num),
        )?;
        map.serialize_entry(
            &format!("{kind}SellingPremiumPercent"),
            &premium(self.selling).map(Num),
        )
    }

    /// Every field of the pair as null (a bank quoting no transactional rates).
    fn write_none<M: SerializeMap>(map: &mut M, kind: &str) -> Result<(), M::Error> {
        for field in [
            "Buying",
            "Selling",
            "Spread",
            "SpreadPercent",
            "BuyingPremiumPercent",
            "SellingPremiumPercent",
        ] {
            map.serialize_entry(&format!("{kind}{field}"), &None::<Num>)?;
        }
        Ok(())
    }
}

struct Row<'a> {
    bank: &'a ratewire_readmodel::views::BankInfo,
    updated_at: DateTime<Utc>,
    cash: PairFigures,
    /// `None`: not asked for; `Some(None)`: asked, not quoted.
    transactional: Option<Option<PairFigures>>,
    reference_date: Option<NaiveDate>,
    age: Age,
    /// Leave `ageSeconds` out (the body the `ETag` is made from).
    ageless: bool,
    cash_spread_percent: Option<Decimal>,
    /// Whether each pair's `spreadPercent` is over the cap (`None`: the
    /// pair is not quoted).
    cash_over_cap: Option<bool>,
    transactional_over_cap: Option<bool>,
}

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("bank", &BankRef(self.bank))?;
        map.serialize_entry("updatedAt", &timestamp(self.updated_at))?;
        self.cash.write(&mut map, "cash")?;
        match &self.transactional {
            None => {}
            Some(Some(pair)) => pair.write(&mut map, "transactional")?,
            Some(None) => PairFigures::write_none(&mut map, "transactional")?,
        }
        map.serialize_entry("cashOverSpreadCap", &self.cash_over_cap)?;
        map.serialize_entry("transactionalOverSpreadCap", &self.transactional_over_cap)?;
        map.serialize_entry("referenceDate", &self.reference_date)?;
        if !self.ageless {
            map.serialize_entry("ageSeconds", &self.age.seconds)?;
        }
        map.serialize_entry("stale", &self.age.stale)?;
        map.end()
    }
}

/// The National Bank's rate of `code` on each day asked for, read once
/// per day.
struct ReferenceDays<'a> {
    days: Reader<'a>,
    dates: Vec<NaiveDate>,
    code: CurrencyCode,
    read: BTreeMap<NaiveDate, Option<ReferenceRow>>,
}

impl ReferenceDays<'_> {
    /// The day in force on `day` and its rate of the currency, if any.
    async fn on(&mut self, day: NaiveDate) -> Result<Option<(NaiveDate, ReferenceRow)>> {
        let Some(date) = in_force(&self.dates, day) else {
            return Ok(None);
        };
        if !self.read.contains_key(&date) {
            let stored = self.days.day(NATIONAL_BANK, date).await?;
            let read = reference::read_day(&stored)?;
            self.read.insert(date, read.day.rate(self.code).cloned());
        }
        Ok(self.read[&date].clone().map(|row| (date, row)))
    }
}

query! {
    /// `GET /api/v1/rates/spreads`: the banks' spreads on one currency.
    #[derive(Debug, Clone, Copy)]
    pub struct SpreadsQuery {
        /// ISO 4217 code, three letters in any case (one neither a bank nor
        /// the reference quotes: 404)
        pub currency as "currencyCode": CurrencyArg,
        /// Add the transactional pair's figures: true, false, 1 or 0
        pub transactional as "transactional": bool,
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
}

/// Each active bank's spread on one currency and its premium over the
/// National Bank's reference rate, narrowest cash spread first (ties by
/// bank id).
#[utoipa::path(get, path = requests::SPREADS, tag = "reference rates",
    params(SpreadsQuery),
    responses(
        (status = 200, description = "success", body = crate::openapi::SpreadsResponse),
        (status = 404, description = "Currency not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn spreads(
    _: Authorized,
    State(state): State<AppState>,
    ViewRead { query, named }: ViewRead<SpreadsQuery>,
    known: KnownAtRequest,
) -> Result<Response> {
    let CurrencyArg::Known(code) = query.currency else {
        return Err(Error::NotFound("Currency not found"));
    };
    let transactional = query.transactional;
    if let Some(at) = query.as_known_at {
        let (model, pool) = (&named.read, &named.read.pool);
        let mut read = match state.views.known_at(model, pool, known, "", at).await? {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let now = read.now();
        let boards = store::active_bank_views_in(read.db()).await?;
        let days = Reader::KnownAt(read.db(), &state.views.style);
        let (body, _) = answer(&state, &boards, days, code, transactional, now).await?;
        return read.answer(Rendered::Json(body), None).await;
    }
    let boards = boards(&state.views, named).await?;
    let days = Reader::Live(&state.views);
    let (body, ageless) = answer(&state, &boards, days, code, transactional, Utc::now()).await?;
    Ok(aged_text(body, &ageless))
}

/// The answer at `boards` and the reference `days` hold, as of `now`, and
/// the same without its ages (what its `ETag` is made of).
async fn answer(
    state: &AppState,
    boards: &[BankView],
    days: Reader<'_>,
    code: CurrencyCode,
    transactional: bool,
    now: DateTime<Utc>,
) -> Result<(String, String)> {
    let mut reference = ReferenceDays {
        dates: Vec::new(),
        days,
        code,
        read: BTreeMap::new(),
    };
    reference.dates = reference.days.dates(NATIONAL_BANK).await?;
    let today = reference.on(reference_day(now)).await?;
    let mut rows = Vec::new();
    for board in boards.iter() {
        let Some(rate) = board.rates.iter().find(|r| r.currency == code) else {
            continue;
        };
        let in_force = reference.on(reference_day(rate.updated_at)).await?;
        let weighted_average = in_force.as_ref().map(|(_, row)| row.weighted_average);
        let cash_spread_percent = spread_percent(rate.cash_buying, rate.cash_selling);
        let transactional_spread_percent = rate
            .transactional_buying
            .zip(rate.transactional_selling)
            .and_then(|(buying, selling)| spread_percent(buying, selling));
        let cap = state.spread_cap_percent;
        rows.push(Row {
            bank: &board.bank,
            updated_at: rate.updated_at,
            cash: PairFigures {
                buying: rate.cash_buying,
                selling: rate.cash_selling,
                weighted_average,
            },
            transactional: transactional.then(|| {
                Some(PairFigures {
                    buying: rate.transactional_buying?,
                    selling: rate.transactional_selling?,
                    weighted_average,
                })
            }),
            reference_date: in_force.map(|(date, _)| date),
            age: Age::of(rate.updated_at, now, state.stale_after),
            ageless: false,
            cash_spread_percent,
            cash_over_cap: over_cap(cash_spread_percent, cap),
            transactional_over_cap: over_cap(transactional_spread_percent, cap),
        });
    }
    if rows.is_empty() && today.is_none() {
        return Err(Error::NotFound("Currency not found"));
    }
    rows.sort_by(|a, b| {
        a.cash_spread_percent
            .cmp(&b.cash_spread_percent)
            .then(a.bank.id.cmp(&b.bank.id))
    });
    let mut body = Envelope {
        message: "success",
        status: 200,
        data: Data {
            currency: CurrencyJson {
                code,
                style: &state.views.style,
            },
            reference: today
                .as_ref()
                .map(|(date, row)| ReferencePoint { date: *date, row }),
            spread_cap_percent: Num(state.spread_cap_percent),
            banks: rows,
        },
    };
    let text = serde_json::to_string(&body).expect("the answer serializes");
    for row in &mut body.data.banks {
        row.ageless = true;
    }
    let ageless = serde_json::to_string(&body).expect("the answer serializes");
    Ok((text, ageless))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Data<'a> {
    currency: CurrencyJson<'a>,
    reference: Option<ReferencePoint<'a>>,
    spread_cap_percent: Num,
    banks: Vec<Row<'a>>,
}
