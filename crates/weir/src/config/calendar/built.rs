//! A calendar period built in code ([`RuleBuilder::per_calendar`]): the fields a file
//! writes (`period`, `time_zone`, `starts`), written for the file's own reader to
//! check.
//!
//! [`RuleBuilder::per_calendar`]: crate::RuleBuilder::per_calendar

use serde_json::{Map, Value, json};

/// A calendar period for a rule built in code: the calendar's days, ISO weeks, months
/// or years, in a time zone (UTC unless [`CalendarPeriod::time_zone`]), each window
/// starting where [`CalendarPeriod::starts_on`], [`CalendarPeriod::starts_in`] and
/// [`CalendarPeriod::starts_at`] say (by default the 1st, Monday for weeks, at 00:00).
/// Nothing is checked until [`ConfigBuilder::build`](crate::ConfigBuilder::build),
/// which refuses what a file would be refused, naming the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarPeriod {
    period: &'static str,
    time_zone: Option<String>,
    month: Option<u8>,
    day: Option<u8>,
    at: Option<String>,
}

impl CalendarPeriod {
    fn of(period: &'static str) -> Self {
        Self {
            period,
            time_zone: None,
            month: None,
            day: None,
            at: None,
        }
    }

    /// Each calendar day (`calendar_day`).
    pub fn day() -> Self {
        Self::of("calendar_day")
    }

    /// Each ISO week, from Monday unless [`CalendarPeriod::starts_on`] (`calendar_week`).
    pub fn week() -> Self {
        Self::of("calendar_week")
    }

    /// Each calendar month (`calendar_month`).
    pub fn month() -> Self {
        Self::of("calendar_month")
    }

    /// Each calendar year (`calendar_year`).
    pub fn year() -> Self {
        Self::of("calendar_year")
    }

    /// In the IANA time zone `name` (`Europe/Berlin`, `America/New_York`), rather than
    /// UTC: windows start at its local times, across its daylight-saving changes.
    #[must_use]
    pub fn time_zone(mut self, name: impl Into<String>) -> Self {
        self.time_zone = Some(name.into());
        self
    }

    /// Windows start on `day`: for weeks the ISO weekday, 1 (Monday) to 7 (Sunday);
    /// for months and years the day of the month, 1 to 31 (in a shorter month, its
    /// last day). Not for days.
    #[must_use]
    pub fn starts_on(mut self, day: u8) -> Self {
        self.day = Some(day);
        self
    }

    /// Years start in `month`, 1 to 12. Years only.
    #[must_use]
    pub fn starts_in(mut self, month: u8) -> Self {
        self.month = Some(month);
        self
    }

    /// Windows start at `at`, `HH:MM` from `00:00` to `23:59`, in the time zone.
    #[must_use]
    pub fn starts_at(mut self, at: impl Into<String>) -> Self {
        self.at = Some(at.into());
        self
    }

    /// Writes `period`, `time_zone` and `starts` into `rule`, as a file writes them.
    pub(in crate::config) fn write(&self, rule: &mut Map<String, Value>) {
        rule.insert("period".into(), json!(self.period));
        if let Some(zone) = &self.time_zone {
            rule.insert("time_zone".into(), json!(zone));
        }
        let mut starts = Map::new();
        if let Some(month) = self.month {
            starts.insert("month".into(), json!(month));
        }
        if let Some(day) = self.day {
            starts.insert("day".into(), json!(day));
        }
        if let Some(at) = &self.at {
            starts.insert("at".into(), json!(at));
        }
        if !starts.is_empty() {
            rule.insert("starts".into(), Value::Object(starts));
        }
    }
}
