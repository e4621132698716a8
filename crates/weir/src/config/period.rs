//! Periods as written in configuration: an integer and a unit (`500ms`, `10s`, `1m`),
//! parsed by `weir_core::parse_period`; here, what serde needs.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer};
pub(crate) use weir_core::PeriodError;
use weir_core::parse_period;

/// A period parsed from `<integer><unit>`, the unit one of `ms`, `s`, `m`, `h`, `d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Period(pub Duration);

impl std::str::FromStr for Period {
    type Err = PeriodError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_period(text).map(Period)
    }
}

impl<'de> Deserialize<'de> for Period {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = Period;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a period such as 500ms, 10s, 1m, 1h or 1d")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Period, E> {
                text.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}
