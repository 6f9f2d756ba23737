//! A bank's publishing schedule: when a board is due, so that a slot
//! without one is a missed publication.
//!
//! Two forms, as operators write them and as they travel on the log:
//! - `{"every": "PT1H"}`: a board in each period of that length (an ISO
//!   8601 duration of days, hours, minutes and seconds, at least
//!   [`MIN_PERIOD_SECONDS`]; periods are aligned to the Unix epoch);
//! - `{"days": ["Mon", ...], "by": "HH:MM"}`: a board on each of those
//!   days by that time, in the service time zone.

use std::fmt;

use chrono::{NaiveTime, Weekday};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::rules::{Rule, Violation};

/// The shortest period of an `every` schedule.
pub const MIN_PERIOD_SECONDS: u64 = 10;

/// The longest: a period of more than a year is no schedule.
pub const MAX_PERIOD_SECONDS: u64 = 366 * 86_400;

/// When a bank is expected to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// A board in every period of this many seconds.
    Every(Period),
    /// A board on each of these days (at least one, in week order) by this
    /// time of day, in the service time zone.
    Days { days: Vec<Weekday>, by: NaiveTime },
}

/// The length of an `every` schedule's period, in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Period(u64);

impl Period {
    pub fn seconds(self) -> u64 {
        self.0
    }

    /// Reads an ISO 8601 duration of weeks, days, hours, minutes and whole
    /// seconds (`PT1H`, `PT90S`, `P1DT12H`, `P1W`). Years and months have
    /// no fixed length, so they are refused, as is a fraction.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("`{text}` is not an ISO 8601 duration such as PT1H, PT30M or P1D");
        let rest = text.strip_prefix('P').ok_or_else(bad)?;
        let (date, time) = match rest.split_once('T') {
            Some((date, time)) if !time.is_empty() => (date, Some(time)),
            Some(_) => return Err(bad()),
            None => (rest, None),
        };
        if date.is_empty() && time.is_none() {
            return Err(bad());
        }
        let mut seconds: u64 = 0;
        let mut add = |part: &str, units: &[(char, u64)]| -> Result<(), String> {
            let mut digits = String::new();
            let mut next_unit = 0;
            for c in part.chars() {
                if c.is_ascii_digit() {
                    digits.push(c);
                    continue;
                }
                let at = units[next_unit..]
                    .iter()
                    .position(|(unit, _)| *unit == c)
                    .ok_or_else(bad)?;
                let (_, size) = units[next_unit + at];
                next_unit += at + 1;
                let count: u64 = digits.parse().map_err(|_| bad())?;
                seconds = count
                    .checked_mul(size)
                    .and_then(|s| s.checked_add(seconds))
                    .ok_or_else(bad)?;
                digits.clear();
            }
            if digits.is_empty() {
                Ok(())
            } else {
                Err(bad())
            }
        };
        add(date, &[('W', 7 * 86_400), ('D', 86_400)])?;
        if let Some(time) = time {
            add(time, &[('H', 3_600), ('M', 60), ('S', 1)])?;
        }
        if seconds < MIN_PERIOD_SECONDS {
            return Err(format!("`{text}` is shorter than PT{MIN_PERIOD_SECONDS}S"));
        }
        if seconds > MAX_PERIOD_SECONDS {
            return Err(format!("`{text}` is longer than a year"));
        }
        Ok(Self(seconds))
    }
}

/// The shortest ISO 8601 form (`PT1H`, `P1DT12H`, `PT1M30S`).
impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (days, rest) = (self.0 / 86_400, self.0 % 86_400);
        let (hours, minutes, seconds) = (rest / 3_600, rest % 3_600 / 60, rest % 60);
        f.write_str("P")?;
        if days > 0 {
            write!(f, "{days}D")?;
        }
        if rest > 0 {
            f.write_str("T")?;
            for (count, unit) in [(hours, 'H'), (minutes, 'M'), (seconds, 'S')] {
                if count > 0 {
                    write!(f, "{count}{unit}")?;
                }
            }
        }
        Ok(())
    }
}

/// A schedule as written: one of the two forms, nothing else.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireSchedule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    every: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    days: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    by: Option<String>,
}

const DAY_NAMES: [(&str, Weekday); 7] = [
    ("Mon", Weekday::Mon),
    ("Tue", Weekday::Tue),
    ("Wed", Weekday::Wed),
    ("Thu", Weekday::Thu),
    ("Fri", Weekday::Fri),
    ("Sat", Weekday::Sat),
    ("Sun", Weekday::Sun),
];

fn day_name(day: Weekday) -> &'static str {
    DAY_NAMES[day.num_days_from_monday() as usize].0
}

impl Schedule {
    /// Reads a schedule from its JSON form; the problem, in words, if it
    /// is none (the field is `schedule`).
    pub fn from_json(value: &serde_json::Value) -> Result<Self, Violation> {
        let problem = |message: String| Violation::new(Rule::Schedule, "schedule", message);
        let wire: WireSchedule = serde_json::from_value(value.clone()).map_err(|_| {
            problem(
                r#"must be {"every": "<ISO 8601 duration>"} or {"days": ["Mon", ...], "by": "HH:MM"}"#
                    .into(),
            )
        })?;
        Self::from_wire(wire).map_err(problem)
    }

    fn from_wire(wire: WireSchedule) -> Result<Self, String> {
        match wire {
            WireSchedule {
                every: Some(every),
                days: None,
                by: None,
            } => Ok(Schedule::Every(Period::parse(&every)?)),
            WireSchedule {
                every: None,
                days: Some(names),
                by: Some(by),
            } => {
                let mut days = Vec::with_capacity(names.len());
                for name in &names {
                    let (_, day) = DAY_NAMES
                        .iter()
                        .find(|(n, _)| n == name)
                        .ok_or_else(|| format!("`{name}` is not a day: Mon, Tue, ... or Sun"))?;
                    if days.contains(day) {
                        return Err(format!("`{name}` is listed twice"));
                    }
                    days.push(*day);
                }
                if days.is_empty() {
                    return Err("names no day".into());
                }
                days.sort_by_key(|d| d.num_days_from_monday());
                let time = NaiveTime::parse_from_str(&by, "%H:%M")
                    .ok()
                    .filter(|_| by.len() == 5)
                    .ok_or_else(|| format!("`{by}` is not a time of day HH:MM, such as 09:30"))?;
                Ok(Schedule::Days { days, by: time })
            }
            _ => Err(
                r#"must be {"every": "<ISO 8601 duration>"} or {"days": ["Mon", ...], "by": "HH:MM"}, not both"#
                    .into(),
            ),
        }
    }

    fn to_wire(&self) -> WireSchedule {
        match self {
            Schedule::Every(period) => WireSchedule {
                every: Some(period.to_string()),
                days: None,
                by: None,
            },
            Schedule::Days { days, by } => WireSchedule {
                every: None,
                days: Some(days.iter().map(|d| day_name(*d).to_owned()).collect()),
                by: Some(by.format("%H:%M").to_string()),
            },
        }
    }
}

impl Serialize for Schedule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireSchedule::deserialize(deserializer)?;
        Schedule::from_wire(wire).map_err(serde::de::Error::custom)
    }
}

/// A field that is absent, `null` or a value: how an update says "leave
/// it", "clear it" or "set it".
pub mod nullable {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Deserializes a present field (`null` included) as `Some`; with
    /// `#[serde(default)]`, an absent one stays `None`.
    pub fn deserialize<'de, T, D>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
    where
        T: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Option::<T>::deserialize(deserializer).map(Some)
    }

    /// Serializes `Some(None)` as `null` (skip `None` with
    /// `skip_serializing_if = "Option::is_none"`).
    pub fn serialize<T, S>(value: &Option<Option<T>>, serializer: S) -> Result<S::Ok, S::Error>
    where
        T: Serialize,
        S: Serializer,
    {
        match value {
            Some(inner) => inner.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn periods_read_iso_8601_and_write_their_shortest_form() {
        for (text, seconds, shortest) in [
            ("PT1H", 3_600, "PT1H"),
            ("PT10S", 10, "PT10S"),
            ("PT90S", 90, "PT1M30S"),
            ("PT60M", 3_600, "PT1H"),
            ("P1D", 86_400, "P1D"),
            ("P1DT12H", 129_600, "P1DT12H"),
            ("P1W", 604_800, "P7D"),
        ] {
            let period = Period::parse(text).unwrap();
            assert_eq!(period.seconds(), seconds, "{text}");
            assert_eq!(period.to_string(), shortest, "{text}");
        }
        for bad in [
            "", "P", "PT", "1H", "PT9S", "PT1.5H", "P1M", "P1Y", "PT1H1H", "PT1S1M", "P1DT",
            "pt1h", "P400D",
        ] {
            assert!(Period::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_schedule_is_one_of_two_forms() {
        let every = Schedule::from_json(&json!({"every": "PT1H"})).unwrap();
        assert_eq!(every, Schedule::Every(Period(3_600)));
        let days = Schedule::from_json(&json!({"days": ["Fri", "Mon"], "by": "09:30"})).unwrap();
        assert_eq!(
            days,
            Schedule::Days {
                days: vec![Weekday::Mon, Weekday::Fri],
                by: NaiveTime::from_hms_opt(9, 30, 0).unwrap(),
            }
        );
        assert_eq!(
            serde_json::to_value(&days).unwrap(),
            json!({"days": ["Mon", "Fri"], "by": "09:30"})
        );
        let back: Schedule = serde_json::from_value(serde_json::to_value(&every).unwrap()).unwrap();
        assert_eq!(back, every);
        for bad in [
            json!({}),
            json!(null),
            json!("PT1H"),
            json!({"every": "PT1H", "by": "09:00"}),
            json!({"every": "PT5S"}),
            json!({"days": [], "by": "09:00"}),
            json!({"days": ["Monday"], "by": "09:00"}),
            json!({"days": ["Mon", "Mon"], "by": "09:00"}),
            json!({"days": ["Mon"], "by": "9:00"}),
            json!({"days": ["Mon"], "by": "24:00"}),
            json!({"days": ["Mon"]}),
            json!({"every": "PT1H", "extra": 1}),
        ] {
            let problem = Schedule::from_json(&bad).unwrap_err();
            assert_eq!(problem.field, "schedule", "{bad}");
            assert_eq!(problem.rule, Rule::Schedule, "{bad}");
        }
    }
}
