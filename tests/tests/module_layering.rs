//! Inside each crate, the top-level modules import downward: no two of
//! them reach each other through `crate::`, `super::` or `self::` paths
//! (in code, in `use` trees however nested, or in doc links).
//! Read from the sources, so a new import that closes a circle fails here,
//! not in review. The same holds inside each folder module.

use ratewire_e2e::repo::root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every crate with sources of its own (the end-to-end tests aside).
const CRATES: [&str; 8] = [
    "proto",
    "service",
    "readmodel",
    "alerts",
    "ingest",
    "projector",
    "api",
    "tools",
];

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// Each module directly inside `module` (a path below `krate`'s `src`,
/// "" for the crate root) and the others there it names through
/// `crate::`, `super::` or `self::` paths.
fn imports_in(krate: &str, module: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src_root = root().join(krate).join("src");
    let src = src_root.join(module);
    let folder: Vec<String> = match module {
        "" => Vec::new(),
        _ => module.split('/').map(str::to_owned).collect(),
    };
    let mut files = Vec::new();
    sources(&src, &mut files);
    let module_of = |path: &Path| -> Option<String> {
        let relative = path.strip_prefix(&src).ok()?;
        let first = relative.components().next()?.as_os_str().to_str()?;
        let name = first.trim_end_matches(".rs");
        // The crate roots, a folder's mod.rs and binaries sit above every
        // module beside them.
        (!matches!(name, "lib" | "main" | "bin" | "mod")).then(|| name.to_owned())
    };
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(module) = module_of(file) else {
            continue;
        };
        let here = module_path(file.strip_prefix(&src_root).unwrap());
        let text = std::fs::read_to_string(file).unwrap();
        // Unit tests may reach anywhere.
        let text = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        let entry = graph.entry(module.clone()).or_default();
        for path in named_paths(text, &here) {
            let Some(name) = path
                .strip_prefix(folder.as_slice())
                .and_then(|inside| inside.first())
            else {
                continue;
            };
            if *name != module && modules.contains(name) {
                entry.insert(name.clone());
            }
        }
    }
    graph
}

/// The module path of a file below `src`: `bench/load.rs` is
/// `["bench", "load"]`, `bench/mod.rs` is `["bench"]`, `lib.rs` is `[]`.
fn module_path(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> = relative
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .map(|c| c.trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(
        path.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        path.pop();
    }
    path
}

/// Every module path `text` names through `crate::`, `super::` or
/// `self::` (in code, `use` trees with nested groups, or doc links),
/// resolved from the module `here` the text belongs to. Inline modules
/// (`mod name { ... }`) move `here` down for what they hold.
fn named_paths(text: &str, here: &[String]) -> Vec<Vec<String>> {
    let bytes = text.as_bytes();
    let inline = inline_modules(text);
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(head) = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|head| bytes[at..].starts_with(head.as_bytes()))
        else {
            at += 1;
            continue;
        };
        // A path's head stands alone: not `ratewire_crate::`, not the
        // second `super` of `super::super::` (read with the first).
        let before = at.checked_sub(1).map(|b| bytes[b]);
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':') {
            at += head.len();
            continue;
        }
        let mut base: Vec<String> = here.to_vec();
        for (name, span) in &inline {
            if span.contains(&at) {
                base.push(name.clone());
            }
        }
        let mut rest = at;
        match head {
            "crate::" => {
                base.clear();
                rest += head.len();
            }
            "self::" => rest += head.len(),
            _ => {
                while bytes[rest..].starts_with(b"super::") {
                    base.pop();
                    rest += "super::".len();
                }
            }
        }
        for tail in use_tree(bytes, &mut rest) {
            let mut path = base.clone();
            path.extend(tail);
            found.push(path);
        }
        at = rest.max(at + 1);
    }
    found
}

/// The inline modules of `text` (`mod name {`) and the byte span of each;
/// braces are counted as they come (strings and comments are not told
/// apart, which the modules of this tree do not need).
fn inline_modules(text: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let mut modules = Vec::new();
    for (at, _) in text.match_indices("mod ") {
        if text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let after = &text[at + 4..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let Some(open) = after[name.len()..].trim_start().strip_prefix('{') else {
            continue;
        };
        let start = text.len() - open.len();
        let mut depth = 1;
        let mut end = text.len();
        for (offset, c) in open.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = start + offset;
                break;
            }
        }
        if !name.is_empty() {
            modules.push((name, start..end));
        }
    }
    modules
}

/// The paths of the `use` tree (or plain path) starting at `at`, each
/// without its head: `a::b` gives `[a, b]`, `a::{self, b::{c, d}}` gives
/// `[a]`, `[a, b, c]` and `[a, b, d]`; `*` and `as` names add nothing.
fn use_tree(text: &[u8], at: &mut usize) -> Vec<Vec<String>> {
    let skip_space = |at: &mut usize| {
        while text.get(*at).is_some_and(u8::is_ascii_whitespace) {
            *at += 1;
        }
    };
    let mut prefix = Vec::new();
    loop {
        if text.get(*at) == Some(&b'{') {
            *at += 1;
            let mut paths = Vec::new();
            loop {
                skip_space(at);
                match text.get(*at) {
                    None => return paths,
                    Some(b'}') => {
                        *at += 1;
                        return paths;
                    }
                    Some(b',') => *at += 1,
                    Some(_) => {
                        let before = *at;
                        for tail in use_tree(text, at) {
                            let mut path = prefix.clone();
                            path.extend(tail);
                            paths.push(path);
                        }
                        // Anything else in a group (`as x`, comments):
                        // step over it.
                        if *at == before {
                            *at += 1;
                        }
                    }
                }
            }
        }
        let start = *at;
        while text
            .get(*at)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            *at += 1;
        }
        let name = String::from_utf8_lossy(&text[start..*at]).into_owned();
        match name.as_str() {
            "" => {
                if text.get(*at) == Some(&b'*') {
                    *at += 1;
                }
                return vec![prefix];
            }
            "self" => return vec![prefix],
            _ => prefix.push(name),
        }
        if text[*at..].starts_with(b"::") {
            *at += 2;
        } else {
            return vec![prefix];
        }
    }
}

/// Each top-level module of `krate` and the top-level modules it names.
fn imports(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    imports_in(krate, "")
}

/// The folders below `krate`'s `src` (modules with modules inside), as
/// paths from `src`; binaries aside.
fn folder_modules(krate: &str) -> Vec<String> {
    let src = root().join(krate).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let folders: BTreeSet<String> = files
        .iter()
        .filter_map(|f| {
            f.parent()?
                .strip_prefix(&src)
                .ok()?
                .to_str()
                .map(str::to_owned)
        })
        .filter(|dir| !dir.is_empty() && !dir.starts_with("bin"))
        .collect();
    folders.into_iter().collect()
}

/// The circles of `graph`: each set of modules that all reach each other.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<BTreeSet<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut next = vec![from.clone()];
        while let Some(node) = next.pop() {
            for to in graph.get(&node).into_iter().flatten() {
                if seen.insert(to.clone()) {
                    next.push(to.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    graph
        .keys()
        .filter(|m| reached[m].contains(*m))
        .map(|m| {
            reached[m]
                .iter()
                .filter(|other| reached.get(other).is_some_and(|r| r.contains(m)))
                .cloned()
                .collect()
        })
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn no_crate_has_a_circle_of_modules() {
    for krate in CRATES {
        let found = circles(&imports(krate));
        assert!(found.is_empty(), "{krate}: modules in a circle: {found:?}");
    }
}

#[test]
fn inside_every_folder_the_modules_have_no_circle() {
    for krate in CRATES {
        for folder in folder_modules(krate) {
            let found = circles(&imports_in(krate, &folder));
            assert!(
                found.is_empty(),
                "{krate}/src/{folder}: modules in a circle: {found:?}"
            );
        }
    }
}

#[test]
fn a_circle_is_found() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", set(&["b"])),
        ("b", set(&["c"])),
        ("c", set(&["a"])),
        ("d", set(&["a"])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(circles(&graph), BTreeSet::from([set(&["a", "b", "c"])]));
}

fn path(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn super_paths_resolve_from_the_file_s_module() {
    let here = path(&["bench", "full"]);
    let found = named_paths(
        "use super::{load::{self, Latency}, procs::Procs};\n\
         fn f() -> super::super::feed::Client { super::median(&[]) }",
        &here,
    );
    for expected in [
        path(&["bench", "load"]),
        path(&["bench", "load", "Latency"]),
        path(&["bench", "procs", "Procs"]),
        path(&["feed", "Client"]),
        path(&["bench", "median"]),
    ] {
        assert!(found.contains(&expected), "{expected:?} in {found:?}");
    }
    assert_eq!(found.len(), 5, "{found:?}");
}

#[test]
fn crate_paths_in_nested_groups_and_doc_links_resolve_whole() {
    let found = named_paths(
        "use crate::{views::{cache::Cache, lists}, live::*};\n\
         /// See [`crate::routes::mod_name`]; not `ratewire_crate::x`.\n\
         mod inner { use super::sibling; }",
        &path(&["api_file"]),
    );
    assert_eq!(
        found,
        [
            path(&["views", "cache", "Cache"]),
            path(&["views", "lists"]),
            path(&["live"]),
            path(&["routes", "mod_name"]),
            path(&["api_file", "sibling"]),
        ]
    );
}

/// Source files longer than this are split by what they do.
const LONGEST_FILE: usize = 600;

#[test]
fn no_source_file_is_longer_than_600_lines() {
    let mut long = Vec::new();
    for krate in CRATES {
        let mut files = Vec::new();
        sources(&root().join(krate).join("src"), &mut files);
        for file in files {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            let name = file
                .strip_prefix(root())
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            if lines > LONGEST_FILE {
                long.push(format!("{name}: {lines} lines"));
            }
        }
    }
    assert!(long.is_empty(), "files over {LONGEST_FILE} lines: {long:?}");
}
