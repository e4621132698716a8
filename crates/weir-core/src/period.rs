//! Periods as weir writes them everywhere a policy is named (configuration files,
//! `weir simulate` rule specs and durations): an integer and a unit (`500ms`, `10s`,
//! `1m`). Here, below every crate that reads one, so the text form is parsed once.

use std::fmt;
use std::time::Duration;

/// Why a period string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeriodError(String);

impl fmt::Display for PeriodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid period `{}`: expected an integer and a unit (ms, s, m, h, d), e.g. 500ms, 10s, 1m",
            self.0
        )
    }
}

impl std::error::Error for PeriodError {}

/// Parses `<integer><unit>`, the unit one of `ms`, `s`, `m`, `h`, `d`. Whether the
/// period suits a policy is [`Policy::new`](crate::Policy::new)'s to say.
pub fn parse_period(text: &str) -> Result<Duration, PeriodError> {
    let error = || PeriodError(text.to_owned());
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .filter(|&i| i > 0)
        .ok_or_else(error)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| error())?;
    let unit_millis: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(error()),
    };
    number
        .checked_mul(unit_millis)
        .map(Duration::from_millis)
        .ok_or_else(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        for (text, millis) in [
            ("500ms", 500),
            ("10s", 10_000),
            ("1m", 60_000),
            ("2h", 7_200_000),
            ("1d", 86_400_000),
        ] {
            assert_eq!(parse_period(text), Ok(Duration::from_millis(millis)));
        }
    }

    #[test]
    fn refuses_what_is_not_a_period() {
        for text in [
            "",
            "10",
            "m",
            "1.5s",
            "-1s",
            "1 s",
            "1min",
            "10S",
            "99999999999999999999d",
            "18446744073709551615d",
        ] {
            assert!(parse_period(text).is_err(), "{text:?}");
        }
    }
}
