//! The SDKs against a running stack, each with its own runner: pytest for
//! `sdk/python`, node's test runner for `sdk/typescript`. Their tests call
//! every method against the real processes, run their READMEs' examples,
//! follow a series across pages (the stack serves pages of two points),
//! read the stream, and receive an alert's webhook call whose signature
//! they verify. Each also checks its types against `sdk/openapi.json`,
//! which the API's own tests keep equal to the served document; this test
//! checks the served one too.
//!
//! The runners come from `deploy/stack test`: `RATEWIRE_SDK_PYTHON` is a
//! Python with pytest and httpx (the SDK itself is installed from
//! `sdk/python` here, as a user would), and `sdk/typescript/node_modules`
//! holds the TypeScript SDK's tools (`npm ci`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use ratewire_e2e::repo::root;
use ratewire_e2e::{ago, Board, Stack};
use tokio::process::Command;

/// Boards published before the SDKs' tests: more than a page of two points.
const BOARDS: usize = 5;

/// A stack with one bank that has published [`BOARDS`] boards, and what the
/// SDKs' tests read to reach it.
async fn world() -> anyhow::Result<(Stack, Vec<(&'static str, String)>)> {
    let stack = Stack::builder()
        .env("RATEWIRE_SERIES_PAGE_POINTS", "2")
        .start()
        .await?;
    let key = stack.api_key("sdk").await?;
    let (bank, token) = stack.bank_with_token("SDK", "SDK Bank").await?;
    for i in 0..BOARDS {
        let hours = (BOARDS - i) as i64;
        let board = Board::at(ago(0, hours)).rate("USD", format!("150.{i}1"), "158");
        assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);
    }
    stack
        .wait_served(
            "the last board",
            bank,
            &key,
            &format!("150.{}1", BOARDS - 1),
        )
        .await?;
    let env = vec![
        ("RATEWIRE_BASE_URL", stack.api_url.clone()),
        ("RATEWIRE_API_KEY", key),
        ("RATEWIRE_INGEST_URL", stack.ingest_url.clone()),
        ("RATEWIRE_BANK_ID", bank.to_string()),
        ("RATEWIRE_PUBLISHER_TOKEN", token),
        ("RATEWIRE_RAW_POINTS", BOARDS.to_string()),
        // The READMEs' webhook examples: an address the stack may call.
        (
            "RATEWIRE_WEBHOOK_URL",
            "http://127.0.0.1:9/ratewire".to_owned(),
        ),
    ];
    Ok((stack, env))
}

/// A user's first lines with the TypeScript SDK.
const USER_MODULE: &str = r#"
import { RatewireClient } from '@ratewire/client';
const client = new RatewireClient({ baseUrl: process.env.RATEWIRE_BASE_URL, apiKey: process.env.RATEWIRE_API_KEY });
const best = await client.bestRates('USD');
if (!(best.cashBuying.price > 0)) throw new Error(JSON.stringify(best));
"#;

/// Runs `command` to its end; fails with everything it printed.
async fn run(what: &str, command: &mut Command, log: &Path) -> anyhow::Result<()> {
    let output = command
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("starting {what}"))?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(log, &report)?;
    if !output.status.success() {
        bail!("{what} failed:\n{report}");
    }
    Ok(())
}

#[tokio::test]
async fn the_sdks_pass_their_tests_against_the_stack() -> anyhow::Result<()> {
    let python = std::env::var("RATEWIRE_SDK_PYTHON").map(PathBuf::from).context(
        "RATEWIRE_SDK_PYTHON is not set: run `deploy/stack test`, which installs the SDK's test tools",
    )?;
    let typescript = root().join("sdk/typescript");
    if !typescript.join("node_modules").is_dir() {
        bail!("sdk/typescript/node_modules is missing: run `deploy/stack test` (it runs `npm ci` there)");
    }
    let (stack, env) = world().await?;

    // The document the SDKs are checked against is the one served.
    let served: serde_json::Value = stack
        .http()
        .get(format!("{}/api/v1/openapi.json", stack.api_url))
        .send()
        .await?
        .json()
        .await?;
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("sdk/openapi.json"))?)?;
    assert!(
        served == committed,
        "the served document differs from sdk/openapi.json"
    );

    // The Python SDK, installed from its folder as `pip install` does.
    let site = stack.logs.join("sdk-python-site");
    run(
        "pip install ./sdk/python",
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--no-deps"])
            .args(["--no-build-isolation", "--target"])
            .arg(&site)
            .arg(root().join("sdk/python")),
        &stack.logs.join("sdk-python-install.txt"),
    )
    .await?;
    run(
        "the Python SDK's tests",
        Command::new(&python)
            .current_dir(root().join("sdk/python"))
            .env("PYTHONPATH", &site)
            .envs(env.iter().cloned())
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"]),
        &stack.logs.join("sdk-python-tests.txt"),
    )
    .await?;

    run(
        "the TypeScript SDK's tests",
        Command::new("npm")
            .current_dir(&typescript)
            .envs(env.iter().cloned())
            .args(["test", "--silent"]),
        &stack.logs.join("sdk-typescript-tests.txt"),
    )
    .await?;

    // `npm install ./sdk/typescript` into a project of a user's own: it
    // installs as it is (no build step, no dependencies) and answers.
    let project = stack.logs.join("sdk-typescript-user");
    std::fs::create_dir_all(&project)?;
    std::fs::write(
        project.join("package.json"),
        r#"{"name":"user","private":true,"type":"module"}"#,
    )?;
    run(
        "npm install ./sdk/typescript",
        Command::new("npm")
            .current_dir(&project)
            .args(["install", "--offline", "--no-audit", "--no-fund"])
            .arg(&typescript),
        &stack.logs.join("sdk-typescript-install.txt"),
    )
    .await?;
    run(
        "a user's module importing @ratewire/client",
        Command::new("node")
            .current_dir(&project)
            .envs(env.iter().cloned())
            .args(["--input-type=module", "-e", USER_MODULE]),
        &stack.logs.join("sdk-typescript-user.txt"),
    )
    .await?;
    Ok(())
}
