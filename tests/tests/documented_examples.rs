//! Every read-API example in the documents holds on a fresh stack: each
//! shell block of docs/api.md and the README that asks the public listener
//! runs as written (by bash, with `$KEY` set and the stack's addresses for
//! the default ports) against a stack fed three rounds of the demo feed, and
//! the answer shown after it has the served answer's shape:
//! the same fields at every level, each of the same JSON type, the same
//! `status` and `message`, and for CSV the same header. Values that depend
//! on the run (rates, times) are free to differ. Beside the demo feed's
//! rounds, bank 1 corrects a board (one with its source) and bank 2
//! retracts one, for the examples of the revision log and a board's
//! provenance. The README's alert walkthrough, whose receiver runs until
//! stopped, is run whole by a test of its own.

use std::path::Path;

use std::time::Duration;

use anyhow::{bail, Context};
use ratewire_e2e::{ago, eventually, Board, Stack, ADMIN_TOKEN, VISIBLE_WITHIN};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

/// "Within seconds": the demo feed publishes every 3 s, and a board is
/// judged about 20 ms after its 202.
const CALL_WITHIN: Duration = Duration::from_secs(10);

/// How the README starts its webhook receiver.
const RECEIVER: &str = "target/debug/ratewire-feed receive";

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
        // The stream never ends: its own tests receive it. The alert
        // walkthrough's receiver neither: it has a test of its own below.
        if block.language != "sh"
            || !block.body.contains("http://127.0.0.1:8080/")
            || block.body.contains("curl -N")
            || block.body.contains(RECEIVER)
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
    let script = on_stack(&format!("set -euo pipefail\n{}", example.commands), stack);
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

/// A stack as `deploy/stack up` leaves it: three rounds of the demo feed
/// (what it has published within 10 s) served, and a demo key.
async fn demo_stack() -> anyhow::Result<(Stack, String)> {
    let stack = Stack::start().await?;
    for _ in 0..3 {
        let output = stack.run("ratewire-feed", &["demo", "--once"], &[]).await?;
        assert!(
            output.status.success(),
            "the demo feed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
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
    Ok((stack, key))
}

/// A publisher's bad day, for the examples of the revision log and a
/// board's provenance (api.md, "As known at, revisions and provenance"):
/// bank 1 publishes a board of an hour ago, with its source and a typo,
/// and corrects it with a reason; bank 2 retracts a board of its own. Both
/// boards are older than the feed's, so every other example is unchanged.
async fn a_correction_and_a_retraction(stack: &Stack, key: &str) -> anyhow::Result<()> {
    let board = |usd_selling: &str, as_of: &str| {
        Board::at(as_of)
            .rate("USD", "155.35", usd_selling)
            .transactional("USD", "155.85", "157.70")
            .rate("EUR", "180.10", "184.40")
            .transactional("EUR", "180.60", "183.90")
    };
    let publish = |bank: i64, token: String, board: Board| async move {
        let (status, answer) = stack.publish_board(bank, &token, &board).await?;
        anyhow::ensure!(status == 202, "{board}: {status} {answer}");
        anyhow::Ok(answer)
    };
    let as_of = ago(0, 1);
    let source = json!({"url": "https://www.combanketh.et/en/exchange-rate", "method": "page",
        "capturedAt": as_of, "sha256": "9f2c4b1e0d8a7c6b5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"});
    let cbe = stack.publisher_token(1).await?;
    publish(1, cbe.clone(), board("1582.0", &as_of).source(source)).await?;
    let correction = board("158.20", &as_of).reason("the board read 1582.0 for 158.20");
    publish(1, cbe, correction).await?;

    let awash = stack.publisher_token(2).await?;
    let wrong = publish(2, awash.clone(), board("158.00", &ago(0, 2))).await?;
    let retraction = stack
        .http()
        .delete(format!(
            "{}/v1/banks/2/boards/{}",
            stack.ingest_url,
            wrong["eventId"].as_str().context("an eventId")?
        ))
        .bearer_auth(&awash)
        .json(&json!({"reason": "published in error"}))
        .send()
        .await?;
    anyhow::ensure!(
        retraction.status() == 202,
        "retracting: {}",
        retraction.status()
    );
    eventually("both revisions listed", VISIBLE_WITHIN, || async {
        let (_, page) = stack.get("/api/v1/revisions", Some(key)).await.ok()?;
        (page["data"]["revisions"].as_array()?.len() == 2).then_some(())
    })
    .await
}

/// `commands` with the stack's addresses for the documented default ports.
fn on_stack(commands: &str, stack: &Stack) -> String {
    commands
        .replace("http://127.0.0.1:8080", &stack.api_url)
        .replace("http://127.0.0.1:8081", &stack.ingest_url)
        .replace("http://127.0.0.1:9080", &stack.api_operator_url)
        .replace("http://127.0.0.1:9081", &stack.ingest_operator_url)
}

#[tokio::test]
async fn every_documented_example_holds_on_a_fresh_stack() -> anyhow::Result<()> {
    let (stack, key) = demo_stack().await?;
    a_correction_and_a_retraction(&stack, &key).await?;

    // Where the README's commands find the operator token and the key.
    let dir = stack.logs.join("documented-examples");
    std::fs::create_dir_all(dir.join(".stack"))?;
    std::fs::write(dir.join(".stack/admin-token"), ADMIN_TOKEN)?;
    std::fs::write(dir.join(".stack/demo-api-key"), &key)?;

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

/// The README's alert walkthrough, run as written while the demo feed
/// publishes every 3 s: the receiver it starts prints a verified call of
/// the alert within seconds.
#[tokio::test]
async fn the_readme_alert_walkthrough_delivers_its_call_within_seconds() -> anyhow::Result<()> {
    let (stack, key) = demo_stack().await?;
    let log = |name: &str| std::fs::File::create(stack.logs.join(name));
    let _feed = stack
        .command("ratewire-feed")?
        .arg("demo")
        .stderr(log("feed.log")?)
        .spawn()?;

    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))?;
    let walkthrough = blocks(&readme)
        .into_iter()
        .find(|b| b.language == "sh" && b.body.contains(RECEIVER))
        .context("the README starts a receiver")?;
    let port = ratewire_e2e::free_port();
    let feed = ratewire_e2e::binary("ratewire-feed")?;
    let script = on_stack(&walkthrough.body, &stack)
        .replace("127.0.0.1:9999", &format!("127.0.0.1:{port}"))
        .replace("target/debug/ratewire-feed", &feed.display().to_string());

    let started = std::time::Instant::now();
    let mut shell = tokio::process::Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{script}\nwait")])
        .env("KEY", &key)
        .stdout(std::process::Stdio::piped())
        .stderr(log("walkthrough.log")?)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let group = shell.id().context("the shell's pid")?;
    let mut lines = BufReader::new(shell.stdout.take().context("stdout")?).lines();
    let call = tokio::time::timeout(CALL_WITHIN, async {
        while let Some(line) = lines.next_line().await? {
            let printed: Value = serde_json::from_str(&line).unwrap_or_default();
            if printed["type"] == "rate.threshold_crossed" {
                return anyhow::Ok(printed);
            }
        }
        bail!("the walkthrough ended without a call")
    })
    .await;
    // The receiver runs in the background of the shell: stop them both.
    std::process::Command::new("kill")
        .args(["--", &format!("-{group}")])
        .status()?;
    let call = call.with_context(|| format!("no call within {CALL_WITHIN:?}"))??;
    assert_eq!(call["verified"], true, "{call}");
    assert!(
        call["messageId"]
            .as_str()
            .is_some_and(|id| id.starts_with("msg_")),
        "{call}"
    );
    assert_eq!(call["data"]["currencyCode"], "USD", "{call}");
    println!(
        "the call arrived {:?} after the walkthrough started",
        started.elapsed()
    );
    Ok(())
}

/// `deploy/stack up` on a fresh database: the demo publishes its banks'
/// past year through the backfill beside its live rounds, so a year's
/// chart shows a market (a value on every day but Sundays, moving), with
/// the National Bank's reference line beside it.
#[tokio::test]
async fn a_fresh_demo_stack_has_a_year_of_history() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let output = stack
        .run(
            "ratewire-feed",
            &["demo", "--once", "--banks", "2", "--history-days", "365"],
            &[],
        )
        .await?;
    assert!(
        output.status.success(),
        "the demo feed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let key = stack.api_key_on("demo", "pro").await?;
    let from = (chrono::Utc::now() - chrono::Duration::days(365)).date_naive();

    let series = format!("/api/v1/rates/series?bankId=1&currencyCode=USD&from={from}");
    let points = eventually(
        "a year of daily boards served",
        VISIBLE_WITHIN * 4,
        || async {
            let (_, body) = stack.get(&series, Some(&key)).await.ok()?;
            let points = body["data"]["points"].as_array()?.clone();
            let published: std::collections::BTreeSet<String> = points
                .iter()
                .filter_map(|p| p["updatedAt"].as_str().map(str::to_owned))
                .collect();
            // 365 days less 52 Sundays, and today's live board.
            (published.len() > 310).then_some(points)
        },
    )
    .await?;
    let values: std::collections::BTreeSet<String> =
        points.iter().map(|p| p["cashBuying"].to_string()).collect();
    assert!(values.len() > 100, "a flat year: {values:?}");

    let reference = format!("/api/v1/reference-rates/series?currencyCode=USD&from={from}");
    let (status, body) = stack.get(&reference, Some(&key)).await?;
    assert_eq!(status, 200, "{body}");
    let days = body["data"]["points"].as_array().map_or(0, Vec::len);
    assert!(days >= 255, "{days} reference days in a year");
    Ok(())
}
