//! The building blocks of strict query parsing: the raw pairs
//! ([`Params`]), and the checks that note every problem under its
//! parameter's name ([`Checker`]).

pub use super::instants::{start_of_day, KnownAt, When};
use chrono::NaiveDate;
use ratewire_proto::{BankId, CurrencyCode};

use crate::error::{Error, FieldErrors};

/// The raw `name=value` pairs of a query string; the first occurrence of a
/// name wins.
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(raw: Option<&str>) -> Result<Self, FieldErrors> {
        let pairs = serde_urlencoded::from_str::<Vec<(String, String)>>(raw.unwrap_or_default())
            .map_err(|_| {
                FieldErrors::from([(
                    "query".to_owned(),
                    vec!["the query string is not valid URL encoding".to_owned()],
                )])
            })?;
        Ok(Self(pairs))
    }

    /// The first value of `name`.
    pub fn first(&self, name: &str) -> Option<&str> {
        self.get(name)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, repeated or comma-separated (`a=1&a=2,3`).
    fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect()
    }
}

/// Collects problems across parameters so one 400 names them all.
pub struct Checker<'a> {
    params: &'a Params,
    errors: FieldErrors,
}

impl<'a> Checker<'a> {
    pub fn new(params: &'a Params) -> Self {
        Self {
            params,
            errors: FieldErrors::new(),
        }
    }

    fn fail(&mut self, name: &str, message: String) {
        self.errors
            .entry(name.to_owned())
            .or_default()
            .push(message);
    }

    /// Notes that parameter `name` breaks a rule between parameters (see
    /// `query!`'s `rules`).
    pub fn refuse(&mut self, name: &str, message: impl Into<String>) {
        self.fail(name, message.into());
    }

    /// `true`/`false`/`1`/`0`; absent is `false`.
    pub fn flag(&mut self, name: &str) -> bool {
        match self.params.get(name) {
            None => false,
            Some("true" | "1") => true,
            Some("false" | "0") => false,
            Some(_) => {
                self.fail(name, format!("{name} must be true, false, 1 or 0"));
                false
            }
        }
    }

    pub fn bank_id(&mut self, name: &str, required: bool) -> Option<BankId> {
        match self.params.get(name) {
            None if required => {
                self.fail(name, format!("{name} is required"));
                None
            }
            None => None,
            Some(value) => match value.parse() {
                Ok(id) => Some(id),
                Err(_) => {
                    self.fail(name, format!("{name} must be a positive integer"));
                    None
                }
            },
        }
    }

    /// A currency code parameter: three ASCII letters, any case. A
    /// well-formed code that ISO 4217 does not know is `Unknown` (a 404 for
    /// the caller, not a 400).
    pub fn currency(&mut self, name: &str, default: Option<&str>) -> Option<CurrencyArg> {
        let Some(value) = self.params.get(name).or(default) else {
            self.fail(name, format!("{name} is required"));
            return None;
        };
        if value.len() != 3 || !value.bytes().all(|b| b.is_ascii_alphabetic()) {
            self.fail(name, format!("{name} must be a three-letter currency code"));
            return None;
        }
        Some(CurrencyCode::parse(value).map_or(CurrencyArg::Unknown, CurrencyArg::Known))
    }

    /// A required calendar date written YYYY-MM-DD.
    pub fn date(&mut self, name: &str) -> Option<NaiveDate> {
        if self.params.get(name).is_none() {
            self.fail(name, format!("{name} is required"));
            return None;
        }
        self.optional_date(name)
    }

    /// A calendar date written YYYY-MM-DD, if given.
    pub fn optional_date(&mut self, name: &str) -> Option<NaiveDate> {
        let value = self.params.get(name)?;
        let shaped = value.len() == 10
            && value.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        match NaiveDate::parse_from_str(value, "%Y-%m-%d")
            .ok()
            .filter(|_| shaped)
        {
            Some(date) => Some(date),
            None => {
                self.fail(
                    name,
                    format!("{name} must be a real date in YYYY-MM-DD format"),
                );
                None
            }
        }
    }

    /// Every bank id of `name` (repeated or comma-separated).
    pub fn bank_ids(&mut self, name: &str) -> Vec<BankId> {
        let mut ids = Vec::new();
        for value in self.params.all(name) {
            match value.parse() {
                Ok(id) => ids.push(id),
                Err(_) => {
                    self.fail(name, format!("{name} must be positive integers"));
                    return Vec::new();
                }
            }
        }
        ids
    }

    /// Every currency code of `name` (repeated or comma-separated), each a
    /// code ISO 4217 knows.
    pub fn currencies(&mut self, name: &str) -> Vec<CurrencyCode> {
        let mut codes = Vec::new();
        for value in self.params.all(name) {
            match CurrencyCode::parse(value) {
                Ok(code) => codes.push(code),
                Err(_) => {
                    self.fail(
                        name,
                        format!("{name} must be ISO 4217 currency codes ({value:?} is not one)"),
                    );
                    return Vec::new();
                }
            }
        }
        codes
    }

    /// A required currency code that ISO 4217 knows (an unknown one is a
    /// bad parameter here, not a 404).
    pub fn known_currency(&mut self, name: &str) -> Option<CurrencyCode> {
        match self.currency(name, None)? {
            CurrencyArg::Known(code) => Some(code),
            CurrencyArg::Unknown => {
                self.fail(name, format!("{name} is not an ISO 4217 currency code"));
                None
            }
        }
    }

    /// One of `choices`, by its name (`name_of`, exactly as written).
    pub fn one_of<T: Copy>(
        &mut self,
        name: &str,
        choices: &[T],
        name_of: fn(T) -> &'static str,
    ) -> Option<T> {
        let Some(value) = self.params.get(name) else {
            return self.require(name);
        };
        let found = choices.iter().copied().find(|c| name_of(*c) == value);
        if found.is_none() {
            let names: Vec<&str> = choices.iter().map(|c| name_of(*c)).collect();
            self.fail(name, format!("{name} must be one of {}", names.join(", ")));
        }
        found
    }

    /// A comma-separated list of some of `names` (each once, any order), or
    /// `default` when absent.
    pub fn subset(
        &mut self,
        name: &str,
        names: &[&'static str],
        default: &[&'static str],
    ) -> Vec<&'static str> {
        let Some(value) = self.params.get(name) else {
            return default.to_vec();
        };
        let mut chosen = Vec::new();
        for part in value.split(',') {
            match names.iter().find(|n| **n == part) {
                Some(n) if !chosen.contains(n) => chosen.push(*n),
                _ => {
                    self.fail(
                        name,
                        format!(
                            "{name} must be one or more of {}, comma-separated",
                            names.join(", ")
                        ),
                    );
                    return Vec::new();
                }
            }
        }
        chosen
    }

    /// Notes that `name` is required (and missing): `None`.
    pub fn require<T>(&mut self, name: &str) -> Option<T> {
        self.fail(name, format!("{name} is required"));
        None
    }

    /// The text of `name`, as given.
    pub fn text(&self, name: &str) -> Option<&'a str> {
        self.params.get(name)
    }

    /// Whether `name` was given at all.
    pub fn given(&self, name: &str) -> bool {
        self.params.get(name).is_some()
    }

    /// An instant or a day: an RFC 3339 time, or a calendar date
    /// YYYY-MM-DD (see [`When`]).
    pub fn when(&mut self, name: &str) -> Option<When> {
        let value = self.params.get(name)?;
        if let Ok(at) = chrono::DateTime::parse_from_rfc3339(value) {
            return Some(When::At(at.with_timezone(&chrono::Utc)));
        }
        match NaiveDate::parse_from_str(value, "%Y-%m-%d")
            .ok()
            .filter(|_| value.len() == 10)
        {
            Some(date) => Some(When::Day(date)),
            None => {
                self.fail(
                    name,
                    format!("{name} must be a date (YYYY-MM-DD) or an RFC 3339 time"),
                );
                None
            }
        }
    }

    /// An instant to read the model as known at (see [`KnownAt`]), if
    /// given: RFC 3339, not after `now`.
    pub fn known_at(&mut self, name: &str, now: chrono::DateTime<chrono::Utc>) -> Option<KnownAt> {
        let value = self.params.get(name)?;
        let Ok(at) = chrono::DateTime::parse_from_rfc3339(value) else {
            self.fail(
                name,
                format!("{name} must be an RFC 3339 time, such as 2026-11-23T08:00:00.000Z"),
            );
            return None;
        };
        let at = KnownAt::truncated(at.with_timezone(&chrono::Utc));
        if at.instant() > now {
            self.fail(name, format!("{name} must not be in the future"));
            return None;
        }
        Some(at)
    }

    /// A positive decimal amount (at most 28 significant digits, at most
    /// `max`).
    pub fn amount(
        &mut self,
        name: &str,
        max: rust_decimal::Decimal,
    ) -> Option<rust_decimal::Decimal> {
        let Some(value) = self.params.get(name) else {
            self.fail(name, format!("{name} is required"));
            return None;
        };
        match rust_decimal::Decimal::from_str_exact(value) {
            Ok(amount) if amount > rust_decimal::Decimal::ZERO && amount <= max => Some(amount),
            Ok(_) => {
                self.fail(
                    name,
                    format!("{name} must be greater than zero and at most {max}"),
                );
                None
            }
            Err(_) => {
                self.fail(
                    name,
                    format!("{name} must be a decimal number such as 100 or 12.50"),
                );
                None
            }
        }
    }

    /// Every problem noted, as a 400 naming each parameter.
    pub fn finish(self) -> Result<(), Error> {
        self.problems().map_err(Error::Validation)
    }

    /// Every problem noted, by parameter.
    pub fn problems(self) -> Result<(), FieldErrors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(self.errors)
        }
    }
}

/// A day that has not come yet in `tz` at `now` has no record: a 400
/// naming `name` (a record would otherwise be labelled with a day it is
/// not of).
pub fn day_has_come(
    name: &str,
    date: NaiveDate,
    tz: chrono_tz::Tz,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    let today = now.with_timezone(&tz).date_naive();
    if date > today {
        return Err(Error::validation(
            name,
            format!("{name} must not be after today ({today} in {tz})"),
        ));
    }
    Ok(())
}

/// A range of days, both included, runs forward: a 400 naming `from`
/// otherwise.
pub fn days_in_order(from: NaiveDate, to: NaiveDate) -> Result<(), Error> {
    if from > to {
        return Err(Error::validation(
            "from",
            format!("from must not be after to ({to})"),
        ));
    }
    Ok(())
}

/// A syntactically valid currency parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurrencyArg {
    Known(CurrencyCode),
    /// Three letters, but not an ISO 4217 code: names nothing.
    Unknown,
}

impl CurrencyArg {
    /// `given`, or USD when none was (the default where one currency is
    /// asked for and none is required).
    pub fn or_usd(given: Option<CurrencyArg>) -> CurrencyArg {
        given.unwrap_or_else(|| {
            CurrencyArg::Known(CurrencyCode::parse("USD").expect("USD is ISO 4217"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &str) -> (Option<BankId>, bool, Result<(), Error>) {
        let params = Params::parse(Some(raw)).unwrap();
        let mut c = Checker::new(&params);
        let id = c.bank_id("bankId", false);
        let flag = c.flag("transactional");
        (id, flag, c.finish())
    }

    #[test]
    fn good_parameters_parse() {
        let (id, flag, result) = check("bankId=7&transactional=1&unknown=x");
        assert_eq!(id.map(BankId::get), Some(7));
        assert!(flag);
        assert!(result.is_ok());
    }

    #[test]
    fn every_bad_parameter_is_named() {
        let (_, _, result) = check("bankId=abc&transactional=yes");
        let Err(Error::Validation(errors)) = result else {
            panic!("expected a validation error")
        };
        assert_eq!(errors["bankId"], vec!["bankId must be a positive integer"]);
        assert_eq!(
            errors["transactional"],
            vec!["transactional must be true, false, 1 or 0"]
        );
    }

    #[test]
    fn dates_must_be_real_and_zero_padded() {
        for (raw, ok) in [
            ("date=2026-11-20", true),
            ("date=2026-02-30", false),
            ("date=2026-1-05", false),
            ("date=20261120", false),
            ("date=", false),
        ] {
            let params = Params::parse(Some(raw)).unwrap();
            let mut c = Checker::new(&params);
            assert_eq!(c.date("date").is_some(), ok, "{raw}");
        }
    }

    #[test]
    fn currency_codes_are_letters_and_unknown_codes_are_not_errors() {
        let params = Params::parse(Some("a=usd&b=QQQ&c=US1")).unwrap();
        let mut c = Checker::new(&params);
        assert_eq!(
            c.currency("a", None),
            Some(CurrencyArg::Known(CurrencyCode::parse("USD").unwrap()))
        );
        assert_eq!(c.currency("b", None), Some(CurrencyArg::Unknown));
        assert_eq!(c.currency("c", None), None);
        assert_eq!(
            c.currency("d", Some("USD")),
            Some(CurrencyArg::Known(CurrencyCode::parse("USD").unwrap()))
        );
        let Err(Error::Validation(errors)) = c.finish() else {
            panic!("c is malformed")
        };
        assert_eq!(errors.keys().collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn a_day_to_come_in_the_service_zone_is_refused() {
        let now: chrono::DateTime<chrono::Utc> = "2026-11-23T22:00:00Z".parse().unwrap();
        let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        // 22:00 UTC is already the 24th in Addis Ababa.
        let addis = chrono_tz::Africa::Addis_Ababa;
        assert!(day_has_come("date", day("2026-11-24"), addis, now).is_ok());
        assert!(day_has_come("date", day("2026-11-24"), chrono_tz::UTC, now).is_err());
        let Err(Error::Validation(errors)) =
            day_has_come("date", day("2030-01-01"), chrono_tz::UTC, now)
        else {
            panic!("a day to come")
        };
        assert_eq!(
            errors["date"],
            ["date must not be after today (2026-11-23 in UTC)"]
        );
        assert!(days_in_order(day("2026-11-23"), day("2026-11-23")).is_ok());
        assert!(days_in_order(day("2026-11-24"), day("2026-11-23")).is_err());
    }

    fn known_at(raw: &str) -> Result<Option<KnownAt>, Error> {
        let params = Params::parse(Some(raw)).unwrap();
        let mut c = Checker::new(&params);
        let now = "2026-11-23T10:00:00Z".parse().unwrap();
        let at = c.known_at("asKnownAt", now);
        c.finish().map(|()| at)
    }

    #[test]
    fn as_known_at_is_rfc_3339_to_the_millisecond_and_not_in_the_future() {
        let shown = |raw: &str| known_at(raw).unwrap().map(|at| at.to_string());
        assert_eq!(shown(""), None, "absent");
        assert_eq!(
            shown("asKnownAt=2026-11-23T08:00:00.123456Z").as_deref(),
            Some("2026-11-23T08:00:00.123Z"),
            "truncated, not rounded"
        );
        assert_eq!(
            shown("asKnownAt=2026-11-23T11:00:00.999%2B03:00").as_deref(),
            Some("2026-11-23T08:00:00.999Z"),
            "in UTC"
        );
        assert_eq!(
            shown("asKnownAt=2026-11-23T10:00:00.0009Z").as_deref(),
            Some("2026-11-23T10:00:00.000Z"),
            "now itself, once truncated"
        );
        for bad in [
            "asKnownAt=",
            "asKnownAt=2026-11-23",
            "asKnownAt=2026-11-23T08:00:00",
            "asKnownAt=1700000000",
            "asKnownAt=2026-11-23T08:00:00+03:00",
            "asKnownAt=yesterday",
        ] {
            let Err(Error::Validation(errors)) = known_at(bad) else {
                panic!("{bad} is refused")
            };
            assert!(
                errors["asKnownAt"][0].contains("RFC 3339"),
                "{bad}: {errors:?}"
            );
        }
        let Err(Error::Validation(errors)) = known_at("asKnownAt=2026-11-23T10:00:00.001Z") else {
            panic!("a millisecond after now is refused")
        };
        assert_eq!(errors["asKnownAt"], ["asKnownAt must not be in the future"]);
    }

    #[test]
    fn zero_and_negative_bank_ids_are_invalid() {
        for raw in ["bankId=0", "bankId=-1", "bankId=", "bankId=1.5"] {
            assert!(check(raw).2.is_err(), "{raw}");
        }
    }
}
