//! Identifiers that can only hold valid values.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidId {
    #[error("must be a positive integer")]
    BankId,
    #[error("must be a three-letter ISO 4217 currency code")]
    CurrencyFormat,
    #[error("is not a known ISO 4217 currency code")]
    CurrencyUnknown,
}

/// A bank's id: a positive integer allocated once at registration and carried
/// in every event of that bank, so a replay reproduces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "i64", into = "i64")]
pub struct BankId(i64);

impl BankId {
    /// Never a bank's: the subject under which reference boards travel,
    /// 2^53 − 1.
    pub const RESERVED_FOR_REFERENCE: BankId = BankId(9_007_199_254_740_991);

    pub fn new(id: i64) -> Result<Self, InvalidId> {
        if id > 0 {
            Ok(Self(id))
        } else {
            Err(InvalidId::BankId)
        }
    }

    pub fn get(self) -> i64 {
        self.0
    }
}

impl TryFrom<i64> for BankId {
    type Error = InvalidId;
    fn try_from(id: i64) -> Result<Self, Self::Error> {
        Self::new(id)
    }
}

impl From<BankId> for i64 {
    fn from(id: BankId) -> i64 {
        id.0
    }
}

impl FromStr for BankId {
    type Err = InvalidId;
    /// Strict decimal: no sign, no spaces, no leading `+`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(InvalidId::BankId);
        }
        s.parse::<i64>()
            .map_err(|_| InvalidId::BankId)
            .and_then(Self::new)
    }
}

impl fmt::Display for BankId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An ISO 4217 currency code, always upper case.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CurrencyCode([u8; 3]);

impl CurrencyCode {
    /// Accepts any case (`usd`, `Usd`) and rejects codes ISO 4217 does not know.
    pub fn parse(s: &str) -> Result<Self, InvalidId> {
        let bytes = s.as_bytes();
        if bytes.len() != 3 || !bytes.iter().all(u8::is_ascii_alphabetic) {
            return Err(InvalidId::CurrencyFormat);
        }
        let code = Self([
            bytes[0].to_ascii_uppercase(),
            bytes[1].to_ascii_uppercase(),
            bytes[2].to_ascii_uppercase(),
        ]);
        if iso_currency::Currency::from_code(code.as_str()).is_none() {
            return Err(InvalidId::CurrencyUnknown);
        }
        Ok(code)
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII letters are ever stored.
        std::str::from_utf8(&self.0).expect("currency codes are ASCII")
    }

    /// Every code this build knows, in alphabetical order (for documents
    /// that list them).
    pub fn all() -> Vec<CurrencyCode> {
        let letters = b'A'..=b'Z';
        letters
            .clone()
            .flat_map(|a| {
                letters.clone().flat_map(move |b| {
                    (b'A'..=b'Z').filter_map(move |c| {
                        let code = [a, b, c];
                        std::str::from_utf8(&code)
                            .ok()
                            .and_then(|s| CurrencyCode::parse(s).ok())
                    })
                })
            })
            .collect()
    }

    /// The currency's English name from ISO 4217 ("US Dollar").
    pub fn name(&self) -> String {
        iso_currency::Currency::from_code(self.as_str())
            .map(|c| c.name().to_owned())
            .unwrap_or_default()
    }
}

impl TryFrom<String> for CurrencyCode {
    type Error = InvalidId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<CurrencyCode> for String {
    fn from(c: CurrencyCode) -> String {
        c.as_str().to_owned()
    }
}

impl FromStr for CurrencyCode {
    type Err = InvalidId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for CurrencyCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for CurrencyCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CurrencyCode({})", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bank_id_must_be_positive() {
        assert!(BankId::new(1).is_ok());
        assert_eq!(BankId::new(0), Err(InvalidId::BankId));
        assert_eq!(BankId::new(-3), Err(InvalidId::BankId));
    }

    #[test]
    fn bank_id_parses_only_plain_decimal() {
        assert_eq!("17".parse::<BankId>().unwrap().get(), 17);
        for bad in [
            "",
            "+1",
            "-1",
            "0",
            " 1",
            "1.0",
            "abc",
            "99999999999999999999",
        ] {
            assert!(bad.parse::<BankId>().is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn currency_code_is_case_insensitive_and_upper_cased() {
        assert_eq!(CurrencyCode::parse("usd").unwrap().as_str(), "USD");
        assert_eq!(CurrencyCode::parse("EtB").unwrap().as_str(), "ETB");
    }

    #[test]
    fn currency_code_rejects_bad_format_and_unknown_codes() {
        assert_eq!(CurrencyCode::parse("US"), Err(InvalidId::CurrencyFormat));
        assert_eq!(CurrencyCode::parse("US1"), Err(InvalidId::CurrencyFormat));
        assert_eq!(CurrencyCode::parse("ÜSD"), Err(InvalidId::CurrencyFormat));
        assert_eq!(CurrencyCode::parse("QQQ"), Err(InvalidId::CurrencyUnknown));
    }

    #[test]
    fn every_known_code_is_listed_once_in_order() {
        let all = CurrencyCode::all();
        assert!(all.len() > 150, "{}", all.len());
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        assert!(all.iter().any(|c| c.as_str() == "ETB"));
    }

    #[test]
    fn currency_code_has_an_english_name() {
        assert!(!CurrencyCode::parse("USD").unwrap().name().is_empty());
    }

    #[test]
    fn ids_round_trip_through_json() {
        let id: BankId = serde_json::from_str("7").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "7");
        assert!(serde_json::from_str::<BankId>("0").is_err());
        let code: CurrencyCode = serde_json::from_str("\"eur\"").unwrap();
        assert_eq!(serde_json::to_string(&code).unwrap(), "\"EUR\"");
    }
}
