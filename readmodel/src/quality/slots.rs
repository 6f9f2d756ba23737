//! Which publications a schedule expected over a span of time, and which
//! of them were missed.
//!
//! A slot is the span a board is expected in:
//! - for `{"every": P}`, each period of length P, aligned to the Unix
//!   epoch; its deadline is its end;
//! - for `{"days": [...], "by": T}`, each listed day in the service time
//!   zone, midnight to midnight; its deadline is T that day.
//!
//! A slot counts once it has ended: it is missed when no board was
//! received in it. A board received after a daily slot's deadline but
//! within its day is late, not missed: its delay is how long after the
//! deadline the day's first board came. Consecutive missed slots are
//! reported as one span, so a bank silent for a day on a ten-second
//! schedule is one entry, not 8,640.

use chrono::{DateTime, Days, NaiveDate, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use ratewire_proto::Schedule;

/// What a schedule expected over a span, and what came of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    /// Slots that ended within the span.
    pub expected: u64,
    /// Of them, those without a board.
    pub missed: u64,
    /// The missed slots, consecutive ones merged: `(from, to)`.
    pub missed_spans: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// For daily schedules: each published slot's delay after its
    /// deadline, in seconds (0 when on time).
    pub delays: Vec<i64>,
    /// The end of the last slot that could end within the span, counted
    /// or not (a day the schedule does not list): where a judge that goes
    /// on later picks up, so that no slot is cut in two.
    pub through: Option<DateTime<Utc>>,
}

impl Judged {
    /// Adds what another span gave (spans in time order).
    pub fn add(&mut self, other: Judged) {
        self.expected += other.expected;
        self.missed += other.missed;
        for span in other.missed_spans {
            push_span(&mut self.missed_spans, span);
        }
        self.delays.extend(other.delays);
        self.through = self.through.max(other.through);
    }
}

/// Appends `span`, merged with the last one when they touch.
fn push_span(
    spans: &mut Vec<(DateTime<Utc>, DateTime<Utc>)>,
    span: (DateTime<Utc>, DateTime<Utc>),
) {
    match spans.last_mut() {
        Some(last) if last.1 == span.0 => last.1 = span.1,
        _ => spans.push(span),
    }
}

/// Judges the slots of `schedule` that lie wholly within `[from, until)`,
/// against `received`: the times boards were received, in order.
pub fn judge(
    schedule: &Schedule,
    zone: Tz,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    received: &[DateTime<Utc>],
) -> Judged {
    if from >= until {
        return Judged::default();
    }
    let received = between(received, from, until);
    match schedule {
        Schedule::Every(period) => every(period.seconds(), from, until, received),
        Schedule::Days { days, by } => daily(days, *by, zone, from, until, received),
    }
}

fn every(
    period: u64,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    received: &[DateTime<Utc>],
) -> Judged {
    let period = i64::try_from(period).unwrap_or(i64::MAX);
    let slot_of = |at: DateTime<Utc>| at.timestamp().div_euclid(period);
    let at = |slot: i64| DateTime::from_timestamp(slot.saturating_mul(period), 0);
    // The first slot starting at or after `from`, and the first that does
    // not end by `until`.
    let first = from.timestamp().div_euclid(period)
        + i64::from(from.timestamp().rem_euclid(period) != 0 || from.timestamp_subsec_nanos() != 0);
    let end = slot_of(until);
    if first >= end {
        return Judged::default();
    }
    let mut judged = Judged {
        expected: u64::try_from(end - first).unwrap_or(0),
        through: at(end),
        ..Judged::default()
    };
    let mut next = first;
    let covered = received
        .iter()
        .map(|t| slot_of(*t))
        .filter(|slot| (first..end).contains(slot));
    for slot in covered.chain(std::iter::once(end)) {
        if slot > next {
            judged.missed += u64::try_from(slot - next).unwrap_or(0);
            if let (Some(a), Some(b)) = (at(next), at(slot)) {
                push_span(&mut judged.missed_spans, (a, b));
            }
        }
        next = next.max(slot + 1);
    }
    judged
}

fn daily(
    days: &[chrono::Weekday],
    by: NaiveTime,
    zone: Tz,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    received: &[DateTime<Utc>],
) -> Judged {
    let mut judged = Judged::default();
    let first_day = from.with_timezone(&zone).date_naive();
    let last_day = until.with_timezone(&zone).date_naive();
    let mut day = first_day;
    while day <= last_day {
        let next_day = day + Days::new(1);
        let (start, end) = (
            local(zone, day, NaiveTime::MIN),
            local(zone, next_day, NaiveTime::MIN),
        );
        if start >= from && end <= until {
            judged.through = Some(end);
        }
        if days.contains(&chrono::Datelike::weekday(&day)) && start >= from && end <= until {
            judged.expected += 1;
            match between(received, start, end).first() {
                Some(at) => {
                    let deadline = local(zone, day, by);
                    judged.delays.push((*at - deadline).num_seconds().max(0));
                }
                None => {
                    judged.missed += 1;
                    push_span(&mut judged.missed_spans, (start, end));
                }
            }
        }
        day = next_day;
    }
    judged
}

/// The times of `received` (in order) in `[from, until)`.
fn between(
    received: &[DateTime<Utc>],
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> &[DateTime<Utc>] {
    let start = received.partition_point(|at| *at < from);
    let end = received.partition_point(|at| *at < until).max(start);
    &received[start..end]
}

/// `time` on `day` in `zone`; a time a clock change skips is read an hour
/// later.
fn local(zone: Tz, day: NaiveDate, time: NaiveTime) -> DateTime<Utc> {
    let naive = day.and_time(time);
    zone.from_local_datetime(&naive)
        .earliest()
        .or_else(|| {
            zone.from_local_datetime(&(naive + chrono::Duration::hours(1)))
                .earliest()
        })
        .map(|at| at.with_timezone(&Utc))
        .unwrap_or_else(|| naive.and_utc())
}

/// The median of `values` (the lower middle one of an even count); `None`
/// for none.
pub fn median(values: &[i64]) -> Option<i64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len().checked_sub(1)? / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewire_proto::Period;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn every_hour() -> Schedule {
        Schedule::Every(Period::parse("PT1H").unwrap())
    }

    #[test]
    fn an_hourly_schedule_counts_each_whole_hour_and_merges_the_misses() {
        let received = [
            at("2026-11-23T08:10:00Z"),
            at("2026-11-23T08:50:00Z"),
            at("2026-11-23T12:00:00Z"),
        ];
        // 08:30 to 13:10: whole hours 09-10 to 12-13.
        let judged = judge(
            &every_hour(),
            Tz::UTC,
            at("2026-11-23T08:30:00Z"),
            at("2026-11-23T13:10:00Z"),
            &received,
        );
        assert_eq!(judged.expected, 4);
        assert_eq!(judged.missed, 3, "09, 10 and 11 have no board");
        assert_eq!(
            judged.missed_spans,
            [(at("2026-11-23T09:00:00Z"), at("2026-11-23T12:00:00Z"))]
        );
        assert!(judged.delays.is_empty());
        // A board in every hour: nothing missed.
        let all: Vec<DateTime<Utc>> = (8..14)
            .map(|h| at(&format!("2026-11-23T{h:02}:05:00Z")))
            .collect();
        let judged = judge(
            &every_hour(),
            Tz::UTC,
            at("2026-11-23T08:00:00Z"),
            at("2026-11-23T14:00:00Z"),
            &all,
        );
        assert_eq!((judged.expected, judged.missed), (6, 0));
    }

    #[test]
    fn a_silent_day_on_a_ten_second_schedule_is_one_span() {
        let schedule = Schedule::Every(Period::parse("PT10S").unwrap());
        let judged = judge(
            &schedule,
            Tz::UTC,
            at("2026-11-23T00:00:00Z"),
            at("2026-11-24T00:00:00Z"),
            &[at("2026-11-23T00:00:05Z")],
        );
        assert_eq!(judged.expected, 8_640);
        assert_eq!(judged.missed, 8_639);
        assert_eq!(
            judged.missed_spans,
            [(at("2026-11-23T00:00:10Z"), at("2026-11-24T00:00:00Z"))]
        );
    }

    #[test]
    fn a_daily_deadline_counts_days_in_the_service_zone_across_midnight() {
        // Mon-Fri by 01:00 in Addis Ababa (UTC+3): Tuesday's slot is Monday
        // 21:00 UTC to Tuesday 21:00 UTC.
        let schedule = Schedule::from_json(&serde_json::json!({
            "days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "by": "01:00"
        }))
        .unwrap();
        let zone: Tz = "Africa/Addis_Ababa".parse().unwrap();
        let received = [
            // Tuesday 00:30 local: on time, though still Monday in UTC.
            at("2026-11-23T21:30:00Z"),
            // Wednesday 02:00 local: an hour late.
            at("2026-11-24T23:00:00Z"),
            // Saturday: no slot.
            at("2026-11-28T06:00:00Z"),
        ];
        let judged = judge(
            &schedule,
            zone,
            at("2026-11-23T21:00:00Z"),
            at("2026-11-29T21:00:00Z"),
            &received,
        );
        // Tue, Wed, Thu, Fri (Sat and Sun are not listed).
        assert_eq!(judged.expected, 4);
        assert_eq!(judged.missed, 2, "Thursday and Friday");
        assert_eq!(
            judged.missed_spans,
            [(at("2026-11-25T21:00:00Z"), at("2026-11-27T21:00:00Z"))]
        );
        assert_eq!(judged.delays, [0, 3_600]);
        assert_eq!(median(&judged.delays), Some(0));
    }

    #[test]
    fn only_slots_wholly_inside_the_span_count() {
        let judged = judge(
            &every_hour(),
            Tz::UTC,
            at("2026-11-23T08:00:01Z"),
            at("2026-11-23T09:59:59Z"),
            &[],
        );
        assert_eq!(judged, Judged::default());
        let mut total = judge(
            &every_hour(),
            Tz::UTC,
            at("2026-11-23T08:00:00Z"),
            at("2026-11-23T10:00:00Z"),
            &[],
        );
        total.add(judge(
            &every_hour(),
            Tz::UTC,
            at("2026-11-23T10:00:00Z"),
            at("2026-11-23T11:00:00Z"),
            &[],
        ));
        assert_eq!(total.expected, 3);
        assert_eq!(
            total.missed_spans,
            [(at("2026-11-23T08:00:00Z"), at("2026-11-23T11:00:00Z"))],
            "spans that touch are one"
        );
    }

    #[test]
    fn the_median_is_the_lower_middle() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5]), Some(5));
        assert_eq!(median(&[9, 1, 5, 3]), Some(3));
    }
}
