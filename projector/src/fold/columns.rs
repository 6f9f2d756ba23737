//! The model's rows as Postgres takes and gives sets of them: one array
//! per column. The loader reads these and the writer writes them, so a
//! row's columns are listed once.

use chrono::{DateTime, Utc};
use ratewire_proto::{BankId, CurrencyCode, Schedule, SocialLink};
use rust_decimal::Decimal;
use sqlx::types::Json;
use uuid::Uuid;

use super::model::{Bank, Quote, Retraction};

/// Banks' rows.
#[derive(Debug, Default, sqlx::FromRow)]
pub struct BankColumns {
    pub bank_ids: Vec<i64>,
    pub bank_codes: Vec<String>,
    pub bank_names: Vec<String>,
    pub bank_images: Vec<String>,
    pub bank_links: Vec<Json<Vec<SocialLink>>>,
    pub bank_active: Vec<bool>,
    pub bank_registered: Vec<DateTime<Utc>>,
    pub bank_updated: Vec<DateTime<Utc>>,
    pub bank_schedules: Vec<Option<Json<Schedule>>>,
}

impl BankColumns {
    pub fn push(&mut self, id: BankId, bank: &Bank) {
        self.bank_ids.push(id.get());
        self.bank_codes.push(bank.code.clone());
        self.bank_names.push(bank.name.clone());
        self.bank_images.push(bank.image_url.clone());
        self.bank_links.push(Json(bank.social_links.clone()));
        self.bank_active.push(bank.active);
        self.bank_registered.push(bank.registered_at);
        self.bank_updated.push(bank.updated_at);
        self.bank_schedules.push(bank.schedule.clone().map(Json));
    }

    pub fn rows(self) -> impl Iterator<Item = (BankId, Bank)> {
        let mut codes = self.bank_codes.into_iter();
        let mut names = self.bank_names.into_iter();
        let mut images = self.bank_images.into_iter();
        let mut links = self.bank_links.into_iter();
        let mut active = self.bank_active.into_iter();
        let mut registered = self.bank_registered.into_iter();
        let mut updated = self.bank_updated.into_iter();
        let mut schedules = self.bank_schedules.into_iter();
        self.bank_ids.into_iter().filter_map(move |id| {
            let bank = Bank {
                code: codes.next()?,
                name: names.next()?,
                image_url: images.next()?,
                social_links: links.next()?.0,
                active: active.next()?,
                registered_at: registered.next()?,
                updated_at: updated.next()?,
                schedule: schedules.next()?.map(|s| s.0),
            };
            Some((BankId::new(id).ok()?, bank))
        })
    }
}

/// Rates' rows: a board's quotes, by bank and as-of.
#[derive(Debug, Default, sqlx::FromRow)]
pub struct RateColumns {
    pub rate_banks: Vec<i64>,
    pub rate_times: Vec<DateTime<Utc>>,
    pub rate_currencies: Vec<String>,
    /// Whether each value is read from its board's base.
    pub rate_same: Vec<bool>,
    pub cash_buying: Vec<Decimal>,
    pub cash_selling: Vec<Decimal>,
    pub transactional_buying: Vec<Option<Decimal>>,
    pub transactional_selling: Vec<Option<Decimal>>,
}

impl RateColumns {
    /// Each row as (bank, as-of, quote, read from the base); a stored code
    /// this build no longer knows is left out (the rules read codes only to
    /// tell which views to refresh).
    pub fn rows(self) -> impl Iterator<Item = (i64, DateTime<Utc>, Quote, bool)> {
        let mut times = self.rate_times.into_iter();
        let mut currencies = self.rate_currencies.into_iter();
        let mut same = self.rate_same.into_iter();
        let mut cash_buying = self.cash_buying.into_iter();
        let mut cash_selling = self.cash_selling.into_iter();
        let mut transactional_buying = self.transactional_buying.into_iter();
        let mut transactional_selling = self.transactional_selling.into_iter();
        self.rate_banks.into_iter().filter_map(move |bank| {
            let as_of = times.next()?;
            let currency = currencies.next()?;
            let same = same.next()?;
            let quote = Quote {
                currency: CurrencyCode::parse(currency.trim()).ok()?,
                cash_buying: cash_buying.next()?,
                cash_selling: cash_selling.next()?,
                transactional_buying: transactional_buying.next()?,
                transactional_selling: transactional_selling.next()?,
            };
            Some((bank, as_of, quote, same))
        })
    }
}

/// Retractions' rows, by the retracted board's event id.
#[derive(Debug, Default, sqlx::FromRow)]
pub struct RetractionColumns {
    pub retracted_ids: Vec<Uuid>,
    pub retracted_banks: Vec<i64>,
    pub retracted_by: Vec<Uuid>,
    pub retracted_reasons: Vec<Option<String>>,
    pub retracted_at: Vec<DateTime<Utc>>,
}

impl RetractionColumns {
    pub fn push(&mut self, board: Uuid, retraction: &Retraction) {
        self.retracted_ids.push(board);
        self.retracted_banks.push(retraction.bank.get());
        self.retracted_by.push(retraction.by);
        self.retracted_reasons.push(retraction.reason.clone());
        self.retracted_at.push(retraction.at);
    }

    pub fn rows(self) -> impl Iterator<Item = (Uuid, Retraction)> {
        let mut banks = self.retracted_banks.into_iter();
        let mut by = self.retracted_by.into_iter();
        let mut reasons = self.retracted_reasons.into_iter();
        let mut at = self.retracted_at.into_iter();
        self.retracted_ids.into_iter().filter_map(move |id| {
            let retraction = Retraction {
                bank: BankId::new(banks.next()?).ok()?,
                by: by.next()?,
                reason: reasons.next()?,
                at: at.next()?,
            };
            Some((id, retraction))
        })
    }
}
