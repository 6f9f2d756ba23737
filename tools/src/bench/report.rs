//! Writing docs/benchmarks.md: each scenario replaces its own section in
//! place (or adds it at the end), so the page keeps its order and the
//! current figures stay where its table of contents says.

use std::path::Path;

/// Puts `section` (starting with its `## ` heading) in place of the
/// section with the same heading in `page`, or at its end.
pub fn replace_section(page: &Path, section: &str) -> anyhow::Result<()> {
    let heading = section.lines().next().unwrap_or_default();
    let text = std::fs::read_to_string(page).unwrap_or_else(|_| "# Benchmarks\n".to_owned());
    std::fs::write(page, replaced(&text, heading, section))?;
    super::say(format!("written to {}", page.display()));
    println!("{section}");
    Ok(())
}

fn replaced(text: &str, heading: &str, section: &str) -> String {
    let mut out = Vec::new();
    let mut skipping = false;
    let mut placed = false;
    for line in text.lines() {
        if line == heading {
            out.extend(section.trim_end().lines().map(str::to_owned));
            out.push(String::new());
            skipping = true;
            placed = true;
            continue;
        }
        if skipping && line.starts_with("## ") {
            skipping = false;
        }
        if !skipping {
            out.push(line.to_owned());
        }
    }
    if !placed {
        out.push(String::new());
        out.extend(section.trim_end().lines().map(str::to_owned));
    }
    // One blank line between sections, none at the end.
    let mut joined = out.join("\n");
    while joined.contains("\n\n\n") {
        joined = joined.replace("\n\n\n", "\n\n");
    }
    format!("{}\n", joined.trim_end())
}

/// A number with `digits` fraction digits.
pub fn fixed(value: f64, digits: usize) -> String {
    format!("{value:.digits$}")
}

/// A Markdown table row.
pub fn row(cells: &[String]) -> String {
    format!("| {} |", cells.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# Benchmarks\n\nIntro.\n\n## One\n\nold one\n\n## Two\n\ntwo\n";

    #[test]
    fn a_section_is_replaced_where_it_stands() {
        let out = replaced(PAGE, "## One", "## One\n\nnew one\n");
        assert_eq!(
            out,
            "# Benchmarks\n\nIntro.\n\n## One\n\nnew one\n\n## Two\n\ntwo\n"
        );
    }

    #[test]
    fn a_new_section_goes_at_the_end() {
        let out = replaced(PAGE, "## Three", "## Three\n\nthree");
        assert!(
            out.ends_with("## Two\n\ntwo\n\n## Three\n\nthree\n"),
            "{out}"
        );
    }

    #[test]
    fn the_last_section_is_replaced_whole() {
        let out = replaced(PAGE, "## Two", "## Two\n\n2");
        assert!(out.ends_with("## One\n\nold one\n\n## Two\n\n2\n"), "{out}");
    }
}
