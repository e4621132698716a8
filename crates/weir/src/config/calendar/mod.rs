//! A rule's calendar period (`period: calendar_month`, with `time_zone` and `starts`):
//! parsed, checked field by field, and made into the calendar its fixed window counts
//! in (`windows`).

mod built;
mod windows;

use std::fmt;
use std::time::Duration;

use jiff::civil::Time;
use jiff::tz::{TimeZone, TimeZoneDatabase};
use serde::de::{self, Deserialize, Deserializer};
use serde_saphyr::{Location, Spanned};
use weir_core::{Policy, PolicyError, parse_period};

pub use self::built::CalendarPeriod;
use self::windows::{Starts, Unit, Windows};
use super::file::RawRule;

/// A rule's `period`: a duration (`1m`, `30d`), or a calendar period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RulePeriod {
    /// Windows of this length from the Unix epoch (or a rate over it).
    Every(Duration),
    /// The calendar's days, weeks, months or years in the rule's time zone.
    Calendar(Unit),
}

impl RulePeriod {
    /// The period a policy states: the duration, or a calendar period's longest
    /// window outside a daylight-saving change (headers that state a window give it).
    pub(super) fn nominal(self) -> Duration {
        const DAY: u64 = 86_400;
        Duration::from_secs(match self {
            RulePeriod::Every(period) => return period,
            RulePeriod::Calendar(Unit::Day) => DAY,
            RulePeriod::Calendar(Unit::Week) => 7 * DAY,
            RulePeriod::Calendar(Unit::Month) => 31 * DAY,
            RulePeriod::Calendar(Unit::Year) => 366 * DAY,
        })
    }
}

impl std::str::FromStr for RulePeriod {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "calendar_day" => RulePeriod::Calendar(Unit::Day),
            "calendar_week" => RulePeriod::Calendar(Unit::Week),
            "calendar_month" => RulePeriod::Calendar(Unit::Month),
            "calendar_year" => RulePeriod::Calendar(Unit::Year),
            _ if text.starts_with("calendar") => {
                return Err(format!(
                    "invalid period `{}`: the calendar periods are calendar_day, calendar_week, calendar_month and calendar_year",
                    text.escape_debug()
                ));
            }
            _ => RulePeriod::Every(parse_period(text).map_err(|e| {
                format!("{e}; or a calendar period: calendar_day, calendar_week, calendar_month, calendar_year")
            })?),
        })
    }
}

impl<'de> Deserialize<'de> for RulePeriod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = RulePeriod;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a period such as 1s, 1m, 1h or 1d, or calendar_day, calendar_week, calendar_month or calendar_year")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<RulePeriod, E> {
                text.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// `starts` as written: where a calendar rule's windows start.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStarts {
    month: Option<Spanned<i64>>,
    day: Option<Spanned<i64>>,
    at: Option<Spanned<String>>,
}

/// Why a calendar rule was refused: where, the field under `rules[i]`, and the message.
pub(super) type Refusal = (Location, String, String);

/// `policy` (built from `rule`'s `period`) on the rule's calendar, when its period is
/// one; a rule with a duration for its period may not have `time_zone` or `starts`.
pub(super) fn on_calendar(
    rule: &RawRule,
    period: &Spanned<RulePeriod>,
    policy: Policy,
) -> Result<Policy, Refusal> {
    on_calendar_of(
        rule.time_zone.as_ref(),
        rule.starts.as_ref(),
        period,
        policy,
    )
}

/// `policy` on the calendar of `period` in `time_zone` from `starts` (a rule's, or an
/// Envoy descriptor's `x-weir`), when `period` is a calendar period; with a duration,
/// `time_zone` and `starts` are refused.
pub(super) fn on_calendar_of(
    time_zone_field: Option<&Spanned<String>>,
    starts_field: Option<&Spanned<RawStarts>>,
    period: &Spanned<RulePeriod>,
    policy: Policy,
) -> Result<Policy, Refusal> {
    let unit = match period.value {
        RulePeriod::Calendar(unit) => unit,
        RulePeriod::Every(_) => {
            if let Some(zone) = time_zone_field {
                return Err(not_calendar(zone.referenced, "time_zone"));
            }
            if let Some(starts) = starts_field {
                return Err(not_calendar(starts.referenced, "starts"));
            }
            return Ok(policy);
        }
    };
    let (zone, zone_name) = match time_zone_field {
        None => (TimeZone::UTC, "UTC".to_owned()),
        Some(name) => time_zone(&name.value)
            .map_err(|message| (name.referenced, "time_zone".to_owned(), message))?,
    };
    let starts = starts(unit, starts_field.map(|s| &s.value))?;
    let windows = Windows::kept(unit, zone, &zone_name, starts);
    policy.on_calendar(windows).map_err(|error| {
        let message = match error {
            PolicyError::CalendarNotApplicable(algorithm) => format!(
                "a calendar period applies to fixed_window, not to {algorithm}: a calendar quota resets at the calendar's boundaries, which only a fixed window has (a sliding window's trailing month has no calendar meaning; the buckets refill at a rate)"
            ),
            other => other.to_string(),
        };
        (period.referenced, "period".to_owned(), message)
    })
}

pub(super) fn not_calendar(at: Location, field: &str) -> Refusal {
    (
        at,
        field.to_owned(),
        format!(
            "`{field}` applies to a calendar period (calendar_day, calendar_week, calendar_month, calendar_year), not to a duration"
        ),
    )
}

/// The zone named `name` in the bundled IANA database, and its canonical name.
fn time_zone(name: &str) -> Result<(TimeZone, String), String> {
    static DATABASE: std::sync::LazyLock<TimeZoneDatabase> =
        std::sync::LazyLock::new(TimeZoneDatabase::bundled);
    let unknown = || {
        format!(
            "unknown time zone `{}`: give an IANA name such as UTC, Europe/Berlin or America/New_York",
            name.escape_debug()
        )
    };
    if name.eq_ignore_ascii_case("Etc/Unknown") {
        return Err(unknown());
    }
    let zone = DATABASE.get(name).map_err(|_| unknown())?;
    let canonical = zone.iana_name().unwrap_or(name).to_owned();
    Ok((zone, canonical))
}

/// `starts` checked for `unit`: each field in its range, and only the fields the unit
/// has (`month` for years, `day` for weeks, months and years, `at` for every unit).
fn starts(unit: Unit, raw: Option<&RawStarts>) -> Result<Starts, Refusal> {
    let mut starts = Starts {
        month: 1,
        day: 1,
        at: Time::midnight(),
    };
    let Some(raw) = raw else {
        return Ok(starts);
    };
    let field = |name: &str| format!("starts.{name}");
    if let Some(month) = &raw.month {
        if unit != Unit::Year {
            return Err((
                month.referenced,
                field("month"),
                "`starts.month` applies to calendar_year only".into(),
            ));
        }
        starts.month = in_range(month, 1, 12).ok_or_else(|| {
            (
                month.referenced,
                field("month"),
                format!("`starts.month` must be from 1 to 12, got {}", month.value),
            )
        })?;
    }
    if let Some(day) = &raw.day {
        let (most, what) = match unit {
            Unit::Day => {
                return Err((
                    day.referenced,
                    field("day"),
                    "`starts.day` does not apply to calendar_day: give `starts.at`".into(),
                ));
            }
            Unit::Week => (7, "an ISO weekday, 1 (Monday) to 7 (Sunday)"),
            Unit::Month | Unit::Year => (
                31,
                "a day of the month from 1 to 31 (in a shorter month, its last day)",
            ),
        };
        starts.day = in_range(day, 1, most).ok_or_else(|| {
            (
                day.referenced,
                field("day"),
                format!("`starts.day` must be {what}, got {}", day.value),
            )
        })?;
    }
    if let Some(at) = &raw.at {
        starts.at = time_of_day(&at.value).ok_or_else(|| {
            (
                at.referenced,
                field("at"),
                format!(
                    "`starts.at` must be a time of day as HH:MM (00:00 to 23:59), got `{}`",
                    at.value.escape_debug()
                ),
            )
        })?;
    }
    Ok(starts)
}

fn in_range(value: &Spanned<i64>, low: i8, high: i8) -> Option<i8> {
    i8::try_from(value.value)
        .ok()
        .filter(|v| (low..=high).contains(v))
}

/// `HH:MM`, exactly: two digits each, 00-23 and 00-59.
fn time_of_day(text: &str) -> Option<Time> {
    let (hour, minute) = text.split_once(':')?;
    let two = |s: &str| {
        (s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i8>().ok())
            .flatten()
    };
    Time::new(two(hour)?, two(minute)?, 0, 0).ok()
}
