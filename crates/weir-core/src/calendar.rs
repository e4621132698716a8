//! Windows that follow the calendar (a day, an ISO week, a month in a time zone), whose
//! lengths differ from one to the next: 28 to 31 days, a 23- or 25-hour day at a
//! daylight-saving change.
//!
//! The core stays free of time zones: a [`Calendar`] says where the window holding an
//! instant starts and ends, and the fixed window counts in it ([`Policy::on_calendar`](crate::Policy::on_calendar)).
//! What implements it (the `weir` crate, from an IANA time zone) does the calendar
//! arithmetic; the algorithm only compares instants.

use std::fmt;

/// One window of a calendar: `[start, end)` in nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    /// The first instant in the window.
    pub start: u64,
    /// The first instant after it: the next window's start.
    pub end: u64,
}

/// Where the windows of a calendar period fall.
///
/// An implementation must be a pure function of the instant (the same window for
/// every instant in it, on every instance that has the same configuration), with
/// `start <= now < end`, and windows that follow one another: the window holding
/// `end` starts at `end`. The stores key a window by its start (weir's Redis store in
/// microseconds: boundaries on whole microseconds keep the stores alike; a time zone
/// calendar's are on whole seconds).
pub trait Calendar: Send + Sync + fmt::Debug {
    /// The window holding `now` (nanoseconds since the Unix epoch).
    fn window(&self, now: u64) -> Window;

    /// How a configuration names these windows (`calendar_month Europe/Berlin`), for
    /// what reports a rule (`weir simulate`'s table); by default `calendar`.
    fn name(&self) -> String {
        "calendar".to_owned()
    }
}

/// A calendar a policy refers to: `'static` so that a [`Policy`](crate::Policy) stays
/// `Copy`; two are the same calendar when they are the same object (whoever makes
/// them keeps one per distinct configuration).
#[derive(Clone, Copy)]
pub(crate) struct CalendarRef(pub(crate) &'static dyn Calendar);

impl fmt::Debug for CalendarRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for CalendarRef {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(self.0, other.0)
    }
}

impl Eq for CalendarRef {}

impl std::hash::Hash for CalendarRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.0 as *const dyn Calendar).cast::<()>().hash(state);
    }
}
