//! Plans: how many requests a caller may make per minute and per month,
//! how many live streams it may hold at once, and how many rate alerts it
//! may keep.
//!
//! Configured with `RATEWIRE_PLANS` as
//! `name=perMinute/perMonth[/streams[/alerts]]` entries, comma separated;
//! the defaults are decisions.md's, with streams free 1, pro 10,
//! enterprise 1,000 and anonymous 1 (used only when anonymous access is
//! on: otherwise a keyless caller gets 401), and alerts free 5, pro 100,
//! enterprise 1,000 (anonymous callers have none: alerts belong to a key).
//! A plan without a stream count may hold 1, without an alert count 5.
//! `anonymous` is the plan of callers without a (valid) key and must
//! always exist.

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
pub const DEFAULT_PLANS: &str = "free=60/10000/1/5,pro=1000/1000000/10/100,enterprise=100000/1000000000/1000/1000,anonymous=10/1000/1/0";

/// Live streams a plan may hold at once when its entry names none.
const DEFAULT_STREAMS: u64 = 1;
/// Alerts a plan may keep when its entry names none.
const DEFAULT_ALERTS: u64 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    limits: Limits,
    streams: u64,
    alerts: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plans(BTreeMap<String, Plan>);

impl Plans {
    pub fn get(&self, name: &str) -> Option<Limits> {
        self.0.get(name).map(|plan| plan.limits)
    }

    pub fn anonymous(&self) -> Limits {
        self.0[ANONYMOUS].limits
    }

    /// How many live streams a caller on `name` may hold at once (an
    /// unknown plan: the anonymous plan's).
    pub fn streams(&self, name: &str) -> u64 {
        self.plan(name).streams
    }

    /// How many rate alerts a key on `name` may keep (an unknown plan: the
    /// anonymous plan's).
    pub fn alerts(&self, name: &str) -> u64 {
        self.plan(name).alerts
    }

    fn plan(&self, name: &str) -> Plan {
        self.0.get(name).copied().unwrap_or(self.0[ANONYMOUS])
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
                let mut parts = limits.split('/');
                let (minute, month) = (parts.next()?, parts.next()?);
                let streams = match parts.next() {
                    Some(streams) => streams.trim().parse().ok()?,
                    None => DEFAULT_STREAMS,
                };
                let alerts = match parts.next() {
                    Some(alerts) => alerts.trim().parse().ok()?,
                    None => DEFAULT_ALERTS,
                };
                if parts.next().is_some() {
                    return None;
                }
                let name = name.trim();
                let valid_name = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                let limits = Limits {
                    per_minute: minute.trim().parse().ok()?,
                    per_month: month.trim().parse().ok()?,
                };
                (valid_name && limits.per_minute > 0 && limits.per_month > 0).then(|| {
                    let plan = Plan {
                        limits,
                        streams,
                        alerts,
                    };
                    (name.to_owned(), plan)
                })
            });
            let (name, plan) = parsed.ok_or_else(|| {
                format!("{entry:?} is not name=perMinute/perMonth[/streams[/alerts]] with positive numbers")
            })?;
            plans.insert(name, plan);
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
        let streams: Vec<u64> = ["free", "pro", "enterprise", "anonymous", "custom"]
            .iter()
            .map(|p| plans.streams(p))
            .collect();
        assert_eq!(streams, [1, 10, 1_000, 1, 1]);
        let custom: Plans = "anonymous=1/1/0,big=5/5".parse().unwrap();
        assert_eq!((custom.streams("anonymous"), custom.streams("big")), (0, 1));
        let alerts: Vec<u64> = ["free", "pro", "enterprise", "anonymous", "custom"]
            .iter()
            .map(|p| plans.alerts(p))
            .collect();
        assert_eq!(alerts, [5, 100, 1_000, 0, 0]);
        let custom: Plans = "anonymous=1/1,big=5/5/2/20000".parse().unwrap();
        assert_eq!(
            (custom.alerts("anonymous"), custom.alerts("big")),
            (5, 20_000)
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
        assert!("anonymous=10/1000/1/x".parse::<Plans>().is_err());
        assert!("anonymous=10/1000/1/1/1".parse::<Plans>().is_err());
        assert!("a b=1/1,anonymous=1/1".parse::<Plans>().is_err());
    }
}
