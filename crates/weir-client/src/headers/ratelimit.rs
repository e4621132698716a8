//! The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers), as weir's gateway
//! writes them: `RateLimit-Policy: "api";q=100;w=60` (limit `q` per `w` seconds) and
//! `RateLimit: "api";r=19;t=1` (`r` left, `t` seconds until the quota is full again),
//! one list item per policy, matched by name. Both are structured-field lists, read
//! with `sfv`; an unreadable field, or an item without integer `r` and `t`, is
//! ignored, never an error.

use std::time::Duration;

use http::HeaderMap;
use sfv::{BareItem, List, ListEntry, Parameters, Parser};

/// One policy's state, from `RateLimit` and (when it names the same policy)
/// `RateLimit-Policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quota {
    /// `r`: units left.
    pub(crate) remaining: u64,
    /// `t`: until the quota is full again.
    pub(crate) reset: Duration,
    /// `q` and `w`: the limit per window, when the policy was given.
    pub(crate) limit: Option<(u64, Duration)>,
}

/// The quotas an answer reports.
pub(crate) fn quotas(headers: &HeaderMap) -> Vec<Quota> {
    let policies = items(headers, "ratelimit-policy");
    items(headers, "ratelimit")
        .into_iter()
        .filter_map(|(name, params)| {
            let remaining = integer(&params, "r")?;
            let reset = Duration::from_secs(integer(&params, "t")?);
            let limit = policies
                .iter()
                .find(|(policy, _)| *policy == name)
                .and_then(|(_, p)| Some((integer(p, "q")?, Duration::from_secs(integer(p, "w")?))))
                .filter(|(q, w)| *q > 0 && !w.is_zero());
            Some(Quota {
                remaining,
                reset,
                limit,
            })
        })
        .collect()
}

/// The named items of a list field (all its lines, as one list), with their
/// parameters; an unreadable field has none.
fn items(headers: &HeaderMap, name: &str) -> Vec<(String, Parameters)> {
    let lines: Vec<&str> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if lines.is_empty() {
        return Vec::new();
    }
    let Ok(list) = Parser::new(&lines.join(", ")).parse::<List>() else {
        return Vec::new();
    };
    list.into_iter()
        .filter_map(|entry| match entry {
            ListEntry::Item(item) => {
                let name = match &item.bare_item {
                    BareItem::String(s) => s.as_str().to_owned(),
                    BareItem::Token(t) => t.as_str().to_owned(),
                    _ => return None,
                };
                Some((name, item.params))
            }
            ListEntry::InnerList(_) => None,
        })
        .collect()
}

/// A non-negative integer parameter.
fn integer(params: &Parameters, key: &str) -> Option<u64> {
    let value = params.get(key)?.as_integer()?;
    u64::try_from(i64::from(value)).ok()
}

/// The wait a refusal's RateLimit fields imply: the longest `t` of the quotas with
/// nothing left (`None` when none is empty).
pub(crate) fn exhausted_reset(quotas: &[Quota]) -> Option<Duration> {
    quotas
        .iter()
        .filter(|q| q.remaining == 0)
        .map(|q| q.reset)
        .max()
}

/// How to space the next requests when a quota runs low, and for how long: for each
/// quota with less than `below` of its limit left (or nothing left, when its limit is
/// unknown), the limit's own rate (`w / q`) when the policy is known, else what is
/// left spread over the reset (`t / (r + 1)`); the slowest of them, until the latest
/// reset. `None` when no quota is low.
pub(crate) fn pacing(quotas: &[Quota], below: f64) -> Option<(Duration, Duration)> {
    quotas
        .iter()
        .filter_map(|q| {
            let interval = match q.limit {
                Some((limit, window)) => {
                    if (q.remaining as f64) >= below * limit as f64 {
                        return None;
                    }
                    window / u32::try_from(limit).unwrap_or(u32::MAX)
                }
                None if q.remaining == 0 => q.reset,
                None => return None,
            };
            Some((interval, q.reset))
        })
        .fold(
            None,
            |slowest: Option<(Duration, Duration)>, (interval, reset)| {
                Some(match slowest {
                    None => (interval, reset),
                    Some((i, r)) => (i.max(interval), r.max(reset)),
                })
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(fields: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in fields {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn weirs_fields_are_read_item_by_item() {
        let h = headers(&[
            (
                "ratelimit-policy",
                r#""login-account-ip";q=5;w=900, "login-ip";q=50;w=900"#,
            ),
            (
                "ratelimit",
                r#""login-account-ip";r=0;t=900, "login-ip";r=49;t=900"#,
            ),
        ]);
        assert_eq!(
            quotas(&h),
            [
                Quota {
                    remaining: 0,
                    reset: S(900),
                    limit: Some((5, S(900)))
                },
                Quota {
                    remaining: 49,
                    reset: S(900),
                    limit: Some((50, S(900)))
                },
            ]
        );
        assert_eq!(exhausted_reset(&quotas(&h)), Some(S(900)));
    }

    #[test]
    fn an_upstreams_items_on_another_line_and_tokens_count_too() {
        let h = headers(&[
            ("ratelimit", "upstream;r=3;t=1"),
            ("ratelimit", r#""api";r=0;t=12"#),
        ]);
        let q = quotas(&h);
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].limit, None);
        assert_eq!(exhausted_reset(&q), Some(S(12)));
    }

    #[test]
    fn garbage_is_ignored() {
        for value in [
            "",
            "api",
            r#""api";r=-1;t=5"#,
            r#""api";r=1.5;t=5"#,
            r#""api";r=1"#,
            r#""api";r=1;t="5""#,
            "(a b);r=0;t=1",
            r#""unterminated;r=0;t=1"#,
            "\"api\";r=0;t=99999999999999999999",
        ] {
            assert_eq!(quotas(&headers(&[("ratelimit", value)])), [], "{value}");
        }
        // A policy that cannot be read leaves the state usable.
        let h = headers(&[("ratelimit-policy", "q=="), ("ratelimit", r#""a";r=0;t=3"#)]);
        assert_eq!(quotas(&h)[0].limit, None);
        let h = headers(&[
            ("ratelimit-policy", r#""a";q=0;w=60"#),
            ("ratelimit", r#""a";r=0;t=3"#),
        ]);
        assert_eq!(quotas(&h)[0].limit, None, "a zero limit is no rate");
    }

    #[test]
    fn pacing_starts_below_a_fraction_of_the_limit_at_the_limits_rate() {
        let q = |r, t, limit| Quota {
            remaining: r,
            reset: S(t),
            limit,
        };
        // 100 a minute: 600 ms apart, for the reset.
        assert_eq!(
            pacing(&[q(9, 2, Some((100, S(60))))], 0.1),
            Some((Duration::from_millis(600), S(2)))
        );
        assert_eq!(pacing(&[q(10, 2, Some((100, S(60))))], 0.1), None);
        // No policy: only an empty quota paces, over its reset.
        assert_eq!(pacing(&[q(0, 3, None)], 0.1), Some((S(3), S(3))));
        assert_eq!(pacing(&[q(1, 3, None)], 0.1), None);
        // The slowest low quota wins.
        let both = [q(0, 1, Some((10, S(1)))), q(0, 5, Some((1, S(2))))];
        assert_eq!(pacing(&both, 0.1), Some((S(2), S(5))));
        // A huge limit does not divide by zero.
        assert_eq!(
            pacing(&[q(0, 1, Some((u64::MAX, S(1))))], 0.1).map(|p| p.1),
            Some(S(1))
        );
    }
}
