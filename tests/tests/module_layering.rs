//! Inside each crate, the top-level modules import downward: no two of
//! them reach each other through `crate::` paths (in code or doc links).
//! Read from the sources, so a new import that closes a circle fails here,
//! not in review. The same holds inside each folder module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every crate with sources of its own (the end-to-end tests aside).
const CRATES: [&str; 7] = [
    "proto",
    "service",
    "readmodel",
    "ingest",
    "projector",
    "api",
    "tools",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

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
/// `crate::` paths.
fn imports_in(krate: &str, module: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join(krate).join("src").join(module);
    let prefix = match module {
        "" => "crate::".to_owned(),
        _ => format!("crate::{}::", module.replace('/', "::")),
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
        let text = std::fs::read_to_string(file).unwrap();
        // Unit tests may reach anywhere.
        let text = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        let entry = graph.entry(module.clone()).or_default();
        for (at, _) in text.match_indices(&prefix) {
            let rest = &text[at + prefix.len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group
                    .split('}')
                    .next()
                    .unwrap_or_default()
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .filter_map(|path| path.split("::").next())
                    .collect(),
                None => rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .take(1)
                    .collect(),
            };
            for name in names {
                if name != module && modules.contains(name) {
                    entry.insert(name.to_owned());
                }
            }
        }
    }
    graph
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
