//! The README's settings table is what the processes' `--help` says: it is
//! generated from their clap definitions (each process's `Config`, with
//! every group it flattens in), and this test fails, naming the rows, when
//! the two differ. The help texts are the source; to rewrite the table
//! after changing one:
//!
//! ```sh
//! RATEWIRE_WRITE_README=1 cargo test -p ratewire-e2e --test e2e readme_settings::
//! ```

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::{Args, Command};

const BEGIN: &str = "<!-- settings table: generated from the processes' clap definitions";
const END: &str = "<!-- end of the settings table -->";

/// The processes, in the order the table names them, and their settings.
fn processes() -> [(&'static str, Command); 3] {
    [
        (
            "ingest",
            ratewire_ingest::Config::augment_args(Command::new("ratewire-ingest")),
        ),
        (
            "projector",
            ratewire_projector::Config::augment_args(Command::new("ratewire-projector")),
        ),
        (
            "api",
            ratewire_api::Config::augment_args(Command::new("ratewire-api")),
        ),
    ]
}

/// One row: a variable, its default and its help, and the processes that
/// read it so.
#[derive(Debug)]
struct Row {
    variable: String,
    default: String,
    meaning: String,
    processes: Vec<usize>,
    /// Where the first process declares it, to keep the help's order.
    declared: usize,
}

/// The rows of every setting with an environment variable. A variable two
/// processes read with the same default and help is one row; read
/// differently, one row each.
fn rows() -> Vec<Row> {
    let processes = processes();
    let mut rows: Vec<Row> = Vec::new();
    for (process, (_, command)) in processes.iter().enumerate() {
        for (declared, arg) in command.get_arguments().enumerate() {
            let Some(variable) = arg.get_env().and_then(|v| v.to_str()) else {
                continue;
            };
            let defaults: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let default = match defaults.as_slice() {
                [] => "(none)".to_owned(),
                values => format!("`{}`", values.join(",")),
            };
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let meaning = help.split_whitespace().collect::<Vec<_>>().join(" ");
            let same = rows
                .iter_mut()
                .find(|r| r.variable == variable && r.default == default && r.meaning == meaning);
            match same {
                Some(row) => row.processes.push(process),
                None => rows.push(Row {
                    variable: variable.to_owned(),
                    default,
                    meaning,
                    processes: vec![process],
                    declared,
                }),
            }
        }
    }
    // Those of every process first, then those of several, then each
    // process's own; in the order of its help within.
    rows.sort_by_key(|r| {
        (
            std::cmp::Reverse(r.processes.len()),
            r.processes.clone(),
            r.declared,
        )
    });
    rows
}

/// The table as the README holds it, header included.
fn table() -> Vec<String> {
    let names = processes().map(|(name, _)| name);
    let mut lines = vec![
        "| variable | used by | default | meaning |".to_owned(),
        "|---|---|---|---|".to_owned(),
    ];
    for row in rows() {
        let used_by = if row.processes.len() == names.len() {
            "all".to_owned()
        } else {
            row.processes
                .iter()
                .map(|p| names[*p])
                .collect::<Vec<_>>()
                .join(", ")
        };
        lines.push(format!(
            "| `{}` | {used_by} | {} | {} |",
            row.variable,
            row.default,
            row.meaning.replace('|', "\\|")
        ));
    }
    lines
}

fn readme() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("README.md")
}

/// The README's text before the table (its opening marker included), the
/// table's lines, and the text from the closing marker on.
fn split(text: &str) -> (&str, Vec<&str>, &str) {
    let begin = text
        .find(BEGIN)
        .unwrap_or_else(|| panic!("README.md has no line starting {BEGIN:?}"));
    let table = begin + text[begin..].find("-->").expect("the marker closes") + "-->".len();
    let end = text[table..]
        .find(END)
        .map(|at| table + at)
        .unwrap_or_else(|| panic!("README.md has no {END:?} after the table"));
    let lines = text[table..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    (&text[..table], lines, &text[end..])
}

#[test]
fn the_readme_s_settings_table_is_what_help_says() {
    let path = readme();
    let text = std::fs::read_to_string(&path).expect("README.md");
    let (before, written, after) = split(&text);
    let generated = table();
    if std::env::var_os("RATEWIRE_WRITE_README").is_some() {
        let rewritten = format!("{before}\n{}\n{after}", generated.join("\n"));
        std::fs::write(&path, rewritten).expect("README.md written");
        return;
    }
    if written == generated {
        return;
    }
    let written_set: BTreeSet<&str> = written.iter().copied().collect();
    let generated_set: BTreeSet<&str> = generated.iter().map(String::as_str).collect();
    let missing: Vec<&str> = generated_set.difference(&written_set).copied().collect();
    let stale: Vec<&str> = written_set.difference(&generated_set).copied().collect();
    panic!(
        "README.md's settings table differs from --help.\n\
         rows --help has and the README lacks:\n{}\n\
         rows the README has and --help does not:\n{}\n\
         {}\n\
         Rewrite it with: RATEWIRE_WRITE_README=1 cargo test -p ratewire-e2e --test e2e readme_settings::",
        missing.join("\n"),
        stale.join("\n"),
        if missing.is_empty() && stale.is_empty() {
            "(the same rows, in another order)"
        } else {
            ""
        }
    );
}

#[test]
fn every_setting_has_a_help_text() {
    let silent: Vec<String> = rows()
        .into_iter()
        .filter(|r| r.meaning.is_empty())
        .map(|r| r.variable)
        .collect();
    assert!(silent.is_empty(), "settings without help: {silent:?}");
}

#[test]
fn no_help_text_carries_a_measurement() {
    // Figures behind a choice belong in docs/benchmarks.md.
    let measured: Vec<String> = rows()
        .into_iter()
        .filter(|r| {
            let m = r.meaning.to_lowercase();
            m.contains("benchmarks.md") || m.contains('%') || m.contains(" run ")
        })
        .map(|r| format!("{}: {}", r.variable, r.meaning))
        .collect();
    assert!(
        measured.is_empty(),
        "help texts with measurements: {measured:?}"
    );
}
