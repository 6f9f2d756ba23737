//! The repository's own files, for the tests that hold them to the code:
//! deploy files, docs, rules and the SDKs.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_norway::Value;

/// The workspace's root (this crate's parent folder).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A file of the repository, by its path from the root.
pub fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every YAML document of a file, with `<<` merge keys applied.
pub fn yaml_documents(path: &str) -> Vec<Value> {
    let text = read(path);
    serde_norway::Deserializer::from_str(&text)
        .map(|document| {
            let mut value = Value::deserialize(document).unwrap_or_else(|e| panic!("{path}: {e}"));
            value
                .apply_merge()
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            value
        })
        .filter(|v| !v.is_null())
        .collect()
}
