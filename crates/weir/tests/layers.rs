//! The service crate is a stack: each module uses only the modules below it (see
//! `src/lib.rs` and DESIGN.md). This reads the sources as Rust (with `syn`), test code
//! left out, resolves every path a module names (`crate::`, `super::`, `self::`, in
//! `use` trees, expressions, types and macro bodies) to the top-level module it
//! reaches, and fails on any step up or sideways: a door can always be built on the
//! engine alone.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use syn::visit::{self, Visit};

/// Each module's layer: a module may name only modules of a lower layer.
const LAYERS: &[(&str, u8)] = &[
    ("reloadable", 0),
    ("request", 1),
    ("metrics", 2),
    ("engine", 3),
    ("config", 4),
    ("edge", 4),
    ("step", 5),
    ("stack", 5),
    ("gateway", 6),
    ("api", 6),
    ("admin", 6),
    ("layer", 6),
    ("envoy", 6),
    ("auth", 6),
    ("fleet", 6),
    ("demo", 6),
    ("server", 7),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|&(_, l)| l)
}

/// Whether an item is test code (`#[cfg(test)]`).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// The top-level modules the code of one module names.
struct Names {
    /// The module the code is in, from the crate root (`["engine", "decide"]`).
    module: Vec<String>,
    found: BTreeSet<String>,
}

impl Names {
    /// The top-level module a path starting with `segments` reaches, if it is one of
    /// this crate's (`crate::x`, `super::...::x`, `self::x`).
    fn resolve(&mut self, segments: &[String]) {
        let top = match segments.first().map(String::as_str) {
            Some("crate") => segments.get(1),
            Some("self") => self.module.first().or(segments.get(1)),
            Some("super") => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let depth = self.module.len().saturating_sub(ups);
                if depth == 0 {
                    segments.get(ups)
                } else {
                    self.module.first()
                }
            }
            _ => None,
        };
        if let Some(top) = top {
            self.found.insert(top.clone());
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.resolve(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.resolve(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.resolve(&prefix.clone()),
        }
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            _ => return visit::visit_item(self, item),
        };
        if !is_test(attrs) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // An inline module's paths are relative to it.
        self.module.push(item.ident.to_string());
        visit::visit_item_mod(self, item);
        self.module.pop();
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if !is_test(&item.attrs) {
            visit::visit_impl_item_fn(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.resolve(&segments);
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Macro bodies are tokens: `crate :: x` and `$crate :: x` in them count too.
        let text = mac.tokens.to_string();
        let words: Vec<&str> = text.split_whitespace().collect();
        for at in 0..words.len().saturating_sub(2) {
            if matches!(words[at], "crate" | "$crate") && words[at + 1] == "::" {
                let name: String = words[at + 2]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                self.resolve(&["crate".to_owned(), name]);
            }
        }
        visit::visit_macro(self, mac);
    }
}

fn visit_dir(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            visit_dir(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The module a source file holds, from the crate root.
fn module_of(relative: &Path) -> Vec<String> {
    let mut module: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if module.last().is_some_and(|m| m == "mod") {
        module.pop();
    }
    module
}

/// The top-level modules `source` names, as code of `module`.
fn named(module: Vec<String>, source: &str) -> BTreeSet<String> {
    let file = syn::parse_file(source).unwrap();
    let mut names = Names {
        module,
        found: BTreeSet::new(),
    };
    names.visit_file(&file);
    names.found
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit_dir(&src, &mut files);
    let mut steps = Vec::new();
    let mut read = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let module = module_of(relative);
        let top = module[0].clone();
        if matches!(top.as_str(), "main" | "lib") {
            continue;
        }
        // A module's tests in a file beside it: test code, if its parent says so.
        if module.last().is_some_and(|m| m == "tests") {
            let parent = file.parent().unwrap();
            let declared = [parent.with_extension("rs"), parent.join("mod.rs")]
                .iter()
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .any(|text| text.contains("#[cfg(test)]\nmod tests;"));
            assert!(
                declared,
                "{} is not declared as #[cfg(test)] mod tests",
                relative.display()
            );
            continue;
        }
        let own = layer(&top).unwrap_or_else(|| {
            panic!(
                "{}: module `{top}` has no layer in LAYERS",
                relative.display()
            )
        });
        read += 1;
        for other in named(module, &std::fs::read_to_string(file).unwrap()) {
            if other == top {
                continue;
            }
            match layer(&other) {
                Some(theirs) if theirs < own => {}
                Some(_) => steps.push(format!("{}: `{top}` uses `{other}`", relative.display())),
                None => steps.push(format!(
                    "{}: `{top}` uses `{other}`, which has no layer",
                    relative.display()
                )),
            }
        }
    }
    assert!(read > 40, "only {read} source files were read");
    assert!(
        steps.is_empty(),
        "modules that use a layer not below them:\n{}",
        steps.join("\n")
    );
}

/// The reading finds a step up however it is written, and only outside tests.
#[test]
fn every_spelling_of_a_path_is_read() {
    let engine = || vec!["engine".to_owned(), "decide".to_owned()];
    let cases = [
        ("use crate::gateway::Gateway;", vec!["gateway"]),
        ("use super::super::server::Shared;", vec!["server"]),
        ("use super::Settlement;", vec!["engine"]),
        (
            "use crate::{request::{Facts, Head}, gateway::Gateway};",
            vec!["gateway", "request"],
        ),
        ("fn f() { let _ = crate::api::router; }", vec!["api"]),
        ("fn f() -> Option<crate::admin::X> { None }", vec!["admin"]),
        (
            "fn f() { tracing::info!(\"{}\", crate::server::NAME); }",
            vec!["server"],
        ),
        (
            "#[cfg(test)]\nmod tests { use crate::server::X; const B: &str = \"{\"; }\nuse crate::edge::Y;",
            vec!["edge"],
        ),
        (
            "#[cfg(test)]\nconst B: &str = \"{\";\nuse crate::gateway::Gateway;",
            vec!["gateway"],
        ),
    ];
    for (source, want) in cases {
        let found: Vec<String> = named(engine(), source).into_iter().collect();
        assert_eq!(found, want, "{source}");
    }
}
