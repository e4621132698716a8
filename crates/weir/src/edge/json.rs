//! Reading a JSON request body, with errors in weir's words: which field, what it must
//! be, and what the body should look like, never serde's own ("expected ident at line
//! 1 column 2", "invalid type: floating point `1.5`, expected u64").

use serde::Deserialize;

use super::Problem;

/// `bytes` read as a `T`, or a 400 saying what is wrong. `what` names the request (`a
/// check`), `example` shows a good body.
pub(crate) fn read<'b, T: Deserialize<'b>>(
    bytes: &'b [u8],
    what: &str,
    example: &str,
) -> Result<T, Problem> {
    // serde would also read a struct from a list of its fields in order (`["api",
    // "user-42"]`); every body here is an object, as the OpenAPI document says.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|&b| b != b'{') {
        return Err(Problem::invalid_request(format!(
            "the body of {what} must be a JSON object, like {example}"
        )));
    }
    // Read plainly first: tracking the path to a field costs as much again as the
    // reading, and only an error needs it.
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    if let Ok(value) = T::deserialize(&mut reader)
        && reader.end().is_ok()
    {
        return Ok(value);
    }
    // The same reading again, for the field at fault.
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut reader).map_err(|error| {
        let field = error.path().to_string();
        Problem::invalid_request(explain(error.inner(), &field, what, example))
    })?;
    // Nothing but white space after the object.
    reader
        .end()
        .map_err(|error| Problem::invalid_request(explain(&error, ".", what, example)))?;
    Ok(value)
}

/// What is wrong, for a person: the field at fault (`.` when it is the body itself) and
/// what it must be.
fn explain(error: &serde_json::Error, field: &str, what: &str, example: &str) -> String {
    use serde_json::error::Category;
    let at = format!("line {}, column {}", error.line(), error.column());
    match error.classify() {
        Category::Syntax => {
            format!("the body of {what} is not valid JSON ({at}); send an object like {example}")
        }
        Category::Eof => format!(
            "the body of {what} ends before its JSON does ({at}); send an object like {example}"
        ),
        Category::Io | Category::Data => data(&error.to_string(), field, what, example),
    }
}

/// A body that is JSON but not the request: serde's message (`missing field `key``,
/// `unknown field `x`, expected one of ...`, `invalid type: string "5", expected u64`)
/// said again in weir's words.
fn data(message: &str, field: &str, what: &str, example: &str) -> String {
    // serde_json appends " at line L column C"; the field names the place better.
    let message = message.rsplit_once(" at line ").map_or(message, |(m, _)| m);
    let within = |name: &str| match field {
        "." | "" => format!("`{name}`"),
        parent => format!("`{parent}.{name}`"),
    };
    if let Some(name) = quoted_after(message, "missing field ") {
        return format!("{} is required in {what}, like {example}", within(name));
    }
    if quoted_after(message, "unknown field ").is_some() {
        // The path ends with the unknown field itself.
        let known = message
            .split_once(", expected ")
            .map(|(_, list)| {
                let list = list.strip_prefix("one of ").unwrap_or(list);
                format!("; the fields are {}", list.replace('`', ""))
            })
            .unwrap_or_default();
        return format!("`{field}` is not a field of {what}{known}");
    }
    if let Some((found, expected)) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|m| m.split_once(", expected "))
    {
        let expected = in_words(expected);
        return match field {
            "." | "" => format!("the body of {what} must be {expected}, like {example}"),
            field => format!("`{field}` must be {expected}, not {found}"),
        };
    }
    match field {
        "." | "" => {
            format!("the body of {what} is not one: {message}; send an object like {example}")
        }
        field => format!("`{field}`: {message}"),
    }
}

/// The name in backticks right after `prefix` in `message`.
fn quoted_after<'m>(message: &'m str, prefix: &str) -> Option<&'m str> {
    message
        .strip_prefix(prefix)?
        .strip_prefix('`')?
        .split('`')
        .next()
}

/// serde's name of an expected type, in words.
fn in_words(expected: &str) -> String {
    match expected {
        "u64" => "a whole number, 0 or more".to_owned(),
        "u16" => "a whole number from 0 to 65535".to_owned(),
        "a boolean" | "a string" => expected.to_owned(),
        "IP address" => "an IP address (IPv4 or IPv6)".to_owned(),
        "a map" => "an object".to_owned(),
        "a sequence" => "a list".to_owned(),
        other if other.starts_with("struct ") => "an object".to_owned(),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::read;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only read")]
    struct Check {
        rule: String,
        key: String,
        #[serde(default)]
        cost: u64,
        #[serde(default)]
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only read")]
    struct Inner {
        on: bool,
    }

    fn detail(body: &str) -> String {
        let problem = read::<Check>(body.as_bytes(), "a check", r#"{"rule": "api"}"#).unwrap_err();
        format!("{problem:?}")
    }

    #[test]
    fn each_mistake_is_told_in_weirs_words() {
        let cases = [
            (
                "{rule}",
                "the body of a check is not valid JSON (line 1, column 2); send an object like {\"rule\": \"api\"}",
            ),
            (
                r#"{"rule": "api""#,
                "the body of a check ends before its JSON does (line 1, column 14)",
            ),
            (r#"{"rule": "api"}"#, "`key` is required in a check, like"),
            (
                r#"{"rule": "api", "key": "k", "kye": 1}"#,
                "`kye` is not a field of a check; the fields are rule, key, cost, inner",
            ),
            (
                r#"{"rule": "api", "key": "k", "cost": 1.5}"#,
                "`cost` must be a whole number, 0 or more, not floating point `1.5`",
            ),
            (
                r#"{"rule": "api", "key": "k", "cost": -1}"#,
                "`cost` must be a whole number, 0 or more, not integer `-1`",
            ),
            (
                r#"{"rule": 5, "key": "k"}"#,
                "`rule` must be a string, not integer `5`",
            ),
            (
                r#"{"rule": "a", "key": "k", "inner": {"on": "yes"}}"#,
                "`inner.on` must be a boolean, not string \"yes\"",
            ),
            (
                r#"{"rule": "a", "key": "k", "inner": {"of": true}}"#,
                "`inner.of` is not a field of a check; the fields are on",
            ),
            ("[1]", "the body of a check must be a JSON object, like"),
            (
                r#"["api", "k"]"#,
                "the body of a check must be a JSON object, like",
            ),
            ("", "the body of a check ends before its JSON does"),
            (
                r#"{"rule": "a", "key": "k"} x"#,
                "the body of a check is not valid JSON (line 1, column 27)",
            ),
        ];
        for (body, expected) in cases {
            let detail = detail(body);
            // As `Debug` writes it: quotes escaped.
            let expected = format!("{expected:?}");
            let expected = &expected[1..expected.len() - 1];
            assert!(detail.contains(expected), "{body}: {detail}");
            assert!(
                !detail.contains("expected ident") && !detail.contains("u64"),
                "{body}: {detail}"
            );
        }
    }
}
