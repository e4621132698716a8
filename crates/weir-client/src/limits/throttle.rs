//! Adaptive throttling (Google's SRE book, "Handling Overload"): the client counts its
//! requests and those the server accepted over a window, and refuses a new request
//! itself with probability `max(0, (requests - K * accepts) / (requests + 1))`. While
//! the server accepts everything, nothing is refused; as it refuses more, the client
//! sends less, but never stops probing, so it learns when the server recovers. `K`
//! (at least 1; 2 in the book) is how many requests per accept are let through before
//! refusing starts.

use std::time::Duration;

use super::window::Window;

/// The throttle's counts.
#[derive(Debug, Clone)]
pub(crate) struct Throttle {
    k: f64,
    requests: Window,
    accepts: Window,
}

impl Throttle {
    /// A throttle with multiplier `k` (checked by the policy: finite, at least 1) over
    /// `window`.
    pub(crate) fn new(k: f64, window: Duration) -> Self {
        Self {
            k,
            requests: Window::new(window),
            accepts: Window::new(window),
        }
    }

    /// The probability of refusing a request at `now`.
    pub(crate) fn probability(&self, now: Duration) -> f64 {
        let requests = self.requests.sum(now) as f64;
        let accepts = self.accepts.sum(now) as f64;
        ((requests - self.k * accepts) / (requests + 1.0)).max(0.0)
    }

    /// Counts a request at `now` and decides it with `coin` (uniform in `[0, 1)`):
    /// true to send it.
    pub(crate) fn admit(&mut self, now: Duration, coin: f64) -> bool {
        let refuse = self.probability(now);
        self.requests.add(now, 1);
        coin >= refuse
    }

    /// Counts an attempt the throttle did not decide (a retry) at `now`.
    pub(crate) fn attempt(&mut self, now: Duration) {
        self.requests.add(now, 1);
    }

    /// Counts an answer that was not a refusal (anything but 429 and 503).
    pub(crate) fn accepted(&mut self, now: Duration) {
        self.accepts.add(now, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(120);

    #[test]
    fn the_probability_is_the_books_formula() {
        let mut throttle = Throttle::new(2.0, WINDOW);
        let now = Duration::from_secs(1);
        assert_eq!(throttle.probability(now), 0.0);
        for i in 0..100 {
            throttle.attempt(now);
            if i < 20 {
                throttle.accepted(now);
            }
        }
        // (100 - 2 * 20) / 101
        assert!((throttle.probability(now) - 60.0 / 101.0).abs() < 1e-12);
        for _ in 0..30 {
            throttle.accepted(now);
        }
        assert_eq!(
            throttle.probability(now),
            0.0,
            "half accepted: K = 2 lets all through"
        );
    }

    #[test]
    fn it_refuses_by_the_coin_and_counts_refused_requests() {
        let mut throttle = Throttle::new(1.0, WINDOW);
        let now = Duration::ZERO;
        for _ in 0..9 {
            throttle.attempt(now);
        }
        // p = 9 / 10
        assert!(!throttle.admit(now, 0.89));
        // p = 10 / 11 now: the refused request counted.
        assert!(throttle.admit(now, 0.91));
        assert!(!throttle.admit(now, 0.91));
    }

    #[test]
    fn it_forgets_with_the_window() {
        let mut throttle = Throttle::new(2.0, WINDOW);
        for _ in 0..100 {
            throttle.attempt(Duration::ZERO);
        }
        assert!(throttle.probability(Duration::ZERO) > 0.9);
        assert_eq!(throttle.probability(WINDOW), 0.0);
    }
}
