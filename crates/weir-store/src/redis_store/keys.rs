//! Redis key names: `<prefix>:{<identity>}:<rule>`, `<prefix>:{<identity>}w<n>:<rule>`
//! for the count of a fixed window's n-th window (on the instances' clocks, see
//! `counter`), and `<prefix>:{<identity>}c<start>:<rule>` for the count of a calendar's
//! window starting at `start` (us since the epoch): nothing but `:` follows the hash
//! tag in the first form, and a letter in the others, so none meet, whatever the
//! rule's name.
//!
//! The identity sits inside a hash tag, so that every rule of one identity lives in one
//! slot of a Redis Cluster and a request's limits are checked in one script. Since an
//! identity is whatever a client sent, it is encoded so that no input can leave its tag
//! or reach another identity's name: bytes outside a plain alphabet (braces, colons,
//! `%`, spaces, control characters, anything non-ASCII) are percent-encoded, which is
//! injective; an identity whose encoding would exceed [`MAX_PLAIN`] bytes is replaced
//! by `#` and its SHA-256 in hex (`#` never appears in an encoded identity), so keys
//! stay short whatever the input.

use std::fmt::Write;

use sha2::{Digest, Sha256};

use crate::Key;

/// The longest encoded identity kept as is.
pub(crate) const MAX_PLAIN: usize = 128;

/// The Redis key for `key`, or for its count in the window `window` names (a letter
/// and a number, see `ScriptPolicy::key_window`).
pub(crate) fn redis_key(prefix: &str, key: Key<'_>, window: Option<(char, u64)>) -> String {
    let mut out = String::with_capacity(prefix.len() + key.identity.len() + key.rule.len() + 24);
    out.push_str(prefix);
    out.push_str(":{");
    encode_identity(key.identity, &mut out);
    out.push('}');
    if let Some((letter, window)) = window {
        out.push(letter);
        out.push_str(itoa::Buffer::new().format(window));
    }
    out.push(':');
    out.push_str(key.rule);
    out
}

/// The key that remembers settlement `id` of `identity`'s keys (see
/// `Store::settle_all`): `<prefix>:{<identity>}settled:<id in hex>`, in the identity's
/// slot; `s` after the hash tag meets neither other form.
pub(crate) fn settlement_key(prefix: &str, identity: &str, id: u128) -> String {
    let mut out = String::with_capacity(prefix.len() + identity.len() + 48);
    out.push_str(prefix);
    out.push_str(":{");
    encode_identity(identity, &mut out);
    let _ = write!(out, "}}settled:{id:032x}");
    out
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag (what lies
/// between its first `{` and the next `}`, when that is not empty), else of the whole
/// key, modulo 16384, as Redis computes it.
pub fn hash_slot(key: &[u8]) -> u16 {
    let tag = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty());
    crc16::State::<crc16::XMODEM>::calculate(tag.unwrap_or(key)) % 16384
}

fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'@' | b'+' | b'=' | b'/')
}

fn encode_identity(identity: &str, out: &mut String) {
    let encoded_len: usize = identity
        .bytes()
        .map(|b| if is_plain(b) { 1 } else { 3 })
        .sum();
    if encoded_len > MAX_PLAIN {
        out.push('#');
        for byte in Sha256::digest(identity.as_bytes()) {
            let _ = write!(out, "{byte:02x}");
        }
        return;
    }
    for byte in identity.bytes() {
        if is_plain(byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_slots_are_redis_clusters() {
        // CRC16/XMODEM's check value, and slots `CLUSTER KEYSLOT` gives.
        assert_eq!(
            crc16::State::<crc16::XMODEM>::calculate(b"123456789"),
            0x31c3
        );
        // The examples of Redis's `CLUSTER KEYSLOT` page.
        assert_eq!(hash_slot(b"somekey"), 11058);
        assert_eq!(hash_slot(b"foo{hash_tag}"), 2515);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        // An empty tag, or a brace never closed: the whole key.
        let whole = |key: &[u8]| crc16::State::<crc16::XMODEM>::calculate(key) % 16384;
        assert_eq!(hash_slot(b"foo{}{bar}"), whole(b"foo{}{bar}"));
        assert_eq!(hash_slot(b"foo{bar"), whole(b"foo{bar"));
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
        // weir's keys: the identity's slot, whatever the rule.
        assert_eq!(hash_slot(key("alice").as_bytes()), hash_slot(b"alice"));
    }

    fn key(identity: &str) -> String {
        redis_key(
            "weir",
            Key {
                rule: "api",
                identity,
            },
            None,
        )
    }

    #[test]
    fn a_window_count_has_its_own_key() {
        let key = |rule, window| {
            redis_key(
                "weir",
                Key {
                    rule,
                    identity: "u",
                },
                window,
            )
        };
        assert_eq!(key("api", Some(('w', 29_933_880))), "weir:{u}w29933880:api");
        assert_ne!(key("api", Some(('w', 7))), key("api", Some(('w', 70))));
        // A rule named like a window's suffix still gets another key.
        assert_ne!(key("w7:api", None), key("api", Some(('w', 7))));
        assert_ne!(key(":api", None), key("api", Some(('w', 7))));
        // A calendar's window is named by its start, apart from the counters.
        assert_eq!(key("api", Some(('c', 7))), "weir:{u}c7:api");
        assert_ne!(key("api", Some(('c', 7))), key("api", Some(('w', 7))));
    }

    #[test]
    fn plain_identities_are_readable() {
        assert_eq!(key("user-42"), "weir:{user-42}:api");
        assert_eq!(key("ana@x.io"), "weir:{ana@x.io}:api");
    }

    #[test]
    fn nothing_leaves_the_hash_tag() {
        assert_eq!(key("a}:b{c"), "weir:{a%7D%3Ab%7Bc}:api");
        assert_eq!(key("x\r\ny"), "weir:{x%0D%0Ay}:api");
        assert_eq!(key("%7D"), "weir:{%257D}:api");
        assert_eq!(key("é"), "weir:{%C3%A9}:api");
        let long = key(&"k".repeat(10_000));
        assert_eq!(long.len(), "weir:{#}:api".len() + 64);
        assert!(long.starts_with("weir:{#"));
    }

    proptest::proptest! {
        #[test]
        fn any_identity_stays_in_one_bounded_hash_tag(a in ".{0,300}", b in ".{0,300}") {
            let (ka, kb) = (key(&a), key(&b));
            for k in [&ka, &kb] {
                proptest::prop_assert_eq!(k.matches('{').count(), 1);
                proptest::prop_assert_eq!(k.matches('}').count(), 1);
                let framed = k.ends_with("}:api") && k.starts_with("weir:{");
                proptest::prop_assert!(framed, "{}", k);
                let bounded = k.len() <= "weir:{}:api".len() + MAX_PLAIN;
                proptest::prop_assert!(bounded, "{}", k);
                let plain = !k.contains(['\n', '\r', ' ']);
                proptest::prop_assert!(plain, "{}", k);
            }
            proptest::prop_assert_eq!(ka == kb, a == b);
        }
    }

    #[test]
    fn distinct_identities_get_distinct_keys() {
        let identities = [
            "a",
            "A",
            "a:",
            "a%3A",
            "a}",
            "#",
            "%23",
            "",
            " ",
            "k".repeat(200).as_str().to_owned().leak(),
        ];
        let keys: std::collections::HashSet<_> = identities.iter().map(|i| key(i)).collect();
        assert_eq!(keys.len(), identities.len());
    }
}
