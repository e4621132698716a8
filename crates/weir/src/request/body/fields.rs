//! The field looked for, and how names are compared with it: exactly, and once
//! normalised, as apps binding case-insensitively compare them.

use std::cell::Cell;

use super::{BodyError, MAX_UNICODE_NAMES};
use crate::request::identity_text::normalize_identity;

/// The field looked for, in the forms names are compared in.
pub(super) struct FieldName<'a> {
    pub(super) text: &'a str,
    key: Option<String>,
    /// Names with non-ASCII characters compared so far.
    pub(super) unicode_names: Cell<usize>,
}

impl<'a> FieldName<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Self {
            text,
            key: normalize_identity(text).ok(),
            unicode_names: Cell::new(0),
        }
    }

    /// Whether a key names this field, exactly or once both are normalised.
    pub(super) fn is(&self, key: &str) -> Result<bool, BodyError> {
        if key == self.text {
            return Ok(true);
        }
        let Some(want) = &self.key else {
            return Ok(false);
        };
        if key.is_ascii() {
            return Ok(ascii_key_is(key, want));
        }
        let seen = self.unicode_names.get() + 1;
        if seen > MAX_UNICODE_NAMES {
            return Err(BodyError::TooManyUnicodeNames);
        }
        self.unicode_names.set(seen);
        Ok(normalize_identity(key).is_ok_and(|k| k == *want))
    }

    /// Whether a form name names this field: as a JSON key does, or after PHP's renaming
    /// of `.` and ` ` to `_`; `Some(true)` when it does with brackets (`email[]`).
    pub(super) fn in_form(&self, name: &str) -> Result<Option<bool>, BodyError> {
        let (base, bracketed) = match name.find('[') {
            Some(i) if i > 0 => (&name[..i], true),
            _ => (name, false),
        };
        let named = self.is(base)?
            || (base.contains(['.', ' ']) && self.is(&base.replace(['.', ' '], "_"))?);
        Ok(named.then_some(bracketed))
    }
}

/// [`normalize_identity`] of an ASCII `key` equals `want`, without allocating: ASCII
/// controls removed, White_Space trimmed, letters compared without case.
pub(super) fn ascii_key_is(key: &str, want: &str) -> bool {
    let trimmed = key.trim_matches(|c: char| c.is_ascii_control() || c.is_whitespace());
    let mut kept = trimmed.bytes().filter(|b| !b.is_ascii_control());
    let mut wanted = want.bytes();
    loop {
        match (kept.next(), wanted.next()) {
            (None, None) => return true,
            (Some(k), Some(w)) if k.to_ascii_lowercase() == w => {}
            _ => return false,
        }
    }
}
