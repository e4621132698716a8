//! What the client keeps between requests: counts over sliding windows for the retry
//! budget and the adaptive throttle, and the pacing per server.

mod budget;
mod pace;
mod throttle;
mod window;

pub(crate) use self::budget::Budget;
pub(crate) use self::pace::Pace;
pub(crate) use self::throttle::Throttle;
