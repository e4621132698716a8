//! A rule's calendar windows in an IANA time zone, worked out with jiff: the
//! `weir_core::Calendar` a calendar rule's fixed window counts in.
//!
//! A window starts on an anchor date (every day; the week's `starts.day`; the month's,
//! clamped to its last day; the year's `starts.month` and day) at `starts.at` in the
//! zone, and ends where the next one starts. A start time a daylight-saving change skips
//! (02:30 on the day clocks go from 02:00 to 03:00) falls as far after the change
//! (03:30), one it repeats falls on its first occurrence: jiff's `compatible`
//! disambiguation, RFC 5545's and Temporal's. So windows follow one another with no
//! gap, and a day is 23 or 25 hours long across a change.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use arc_swap::ArcSwap;
use jiff::Span;
use jiff::civil::{Date, Time};
use jiff::tz::TimeZone;
use weir_core::{Calendar, Window};

/// The calendar periods a rule can count in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Unit {
    Day,
    Week,
    Month,
    Year,
}

/// Where a rule's windows start: `starts` as checked (see `super`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Starts {
    /// The year's month (1-12; 1 for other units).
    pub month: i8,
    /// The week's ISO weekday (1 = Monday), or the month's or year's day (1-31,
    /// clamped to the month's last day); 1 for days.
    pub day: i8,
    /// The time of day the window starts at, in the zone.
    pub at: Time,
}

/// The windows of one period, zone and start.
#[derive(Debug)]
pub(crate) struct Windows {
    unit: Unit,
    zone: TimeZone,
    starts: Starts,
    /// The window last worked out: the next check most likely falls in it too, and
    /// finds it without converting a time.
    last: ArcSwap<Window>,
}

/// One `Windows` per distinct calendar ever configured, kept for the process's life:
/// a `Policy` refers to its calendar as `&'static` (so it stays `Copy`), and a reload
/// finds the same object again, so the memory they hold is bounded by the distinct
/// calendars configured, not by reloads.
static KEPT: LazyLock<Mutex<HashMap<Named, &'static Windows>>> = LazyLock::new(Mutex::default);

/// What tells one calendar from another: its unit, its zone's canonical name, its start.
type Named = (Unit, String, Starts);

impl Windows {
    /// The windows of `unit` in `zone` (named `zone_name`, its canonical IANA name),
    /// starting at `starts`: the one object for them.
    pub(crate) fn kept(
        unit: Unit,
        zone: TimeZone,
        zone_name: &str,
        starts: Starts,
    ) -> &'static Windows {
        let mut kept = KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.entry((unit, zone_name.to_owned(), starts))
            .or_insert_with(|| {
                Box::leak(Box::new(Windows {
                    unit,
                    zone,
                    starts,
                    last: ArcSwap::from_pointee(Window { start: 0, end: 0 }),
                }))
            })
    }

    /// The window holding `now`, or `None` past what jiff represents (years beyond
    /// 9999, which a `u64` of nanoseconds never reaches).
    fn compute(&self, now: u64) -> Option<Window> {
        let instant = jiff::Timestamp::from_nanosecond(i128::from(now)).ok()?;
        let today = instant.to_zoned_datetime(self.zone.clone()).date();
        let mut anchor = self.anchor_on_or_before(today)?;
        // The anchor's start can lie after `now`: earlier in the anchor day than
        // `starts.at`. Then the window is the one before.
        let mut start = self.start_of(anchor)?;
        if start > instant {
            anchor = self.next_anchor(anchor, -1)?;
            start = self.start_of(anchor)?;
        }
        let end = self.start_of(self.next_anchor(anchor, 1)?)?;
        let nanos = |t: jiff::Timestamp| u64::try_from(t.as_nanosecond()).ok();
        Some(Window {
            // The window holding the epoch began before it in a zone ahead of UTC
            // (what `weir simulate`'s patterns meet, from time 0): it starts there.
            start: if start < jiff::Timestamp::UNIX_EPOCH {
                0
            } else {
                nanos(start)?
            },
            end: nanos(end)?,
        })
    }

    /// The latest anchor date on or before `date`.
    fn anchor_on_or_before(&self, date: Date) -> Option<Date> {
        match self.unit {
            Unit::Day => Some(date),
            Unit::Week => {
                let back = (date.weekday().to_monday_one_offset() - self.starts.day).rem_euclid(7);
                date.checked_sub(Span::new().days(back)).ok()
            }
            Unit::Month => {
                let this = self.anchor_in(date.year(), date.month())?;
                if this <= date {
                    Some(this)
                } else {
                    self.next_anchor(this, -1)
                }
            }
            Unit::Year => {
                let this = self.anchor_in(date.year(), self.starts.month)?;
                if this <= date {
                    Some(this)
                } else {
                    self.anchor_in(date.year() - 1, self.starts.month)
                }
            }
        }
    }

    /// The anchor `by` windows after (or before) `anchor`.
    fn next_anchor(&self, anchor: Date, by: i8) -> Option<Date> {
        match self.unit {
            Unit::Day => anchor.checked_add(Span::new().days(by)).ok(),
            Unit::Week => anchor.checked_add(Span::new().weeks(by)).ok(),
            Unit::Month => {
                let months = i32::from(anchor.year()) * 12 + i32::from(anchor.month()) - 1;
                let next = months + i32::from(by);
                let year = i16::try_from(next.div_euclid(12)).ok()?;
                let month = i8::try_from(next.rem_euclid(12) + 1).ok()?;
                self.anchor_in(year, month)
            }
            Unit::Year => self.anchor_in(anchor.year() + i16::from(by), self.starts.month),
        }
    }

    /// The month's anchor: `starts.day`, or the month's last day when it is shorter.
    fn anchor_in(&self, year: i16, month: i8) -> Option<Date> {
        let first = Date::new(year, month, 1).ok()?;
        Date::new(year, month, self.starts.day.min(first.days_in_month())).ok()
    }

    /// When the window anchored on `anchor` starts: `starts.at` on it, in the zone.
    fn start_of(&self, anchor: Date) -> Option<jiff::Timestamp> {
        anchor
            .to_datetime(self.starts.at)
            .to_zoned_datetime(self.zone.clone())
            .ok()
            .map(|zoned| zoned.timestamp())
    }
}

impl Calendar for Windows {
    fn name(&self) -> String {
        let unit = match self.unit {
            Unit::Day => "calendar_day",
            Unit::Week => "calendar_week",
            Unit::Month => "calendar_month",
            Unit::Year => "calendar_year",
        };
        let zone = self.zone.iana_name().unwrap_or("UTC");
        let Starts { month, day, at } = self.starts;
        let at = format!("{:02}:{:02}", at.hour(), at.minute());
        match self.unit {
            _ if (month, day, at.as_str()) == (1, 1, "00:00") => format!("{unit} {zone}"),
            Unit::Day => format!("{unit} {zone} from {at}"),
            Unit::Week => format!("{unit} {zone} from weekday {day} {at}"),
            Unit::Month => format!("{unit} {zone} from day {day} {at}"),
            Unit::Year => format!("{unit} {zone} from {month:02}-{day:02} {at}"),
        }
    }

    fn window(&self, now: u64) -> Window {
        let last = self.last.load();
        if last.start <= now && now < last.end {
            return **last;
        }
        drop(last);
        match self.compute(now) {
            Some(window) if window.start <= now && now < window.end => {
                self.last.store(Arc::new(window));
                window
            }
            // Unreachable for any u64 of nanoseconds (jiff reaches the year 9999):
            // a day of UTC, never a panic on a request's path.
            _ => {
                const DAY: u64 = 86_400_000_000_000;
                let start = now - now % DAY;
                Window {
                    start,
                    end: start.saturating_add(DAY),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use jiff::tz::TimeZoneDatabase;

    use super::*;

    fn at(instant: &str) -> u64 {
        let t: jiff::Timestamp = instant.parse().unwrap();
        u64::try_from(t.as_nanosecond()).unwrap()
    }

    fn windows(unit: Unit, zone: &str, month: i8, day: i8, at: (i8, i8)) -> &'static Windows {
        let tz = TimeZoneDatabase::bundled().get(zone).unwrap();
        let starts = Starts {
            month,
            day,
            at: Time::new(at.0, at.1, 0, 0).unwrap(),
        };
        Windows::kept(unit, tz, zone, starts)
    }

    /// The window holding `now`, as RFC 3339 instants.
    fn window(w: &Windows, now: &str) -> (u64, u64) {
        let window = w.window(at(now));
        (window.start, window.end)
    }

    #[test]
    fn a_start_a_clock_change_skips_moves_forward_and_a_repeated_one_is_the_first() {
        // Berlin, 2027-03-28: 02:00 CET becomes 03:00 CEST; 02:30 starts at 03:30 CEST.
        let berlin = windows(Unit::Day, "Europe/Berlin", 1, 1, (2, 30));
        assert_eq!(
            window(berlin, "2027-03-28T12:00:00Z"),
            (at("2027-03-28T01:30:00Z"), at("2027-03-29T00:30:00Z"))
        );
        // New York, 2027-11-07: 01:30 happens twice; the window starts at the first
        // (EDT), and the day before it is 25 hours long.
        let new_york = windows(Unit::Day, "America/New_York", 1, 1, (1, 30));
        assert_eq!(
            window(new_york, "2027-11-07T12:00:00Z"),
            (at("2027-11-07T05:30:00Z"), at("2027-11-08T06:30:00Z"))
        );
    }

    #[test]
    fn the_window_holding_the_epoch_starts_there_in_a_zone_ahead_of_utc() {
        // January 1970 in Berlin began at 23:00Z the day before the epoch.
        let berlin = windows(Unit::Month, "Europe/Berlin", 1, 1, (0, 0));
        let february = at("1970-01-31T23:00:00Z");
        for now in [0, 3_600_000_000_000, february - 1] {
            assert_eq!(
                berlin.window(now),
                Window {
                    start: 0,
                    end: february
                }
            );
        }
        assert_eq!(berlin.window(february).start, february);
    }

    #[test]
    fn a_calendar_is_named_as_a_configuration_writes_it() {
        let named = |unit, month, day, at| windows(unit, "Europe/Berlin", month, day, at).name();
        assert_eq!(
            named(Unit::Month, 1, 1, (0, 0)),
            "calendar_month Europe/Berlin"
        );
        assert_eq!(
            named(Unit::Day, 1, 1, (6, 0)),
            "calendar_day Europe/Berlin from 06:00"
        );
        assert_eq!(
            named(Unit::Week, 1, 7, (0, 0)),
            "calendar_week Europe/Berlin from weekday 7 00:00"
        );
        assert_eq!(
            named(Unit::Month, 1, 15, (9, 30)),
            "calendar_month Europe/Berlin from day 15 09:30"
        );
        assert_eq!(
            named(Unit::Year, 4, 6, (0, 0)),
            "calendar_year Europe/Berlin from 04-06 00:00"
        );
    }

    #[test]
    fn weeks_years_and_short_months() {
        // Weeks from Sunday (ISO weekday 7) in Tokyo: Wednesday 2027-01-06 is in the
        // week from Sunday 2027-01-03 00:00 JST.
        let sundays = windows(Unit::Week, "Asia/Tokyo", 1, 7, (0, 0));
        assert_eq!(
            window(sundays, "2027-01-06T00:00:00Z"),
            (at("2027-01-02T15:00:00Z"), at("2027-01-09T15:00:00Z"))
        );
        // The UK's tax year, from April 6 in London (BST then).
        let tax = windows(Unit::Year, "Europe/London", 4, 6, (0, 0));
        assert_eq!(
            window(tax, "2028-01-01T00:00:00Z"),
            (at("2027-04-05T23:00:00Z"), at("2028-04-05T23:00:00Z"))
        );
        // Day 30: February's window starts on its last day, March's on the 30th.
        let thirtieth = windows(Unit::Month, "UTC", 1, 30, (0, 0));
        assert_eq!(
            window(thirtieth, "2028-03-01T00:00:00Z"),
            (at("2028-02-29T00:00:00Z"), at("2028-03-30T00:00:00Z"))
        );
        assert_eq!(
            window(thirtieth, "2028-02-28T23:59:59Z"),
            (at("2028-01-30T00:00:00Z"), at("2028-02-29T00:00:00Z"))
        );
    }

    #[test]
    fn windows_tile_time_whichever_order_they_are_asked_in() {
        let cases = [
            windows(Unit::Day, "Europe/Berlin", 1, 1, (2, 30)),
            windows(Unit::Week, "America/New_York", 1, 3, (1, 30)),
            windows(Unit::Month, "Australia/Lord_Howe", 1, 31, (2, 15)),
            windows(Unit::Year, "Pacific/Apia", 2, 29, (0, 0)),
            // Apia skipped 2011-12-30 whole: the day before it ends at the 31st.
            windows(Unit::Day, "Pacific/Apia", 1, 1, (0, 0)),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for w in cases {
            for _ in 0..300 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // Any instant from 2000 to about 2100.
                let now = 946_684_800_000_000_000 + seed % 3_155_760_000_000_000_000;
                let Window { start, end } = w.window(now);
                assert!(start <= now && now < end, "{w:?} at {now}");
                assert_eq!(
                    w.window(end).start,
                    end,
                    "{w:?}: the next window starts at the end"
                );
                assert_eq!(
                    w.window(start - 1).end,
                    start,
                    "{w:?}: the one before ends at the start"
                );
                assert_eq!(
                    w.window(now),
                    Window { start, end },
                    "{w:?}: again, from the cache"
                );
            }
        }
    }

    #[test]
    fn a_day_a_zone_skipped_is_no_window() {
        let apia = windows(Unit::Day, "Pacific/Apia", 1, 1, (0, 0));
        // 2011-12-29 00:00 at UTC-10 to 2011-12-31 00:00 at UTC+14: 24 hours.
        assert_eq!(
            window(apia, "2011-12-30T09:59:59Z"),
            (at("2011-12-29T10:00:00Z"), at("2011-12-30T10:00:00Z"))
        );
    }

    #[test]
    fn one_object_per_calendar() {
        let a = windows(Unit::Month, "Europe/Paris", 1, 1, (0, 0));
        let b = windows(Unit::Month, "Europe/Paris", 1, 1, (0, 0));
        let c = windows(Unit::Month, "Europe/Paris", 1, 2, (0, 0));
        assert!(std::ptr::eq(a, b));
        assert!(!std::ptr::eq(a, c));
    }
}
