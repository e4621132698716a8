//! A rule's key for one caller: the identities it names, each worked out once per
//! request, tagged and joined so that different identities never make the same key.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::Write;

use sha2::{Digest, Sha256};
use weir_core::Clock;

use super::identity::Identity;
use super::{CLIENT_IP, Routing};
use crate::request::{Facts, Refused, ip_key};

/// The identities of one request, each worked out at most once (a JWT is verified
/// once however many rules key on it). The first identity that cannot be read one way
/// is kept, and refuses the request.
pub(super) struct Identities<'s, 'f> {
    routing: &'s Routing,
    facts: &'f Facts<'f>,
    /// Whose wall time tokens are verified at, read only when one is.
    clock: &'s dyn Clock,
    known: RefCell<Vec<(&'s str, Option<Identity>)>>,
    refused: RefCell<Option<Refused>>,
}

/// A rule's key for one caller.
pub(super) struct CallerKey {
    /// The key.
    pub(super) key: String,
    /// Whether every identity in it was written exactly so (see [`Identity::exact`]).
    pub(super) exact: bool,
}

/// Keys longer than this are kept as a hash: a state per key costs memory in
/// proportion to it, and identities may be up to 1 KiB each.
const MAX_KEY_BYTES: usize = 128;

impl<'s, 'f> Identities<'s, 'f> {
    pub(super) fn new(routing: &'s Routing, facts: &'f Facts<'f>, clock: &'s dyn Clock) -> Self {
        Self {
            routing,
            facts,
            clock,
            known: RefCell::new(Vec::new()),
            refused: RefCell::new(None),
        }
    }

    /// The named identity of the caller, if the request carries it (one that cannot be
    /// read is `None` here, and remembered for [`Identities::refused`]).
    pub(super) fn get(&self, name: &str) -> Option<String> {
        self.identity(name).map(|i| i.value)
    }

    fn identity(&self, name: &str) -> Option<Identity> {
        if name == CLIENT_IP {
            return Some(Identity {
                value: self.client_ip(),
                exact: true,
            });
        }
        if let Some((_, value)) = self.known.borrow().iter().find(|(n, _)| *n == name) {
            return value.clone();
        }
        let (name, source) = self.routing.identities.get_key_value(name)?;
        let value = match source.identify(*self.facts, self.routing.ipv6_prefix, self.clock) {
            Ok(value) => value,
            Err(refused) => {
                self.refused.borrow_mut().get_or_insert(refused);
                None
            }
        };
        self.known.borrow_mut().push((name, value.clone()));
        value
    }

    /// The client's address as keys hold it (IPv6 by its configured prefix).
    fn client_ip(&self) -> String {
        ip_key(self.facts.client_ip, self.routing.ipv6_prefix)
    }

    /// The key of a rule keyed on `names`: the identities tagged and joined; a caller
    /// lacking one of them is counted by IP address (anonymous traffic). A long key is
    /// kept as `#` and its SHA-256.
    pub(super) fn key(&self, names: &[String]) -> CallerKey {
        let mut key = String::new();
        let mut exact = true;
        for name in names {
            let Some(identity) = self.identity(name) else {
                key.clear();
                key.push_str(CLIENT_IP);
                key.push('=');
                key.push_str(&self.client_ip());
                return CallerKey { key, exact: true };
            };
            exact &= identity.exact;
            push_tagged(&mut key, name, &identity.value);
        }
        CallerKey {
            key: stored(key),
            exact,
        }
    }

    /// Why the request is refused, if an identity could not be read.
    pub(super) fn refused(self) -> Option<Refused> {
        self.refused.into_inner()
    }
}

/// A key as the store holds it: a long one as `#` and its SHA-256 (see
/// [`stored_form`]).
pub(super) fn stored(key: String) -> String {
    match stored_form(&key) {
        Cow::Borrowed(_) => key,
        Cow::Owned(changed) => changed,
    }
}

/// [`stored`] for a borrowed key: borrowed back unless it is long or starts with `#`.
///
/// A key longer than [`MAX_KEY_BYTES`] is kept as `#` and its SHA-256 in hex. Any
/// string can be a literal key (`/v1/check` takes any JSON string, a header or JWT
/// claim any value), so a literal key starting with `#` is kept with one more `#` in
/// front: the second character then tells the forms apart (a hex digit only after a
/// hash, `#` only after a literal), and no caller can name a long key's budget by
/// sending its hash.
pub(super) fn stored_form(key: &str) -> Cow<'_, str> {
    if key.len() > MAX_KEY_BYTES {
        let mut hashed = String::with_capacity(65);
        hashed.push(HASHED);
        for byte in Sha256::digest(key.as_bytes()) {
            let _ = write!(hashed, "{byte:02x}");
        }
        return Cow::Owned(hashed);
    }
    if key.starts_with(HASHED) {
        return Cow::Owned(format!("{HASHED}{key}"));
    }
    Cow::Borrowed(key)
}

/// What a stored key starts with when it is a hash.
const HASHED: char = '#';

/// The key of a rule keyed on the one identity `name` whose value is `value`: what a
/// store sees as the key's identity (a simulation routes it to a shard so).
#[cfg(feature = "simulate")]
pub(crate) fn single_identity_key(name: &str, value: &str) -> String {
    let mut key = String::new();
    push_tagged(&mut key, name, value);
    stored(key)
}

/// Appends `name=value` to a key, `&`-separated, with `%` and `&` in the value escaped,
/// so that different lists of identities never make the same key.
pub(super) fn push_tagged(key: &mut String, name: &str, value: &str) {
    // Room for the pair at once (escapes aside), not grown piece by piece.
    key.reserve(name.len() + value.len() + 2);
    if !key.is_empty() {
        key.push('&');
    }
    key.push_str(name);
    key.push('=');
    for part in value.split_inclusive(['%', '&']) {
        match part.strip_suffix(['%', '&']) {
            Some(plain) => {
                key.push_str(plain);
                key.push_str(if part.ends_with('%') { "%25" } else { "%26" });
            }
            None => key.push_str(part),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{push_tagged, stored_form};

    fn key_of(identities: &[(&str, String)]) -> String {
        let mut key = String::new();
        for (name, value) in identities {
            push_tagged(&mut key, name, value);
        }
        key
    }

    #[test]
    fn values_are_escaped() {
        let key = key_of(&[("user", "a&b%c".into()), ("client_ip", "::1".into())]);
        assert_eq!(key, "user=a%26b%25c&client_ip=::1");
    }

    #[test]
    fn a_long_keys_hash_sent_as_a_key_is_another_key() {
        let long = "k".repeat(200);
        let hashed = stored_form(&long).into_owned();
        assert_eq!((hashed.len(), &hashed[..1]), (65, "#"));
        assert_ne!(stored_form(&hashed), hashed.as_str());
        assert_eq!(stored_form("#abc"), "##abc");
        assert_eq!(stored_form("user-42"), "user-42");
    }

    proptest! {
        /// Different keys are stored differently, long or short, `#` or not.
        #[test]
        fn stored_keys_are_distinct(
            a in "#{0,3}[a-f0-9#]{0,4}",
            b in "#{0,3}[a-f0-9#]{0,4}",
            long in 0..3usize,
        ) {
            // Either may be long (hashed), either may be a hash written literally.
            let long_key = "x".repeat(129) + &a;
            let a = match long { 0 => long_key.clone(), _ => a };
            let b = match long { 2 => stored_form(&long_key).into_owned(), _ => b };
            prop_assert_eq!(a == b, stored_form(&a) == stored_form(&b));
        }
    }

    proptest! {
        /// A value holding `&name=` cannot pass for a second identity, nor an escape
        /// for the character it stands for.
        #[test]
        fn keys_are_injective(
            a in proptest::collection::vec("[a-c&%=]{0,6}", 2),
            b in proptest::collection::vec("[a-c&%=]{0,6}", 2),
        ) {
            let names = ["user", "route"];
            let a: Vec<(&str, String)> = names.iter().copied().zip(a).collect();
            let b: Vec<(&str, String)> = names.iter().copied().zip(b).collect();
            prop_assert_eq!(a == b, key_of(&a) == key_of(&b));
        }
    }
}
