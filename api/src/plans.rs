//! Plans: how many requests a caller may make per minute and per month.
//!
//! Configured with `RATEWIRE_PLANS` as `name=perMinute/perMonth` pairs,
//! comma separated; the defaults are decisions.md's. `anonymous` is the
//! plan of callers without a (valid) key and must always exist.

use std::collections::BTreeMap;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub per_minute: u64,
    pub per_month: u64,
}

/// The plan given to callers counted by IP.
pub const ANONYMOUS: &str = "anonymous";
pub const DEFAULT_PLANS: &str =
    "free=60/10000,pro=1000/1000000,enterprise=100000/1000000000,anonymous=10/1000";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plans(BTreeMap<String, Limits>);

impl Plans {
    pub fn get(&self, name: &str) -> Option<Limits> {
        self.0.get(name).copied()
    }

    pub fn anonymous(&self) -> Limits {
        self.0[ANONYMOUS]
    }

    /// Plans a key may be created on (all but `anonymous`).
    pub fn assignable(&self) -> impl Iterator<Item = &str> {
        self.0
            .keys()
            .map(String::as_str)
            .filter(|name| *name != ANONYMOUS)
    }
}

impl FromStr for Plans {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut plans = BTreeMap::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let parsed = entry.split_once('=').and_then(|(name, limits)| {
                let (minute, month) = limits.split_once('/')?;
                let name = name.trim();
                let valid_name = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                let limits = Limits {
                    per_minute: minute.trim().parse().ok()?,
                    per_month: month.trim().parse().ok()?,
                };
                (valid_name && limits.per_minute > 0 && limits.per_month > 0)
                    .then(|| (name.to_owned(), limits))
            });
            let (name, limits) = parsed.ok_or_else(|| {
                format!("{entry:?} is not name=perMinute/perMonth with positive numbers")
            })?;
            plans.insert(name, limits);
        }
        if !plans.contains_key(ANONYMOUS) {
            return Err(format!("the `{ANONYMOUS}` plan is required"));
        }
        Ok(Plans(plans))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_decided_plans() {
        let plans: Plans = DEFAULT_PLANS.parse().unwrap();
        assert_eq!(
            plans.get("free"),
            Some(Limits {
                per_minute: 60,
                per_month: 10_000
            })
        );
        assert_eq!(
            plans.get("pro"),
            Some(Limits {
                per_minute: 1_000,
                per_month: 1_000_000
            })
        );
        assert_eq!(
            plans.get("enterprise"),
            Some(Limits {
                per_minute: 100_000,
                per_month: 1_000_000_000
            })
        );
        assert_eq!(
            plans.anonymous(),
            Limits {
                per_minute: 10,
                per_month: 1_000
            }
        );
        assert_eq!(
            plans.assignable().collect::<Vec<_>>(),
            ["enterprise", "free", "pro"]
        );
    }

    #[test]
    fn bad_plan_settings_are_refused_with_the_reason() {
        assert!("free=60/10000"
            .parse::<Plans>()
            .unwrap_err()
            .contains("anonymous"));
        assert!("anonymous=0/10".parse::<Plans>().is_err());
        assert!("anonymous=10".parse::<Plans>().is_err());
        assert!("anonymous=ten/1000".parse::<Plans>().is_err());
        assert!("a b=1/1,anonymous=1/1".parse::<Plans>().is_err());
    }
}
