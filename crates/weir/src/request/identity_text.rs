//! The one rule by which identity texts (a login email, a username) become keys.
//!
//! # The rule
//!
//! A text is keyed as `trim(fold(text))`, where `fold` repeats, until nothing changes:
//!
//! 1. remove every character of general category Cc (controls: NUL, CR, LF, DEL...),
//!    Cf (format: U+FEFF BOM, U+200B zero width space, U+200D ZWJ, U+00AD soft hyphen,
//!    bidi marks...) or with the property Default_Ignorable_Code_Point (variation
//!    selectors, U+034F, Hangul fillers);
//! 2. NFKC (compatibility composition: full-width `ａ` is `a`, the ligature `ﬁ` is
//!    `fi`, `ℌ` is `H`, a decomposed `é` is the composed one);
//! 3. full Unicode case folding (CaseFolding.txt, statuses C and F, no Turkic
//!    mappings: `ß` is `ss`, `Σ`/`ς`/`σ` are one, `İ` is `i̇`).
//!
//! and `trim` removes White_Space characters at both ends (spaces inside are kept). A
//! text that is empty after this is refused ([`IdentityTextError::Empty`]).
//!
//! # Why
//!
//! A limit per account holds only if every spelling the app reads as one account gives
//! one key: apps and their databases compare emails case-insensitively (often with
//! Unicode-aware collations), and an attacker who can spread guesses over `Ana@x.io`,
//! `ANA@x.io`, `ana@x.io\u{200B}` and `ａｎａ@x.io` multiplies their budget. Folding
//! more than the app does only merges keys: two accounts the app tells apart may share a
//! budget, which is the safe direction. The rule is idempotent (applying it twice gives
//! the same key), which the tests check.
//!
//! Not folded: accents (`josé` and `jose` stay two keys, although accent-insensitive
//! database collations read them as one), provider-specific email rules (dots and
//! `+tags` of some mailbox providers), and the IDNA form of a domain (`bücher.de` and
//! `xn--bcher-kva.de` are two keys). No syntax check is made: an email the app would
//! refuse is still keyed, so the caller's attempts count.
//!
//! Unicode data comes from ICU4X, one version for normalisation, case folding and
//! character properties.

use icu_casemap::CaseMapper;
use icu_normalizer::ComposingNormalizerBorrowed;
use icu_properties::props::{DefaultIgnorableCodePoint, GeneralCategory};
use icu_properties::{CodePointMapData, CodePointSetData};

/// Why an identity text cannot be keyed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum IdentityTextError {
    /// Nothing is left once invisible characters and surrounding spaces are removed.
    #[error("the identity is empty once spaces and invisible characters are removed")]
    Empty,
}

/// The key form of an identity text, by the rule in the [module docs](self).
pub(super) fn normalize_identity(text: &str) -> Result<String, IdentityTextError> {
    let key = if text.is_ascii() {
        fold_ascii(text)
    } else {
        fold(text)
    };
    let trimmed = key.trim();
    if trimmed.is_empty() {
        return Err(IdentityTextError::Empty);
    }
    if trimmed.len() == key.len() {
        Ok(key)
    } else {
        Ok(trimmed.to_owned())
    }
}

/// The rule for ASCII text, where it comes down to removing controls and lower-casing
/// (ASCII has no format or ignorable characters, NFKC leaves it as it is, and its case
/// folding is `A-Z` to `a-z`): most identities and JSON keys take this
/// path, so a body of many keys costs little to read.
fn fold_ascii(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_ascii_control())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn fold(text: &str) -> String {
    let mut current = fold_once(text);
    // Each round only shrinks the set of texts it can change; in practice the second
    // round already changes nothing, but looping keeps the rule idempotent by
    // construction.
    for _ in 0..4 {
        let next = fold_once(&current);
        if next == current {
            break;
        }
        current = next;
    }
    current
}

/// The key form of an email: the same rule as [`normalize_identity`].
///
/// Kept as its own name so that configuration (`normalize: email`) reads as what it
/// means, and so that an email-only step could be added in one place; today there is
/// none, on purpose (see the [module docs](self) for what is not folded).
pub(crate) fn normalize_email(text: &str) -> Result<String, IdentityTextError> {
    normalize_identity(text)
}

fn fold_once(text: &str) -> String {
    let stripped: String = text.chars().filter(|&c| !invisible(c)).collect();
    let composed = ComposingNormalizerBorrowed::new_nfkc().normalize(&stripped);
    let folded = CaseMapper::new().fold_string(&composed);
    ComposingNormalizerBorrowed::new_nfkc()
        .normalize(&folded)
        .into_owned()
}

/// Controls, format characters and default-ignorable code points: never visible, so
/// never a difference a person could see between two identities.
fn invisible(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    matches!(
        CodePointMapData::<GeneralCategory>::new().get(c),
        GeneralCategory::Control | GeneralCategory::Format
    ) || CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(text: &str) -> String {
        normalize_identity(text).unwrap()
    }

    #[test]
    fn spellings_of_one_email_give_one_key() {
        for spelling in [
            "ana@x.io",
            "Ana@X.io",
            "ANA@X.IO",
            " ana@x.io ",
            "\tana@x.io\r\n",
            "\u{FEFF}ana@x.io",
            "an\u{200B}a@x.io",
            "a\u{00AD}na@x.io",
            "ana\u{200D}@x.io",
            "ana@x.io\u{0000}",
            "ana@x.io\u{007F}",
            "\u{FF41}\u{FF4E}\u{FF41}@x.io", // full-width letters
            "ana\u{FF20}x.io",               // full-width @
            "\u{3000}ana@x.io\u{3000}",      // ideographic spaces
            "\u{00A0}ana@x.io",              // no-break space
            "ana@x.io\u{FE0F}",              // a variation selector
            "\u{202E}ana@x.io",              // a bidi override
        ] {
            assert_eq!(key(spelling), "ana@x.io", "{spelling:?}");
        }
    }

    #[test]
    fn full_case_folding_and_compatibility_forms() {
        assert_eq!(key("Straße@x.io"), "strasse@x.io");
        assert_eq!(key("STRASSE@x.io"), "strasse@x.io");
        assert_eq!(key("ΣΊΣΥΦΟΣ"), key("σίσυφος"));
        assert_eq!(key("ς"), "σ");
        assert_eq!(key("ﬁle"), "file");
        assert_eq!(key("ℌello"), "hello");
        assert_eq!(key("K"), "k"); // U+212A KELVIN SIGN
        assert_eq!(key("Å"), "å"); // U+212B ANGSTROM SIGN
        assert_eq!(key("e\u{0301}"), "\u{00E9}"); // decomposed é composes
        assert_eq!(key("\u{00C9}"), "\u{00E9}");
        assert_eq!(key("①"), "1");
        assert_eq!(key("İ"), "i\u{0307}");
    }

    #[test]
    fn what_is_not_folded_stays_apart() {
        assert_ne!(key("josé@x.io"), key("jose@x.io"));
        assert_ne!(key("a.na@gmail.com"), key("ana@gmail.com"));
        assert_ne!(key("ana+x@x.io"), key("ana@x.io"));
        assert_eq!(key("ana  b"), "ana  b"); // inner spaces are kept
    }

    #[test]
    fn empty_identities_are_refused() {
        for text in [
            "",
            " ",
            "\u{200B}",
            "\u{FEFF} \u{3000}",
            "\u{0000}\u{0001}",
            "\u{FE0F}",
        ] {
            assert_eq!(
                normalize_identity(text),
                Err(IdentityTextError::Empty),
                "{text:?}"
            );
        }
        assert_eq!(normalize_email(" "), Err(IdentityTextError::Empty));
        assert_eq!(normalize_email("A@B"), Ok("a@b".into()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn normalising_twice_is_normalising_once(text in any::<String>()) {
            if let Ok(once) = normalize_identity(&text) {
                prop_assert_eq!(normalize_identity(&once), Ok(once.clone()));
            }
        }

        #[test]
        fn the_ascii_path_is_the_rule(text in "[\\x00-\\x7F]{0,40}") {
            prop_assert_eq!(fold_ascii(&text), fold(&text));
        }

        #[test]
        fn case_and_invisible_characters_never_split_a_key(
            text in "[a-zA-Z0-9@._+-]{1,30}",
            upper in any::<bool>(),
            zwsp_at in 0usize..31,
        ) {
            let mut variant: String = if upper { text.to_uppercase() } else { text.to_lowercase() };
            let at = variant.char_indices().nth(zwsp_at).map_or(variant.len(), |(i, _)| i);
            variant.insert(at, '\u{200B}');
            prop_assert_eq!(normalize_identity(&variant), normalize_identity(&text));
        }
    }
}
