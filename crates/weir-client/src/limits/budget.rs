//! The retry budget: a client retries at most a fraction of its requests, over a
//! sliding window, as Google's SRE book counsels ("Handling Overload": 10%), plus a
//! small reserve so a client that has sent little can still retry once in a while.
//! Past it, a retryable answer is handed back to the caller as it came: when every
//! client of an overloaded server holds to this, retries add at most that fraction to
//! its load, however many clients there are and however long the overload lasts.

use std::time::Duration;

use super::window::Window;

/// Retries allowed per window: `percent` of the requests, plus `reserve`.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    percent: u8,
    reserve: u32,
    requests: Window,
    retries: Window,
}

impl Budget {
    /// A budget of `percent` (at most 100) of the requests plus `reserve`, over `window`.
    pub(crate) fn new(percent: u8, reserve: u32, window: Duration) -> Self {
        Self {
            percent: percent.min(100),
            reserve,
            requests: Window::new(window),
            retries: Window::new(window),
        }
    }

    /// Counts a request (a first attempt) at `now`.
    pub(crate) fn request(&mut self, now: Duration) {
        self.requests.add(now, 1);
    }

    /// Whether a retry fits at `now`; if so, it is counted.
    pub(crate) fn try_retry(&mut self, now: Duration) -> bool {
        let allowed = u128::from(self.requests.sum(now)) * u128::from(self.percent) / 100
            + u128::from(self.reserve);
        let fits = u128::from(self.retries.sum(now)) < allowed;
        if fits {
            self.retries.add(now, 1);
        }
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(10);

    #[test]
    fn retries_are_held_to_a_tenth_of_requests_plus_the_reserve() {
        let mut budget = Budget::new(10, 2, WINDOW);
        let now = Duration::from_secs(1);
        for _ in 0..100 {
            budget.request(now);
        }
        let granted = (0..50).filter(|_| budget.try_retry(now)).count();
        assert_eq!(granted, 12, "10% of 100, and the reserve of 2");
        for _ in 0..10 {
            budget.request(now);
        }
        assert!(
            budget.try_retry(now),
            "ten more requests earn one more retry"
        );
        assert!(!budget.try_retry(now));
    }

    #[test]
    fn spent_retries_leave_with_the_window() {
        let mut budget = Budget::new(10, 1, WINDOW);
        assert!(
            budget.try_retry(Duration::ZERO),
            "the reserve, with no requests"
        );
        assert!(!budget.try_retry(Duration::from_secs(9)));
        assert!(budget.try_retry(Duration::from_secs(10)));
    }

    #[test]
    fn no_budget_no_retries_and_percent_is_capped() {
        let mut none = Budget::new(0, 0, WINDOW);
        none.request(Duration::ZERO);
        assert!(!none.try_retry(Duration::ZERO));
        let mut all = Budget::new(255, 0, WINDOW);
        all.request(Duration::ZERO);
        assert!(all.try_retry(Duration::ZERO));
        assert!(
            !all.try_retry(Duration::ZERO),
            "at most one retry per request"
        );
    }
}
