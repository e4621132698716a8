//! Reading what a server says about waiting: `Retry-After` and the RateLimit fields.

mod ratelimit;
mod retry_after;

pub(crate) use self::ratelimit::{exhausted_reset, pacing, quotas};
pub(crate) use self::retry_after::retry_after;

#[cfg(test)]
mod tests {
    //! Whatever a server sends, reading it does not panic.

    use std::time::{Duration, SystemTime};

    use http::{HeaderMap, HeaderValue};
    use proptest::prelude::*;

    use super::*;

    /// Field values: arbitrary bytes, and near misses of the real forms.
    fn value() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64),
            "[0-9]{0,40}".prop_map(String::into_bytes),
            r#"("[a-z]{0,3}"|[a-z]{1,3})(;[qwrt]=-?[0-9]{0,18}){0,4}(, ?("[a-z]{0,3}"|[a-z]{1,3})(;[qwrt]=-?[0-9]{0,18}){0,4}){0,3}"#
                .prop_map(String::into_bytes),
            "[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT"
                .prop_map(String::into_bytes),
        ]
    }

    fn wall() -> impl Strategy<Value = SystemTime> {
        prop_oneof![
            Just(SystemTime::UNIX_EPOCH),
            (0u64..=u64::from(u32::MAX) * 8)
                .prop_map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s)),
        ]
    }

    proptest! {
        #[test]
        fn no_field_value_makes_reading_panic(
            fields in proptest::collection::vec((0usize..3, value()), 0..6),
            wall in wall(),
            below in 0.0f64..=1.0,
        ) {
            let mut headers = HeaderMap::new();
            for (name, bytes) in &fields {
                let name = ["retry-after", "ratelimit", "ratelimit-policy"][*name];
                if let Ok(value) = HeaderValue::from_bytes(bytes) {
                    headers.append(name, value);
                }
            }
            let _ = retry_after(&headers, wall);
            let quotas = quotas(&headers);
            let _ = exhausted_reset(&quotas);
            let _ = pacing(&quotas, below);
        }
    }
}
