//! JSON bodies: strict RFC 8259, and stricter where parsers disagree (byte order marks,
//! lone surrogates, huge numbers, deep nesting, duplicate or case-variant keys).

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::fields::FieldName;
use super::{BodyError, MAX_DEPTH};

pub(super) fn json_field(body: &[u8], field: &FieldName<'_>) -> Result<Option<String>, BodyError> {
    if body.starts_with(b"\xEF\xBB\xBF") {
        return Err(BodyError::InvalidJson(
            "it starts with a byte order mark; send UTF-8 without one".into(),
        ));
    }
    if body.starts_with(b"\xFE\xFF")
        || body.starts_with(b"\xFF\xFE")
        || body.iter().take(4).any(|&b| b == 0)
    {
        return Err(BodyError::InvalidJson(
            "it is UTF-16 or UTF-32; send UTF-8".into(),
        ));
    }
    let text =
        std::str::from_utf8(body).map_err(|_| BodyError::InvalidJson("it is not UTF-8".into()))?;
    let state = RefCell::new(State::default());
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = Top {
        field,
        state: &state,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end());
    let state = state.into_inner();
    if let Some(problem) = state.problem {
        return Err(problem);
    }
    parsed.map_err(|e| BodyError::InvalidJson(e.to_string()))?;
    Ok(state.found)
}

/// What the walk over a JSON document found.
#[derive(Default)]
struct State {
    found: Option<String>,
    /// A refusal of ours, reported instead of the serde error that stopped the walk.
    problem: Option<BodyError>,
}

fn stop<E: de::Error>(state: &RefCell<State>, problem: BodyError) -> E {
    let message = problem.to_string();
    state.borrow_mut().problem = Some(problem);
    E::custom(message)
}

/// The document: looks for the field at the top level, walks everything.
struct Top<'a> {
    field: &'a FieldName<'a>,
    state: &'a RefCell<State>,
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<String>()? {
            let is_field = match self.field.is(&key) {
                Ok(is_field) => is_field,
                Err(problem) => return Err(stop(self.state, problem)),
            };
            if !is_field {
                map.next_value_seed(Walk {
                    depth: 2,
                    state: self.state,
                })?;
                continue;
            }
            if seen {
                return Err(stop(
                    self.state,
                    BodyError::AmbiguousField {
                        field: self.field.text.to_owned(),
                        why: "it appears more than once (keys are compared ignoring case and Unicode form)",
                    },
                ));
            }
            seen = true;
            let value = map.next_value_seed(FieldValue {
                field: self.field,
                state: self.state,
            })?;
            self.state.borrow_mut().found = Some(value);
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Walk {
            depth: 1,
            state: self.state,
        }
        .visit_seq(seq)
        .map(drop)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The field's value: a string, or a refusal.
struct FieldValue<'a> {
    field: &'a FieldName<'a>,
    state: &'a RefCell<State>,
}

impl<'de> DeserializeSeed<'de> for FieldValue<'_> {
    type Value = String;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        let state = self.state;
        let field = self.field.text;
        match deserializer.deserialize_any(Walk { depth: 2, state }) {
            Ok(Some(text)) => Ok(text),
            Ok(None) => Err(stop(state, BodyError::FieldNotString(field.to_owned()))),
            Err(e) => Err(e),
        }
    }
}

/// Any value, walked in full so that every string and number in the document is
/// checked; gives the text of a string.
struct Walk<'a> {
    depth: usize,
    state: &'a RefCell<State>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = Option<String>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Option<String>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(stop(self.state, BodyError::TooDeep));
        }
        while map.next_key::<String>()?.is_some() {
            map.next_value_seed(Walk {
                depth: self.depth + 1,
                state: self.state,
            })?;
        }
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<String>, A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(stop(self.state, BodyError::TooDeep));
        }
        while seq
            .next_element_seed(Walk {
                depth: self.depth + 1,
                state: self.state,
            })?
            .is_some()
        {}
        Ok(None)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Option<String>, E> {
        Ok(Some(text.to_owned()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Option<String>, E> {
        Ok(Some(text))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Option<String>, E> {
        // serde_json already refuses numbers out of a double's range; kept as a guard.
        if value.is_finite() {
            Ok(None)
        } else {
            Err(E::custom("a number is out of range"))
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
}
