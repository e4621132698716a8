//! The service crate is a stack: each module uses only the modules below it (see
//! `src/lib.rs` and DESIGN.md). This scans the sources, test code left out, for every
//! `crate::<module>` a module names, and fails on any step up or sideways, so a door
//! can always be built on the engine alone.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::collections::BTreeSet;
use std::path::Path;

/// Each module's layer: a module may name only modules of a lower layer.
const LAYERS: &[(&str, u8)] = &[
    ("request", 1),
    ("metrics", 2),
    ("engine", 3),
    ("config", 4),
    ("edge", 4),
    ("gateway", 5),
    ("api", 5),
    ("admin", 5),
    ("server", 6),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|&(_, l)| l)
}

/// The source with `#[cfg(test)]` items (test modules) left out.
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // Skip the item that follows: one line ending in `;`, or a block to its
        // closing brace.
        let mut depth = 0i32;
        for item in lines.by_ref() {
            depth += item.matches('{').count() as i32 - item.matches('}').count() as i32;
            if depth <= 0 && (item.trim_end().ends_with(';') || item.trim_end().ends_with('}')) {
                break;
            }
        }
    }
    out
}

/// The top-level modules `text` names through `crate::`.
fn named(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let group = rest
            .strip_prefix('{')
            .map(|g| &g[..g.find('}').unwrap_or(g.len())]);
        let items: Vec<&str> = match group {
            Some(group) => group.split(',').collect(),
            None => vec![rest],
        };
        for item in items {
            let name: String = item
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            visit(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit(&src, &mut files);
    let mut steps = Vec::new();
    let mut seen = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let module = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        // Test files beside the code, and the binary and table of contents on top.
        if file.file_name().is_some_and(|n| n == "tests.rs")
            || matches!(module.as_str(), "main" | "lib")
        {
            continue;
        }
        let Some(own) = layer(&module) else {
            panic!(
                "{}: module `{module}` has no layer in LAYERS",
                relative.display()
            );
        };
        seen += 1;
        let text = without_tests(&std::fs::read_to_string(file).unwrap());
        for other in named(&text) {
            if other == module {
                continue;
            }
            match layer(&other) {
                Some(theirs) if theirs < own => {}
                Some(_) => steps.push(format!("{}: `{module}` uses `{other}`", relative.display())),
                None => steps.push(format!(
                    "{}: `{module}` uses `{other}`, which has no layer",
                    relative.display()
                )),
            }
        }
    }
    assert!(seen > 40, "only {seen} source files were read");
    assert!(
        steps.is_empty(),
        "modules that use a layer not below them:\n{}",
        steps.join("\n")
    );
}
