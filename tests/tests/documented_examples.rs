//! Every read-API example in the documents holds on a fresh stack: each
//! shell block of docs/api.md and the README that asks the public listener
//! runs as written (by bash, with `$KEY` set and the stack's addresses for
//! the default ports) against a stack fed three rounds of the demo feed, and
//! the answer shown after it has the served answer's shape:
//! the same fields at every level, each of the same JSON type, the same
//! `status` and `message`, and for CSV the same header. Values that depend
//! on the run (rates, times) are free to differ.

use std::path::Path;

use anyhow::{bail, Context};
use ratewire_e2e::{eventually, Stack, ADMIN_TOKEN, VISIBLE_WITHIN};
use serde_json::Value;

/// One documented block of commands and the answer shown right after it,
/// if any.
struct Example {
    file: &'static str,
    line: usize,
    commands: String,
    answer: Option<Answer>,
}

enum Answer {
    Json(Value),
    Text(String),
}

/// A fenced block of a Markdown file.
struct Block {
    /// Lines of the opening and closing fences.
    first: usize,
    last: usize,
    language: String,
    body: String,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(language)) => {
                open = Some(Block {
                    first: n + 1,
                    last: 0,
                    language: language.trim().to_owned(),
                    body: String::new(),
                })
            }
            (Some(block), Some(_)) => {
                block.last = n + 1;
                blocks.extend(open.take());
            }
            (Some(block), None) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// The shell blocks that ask the read API, each with the block right after
/// it (only blank lines between) as its answer.
fn examples(file: &'static str) -> anyhow::Result<Vec<Example>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {file}"))?;
    let lines: Vec<&str> = text.lines().collect();
    let blocks = blocks(&text);
    let mut examples = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        // The stream never ends: its own tests receive it.
        if block.language != "sh"
            || !block.body.contains("http://127.0.0.1:8080/")
            || block.body.contains("curl -N")
        {
            continue;
        }
        let answer = blocks
            .get(i + 1)
            .filter(|next| {
                next.language != "sh"
                    && lines[block.last..next.first - 1]
                        .iter()
                        .all(|l| l.trim().is_empty())
            })
            .map(|next| {
                anyhow::Ok(if next.language == "json" {
                    Answer::Json(serde_json::from_str(&next.body).with_context(|| {
                        format!("{file}:{}: the documented answer is not JSON", next.first)
                    })?)
                } else {
                    Answer::Text(next.body.clone())
                })
            })
            .transpose()?;
        examples.push(Example {
            file,
            line: block.first,
            commands: block.body.clone(),
            answer,
        });
    }
    Ok(examples)
}

/// Whether `actual` has `documented`'s shape; the first difference if not.
fn same_shape(documented: &Value, actual: &Value, at: &str) -> Result<(), String> {
    match (documented, actual) {
        (Value::Object(d), Value::Object(a)) => {
            let mut dk: Vec<&String> = d.keys().collect();
            let mut ak: Vec<&String> = a.keys().collect();
            dk.sort();
            ak.sort();
            if dk != ak {
                return Err(format!("{at}: documented fields {dk:?}, served {ak:?}"));
            }
            for (key, value) in d {
                let inner = format!("{at}.{key}");
                if matches!(key.as_str(), "status" | "message") && at.is_empty() {
                    if value != &a[key] {
                        return Err(format!("{inner}: documented {value}, served {}", a[key]));
                    }
                    continue;
                }
                same_shape(value, &a[key], &inner)?;
            }
            Ok(())
        }
        (Value::Array(d), Value::Array(a)) => {
            // Documented arrays are trimmed; an empty one means empty.
            if d.len() > a.len() || (d.is_empty() && !a.is_empty()) {
                return Err(format!(
                    "{at}: documented {} entries, served {}",
                    d.len(),
                    a.len()
                ));
            }
            for (n, (d, a)) in d.iter().zip(a).enumerate() {
                same_shape(d, a, &format!("{at}[{n}]"))?;
            }
            Ok(())
        }
        // "..." stands for what the document leaves out.
        (Value::String(s), _) if s == "..." => Ok(()),
        (d, a) if std::mem::discriminant(d) == std::mem::discriminant(a) => Ok(()),
        (d, a) => Err(format!("{at}: documented {d}, served {a}")),
    }
}

async fn run(stack: &Stack, key: &str, dir: &Path, example: &Example) -> anyhow::Result<()> {
    let script = format!("set -euo pipefail\n{}", example.commands)
        .replace("http://127.0.0.1:8080", &stack.api_url)
        .replace("http://127.0.0.1:8081", &stack.ingest_url)
        .replace("http://127.0.0.1:9080", &stack.api_operator_url)
        .replace("http://127.0.0.1:9081", &stack.ingest_operator_url);
    let output = tokio::process::Command::new("bash")
        .args(["-c", &script])
        .current_dir(dir)
        .env("KEY", key)
        .output()
        .await?;
    let served = String::from_utf8_lossy(&output.stdout);
    let place = format!("{}:{}:\n{}", example.file, example.line, example.commands);
    if !output.status.success() || served.is_empty() {
        bail!(
            "{place}: exit {:?}: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    match &example.answer {
        // No answer shown: the last one must not be an error.
        None => {
            let last: Option<Value> = served
                .lines()
                .last()
                .and_then(|l| serde_json::from_str(l).ok());
            if let Some(status) = last.as_ref().and_then(|v| v["status"].as_u64()) {
                if status >= 400 {
                    bail!("{place}: answered {served}");
                }
            }
        }
        Some(Answer::Json(documented)) => {
            let actual: Value = serde_json::from_str(&served)
                .with_context(|| format!("{place}: not JSON: {served}"))?;
            if let Err(difference) = same_shape(documented, &actual, "") {
                bail!("{place}: {difference}\nserved: {served}");
            }
        }
        Some(Answer::Text(documented)) => {
            let header = |text: &str| text.lines().next().unwrap_or_default().to_owned();
            if header(documented) != header(&served) {
                bail!(
                    "{place}: documented header {:?}, served {:?}",
                    header(documented),
                    header(&served)
                );
            }
        }
    }
    Ok(())
}

#[tokio::test]
async fn every_documented_example_holds_on_a_fresh_stack() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    // Three rounds, as `deploy/stack up` has published within 10 s.
    for _ in 0..3 {
        let output = stack.run("ratewire-feed", &["demo", "--once"], &[]).await?;
        assert!(
            output.status.success(),
            "the demo feed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // As `deploy/stack up` makes it.
    let key = stack.api_key_on("demo", "pro").await?;
    eventually("every demo bank served", VISIBLE_WITHIN, || async {
        let (_, banks) = stack.get("/api/v1/banks", Some(&key)).await.ok()?;
        let served = banks["data"].as_array().map_or(0, |banks| {
            banks
                .iter()
                .filter(|b| b["lastRatesUpdatedAt"].is_string())
                .count()
        });
        (served == 12).then_some(())
    })
    .await?;

    // Where the README's commands find the operator token.
    let dir = stack.logs.join("documented-examples");
    std::fs::create_dir_all(dir.join(".stack"))?;
    std::fs::write(dir.join(".stack/admin-token"), ADMIN_TOKEN)?;

    let mut all = examples("docs/api.md")?;
    all.extend(examples("README.md")?);
    assert!(all.len() >= 12, "{} examples found", all.len());
    let mut failures = Vec::new();
    for example in &all {
        if let Err(e) = run(&stack, &key, &dir, example).await {
            failures.push(format!("{e:#}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    Ok(())
}
