//! The served OpenAPI documents are as strict as the servers: schemathesis
//! generates requests from each document (the API's and its operators',
//! ingest's publishers' and operators') and sends them to a running stack. The run
//! fails on any 5xx, any response outside its documented status codes and
//! schemas, and any request the document says is valid that the server
//! refuses with a client error other than those that depend on state (a
//! bank or board that does not exist, a code taken).
//!
//! Rules between parameters are beyond JSON Schema: for a board, selling
//! not below buying, each currency once, an `asOf` (and a source's
//! `capturedAt`) between 1990 and five minutes after the push; for a series, `from` before `to`, a bank for
//! `raw` and none for `field`; for a reference series, `from` not after
//! `to`; for a history, a day not after today; for a reference day, one
//! date for every entry, each currency
//! once and selling not below buying; for a webhook, an address that
//! resolves to one it may call; for an alert, a webhook and bank that
//! exist. The documents state them in words, and the hook below
//! applies them to generated requests, as a client following the documents
//! does. schemathesis comes from `RATEWIRE_SCHEMATHESIS_BIN`, which the
//! test command installs (`deploy/stack test`).

use std::path::PathBuf;

use anyhow::{bail, Context};
use ratewire_e2e::{ago, Board, Stack, ADMIN_TOKEN};

const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
response_schema_conformance,positive_data_acceptance";

/// Applies the board rules a schema cannot state to generated bodies.
const HOOKS: &str = r#"
import datetime

import schemathesis


def _pair(rate, buying, selling):
    if isinstance(rate.get(buying), (int, float)) and isinstance(rate.get(selling), (int, float)):
        low, high = sorted((rate[buying], rate[selling]))
        rate[buying], rate[selling] = low, high


def _instant(text):
    try:
        if len(text) == 10:
            day = datetime.date.fromisoformat(text)
            return datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc)
        at = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return at if at.tzinfo else None
    except (ValueError, OverflowError):
        return None


def _series(query):
    # From before to; raw needs a bank, and field chooses among banks.
    if query.get("interval") == "raw" and "bankId" not in query:
        query["interval"] = "day"
    if "bankId" in query:
        query.pop("field", None)
    start, end = _instant(str(query.get("from", ""))), _instant(str(query.get("to", "")))
    now = datetime.datetime.now(datetime.timezone.utc)
    end = end or now
    try:
        start = start or end - datetime.timedelta(days=30)
    except OverflowError:
        # A `to` in the first days of year 1: no default `from` before it.
        start = None
    if not (start and start < end):
        query.pop("from", None)
        query.pop("to", None)


def _revisions(query):
    # Known-at times do not run backward.
    start = _instant(str(query.get("from", "")).upper())
    end = _instant(str(query.get("to", "")).upper())
    if start and end and start > end:
        query.pop("from", None)


# Reads whose days are checked against today: as known at an instant,
# today is that instant's, which the hooks above do not know.
_DAYS_TO_COME = ("/api/v1/history", "/api/v1/rates/series", "/api/v1/reference-rates/series")


def _known_at(path, query):
    # An instant that has come: the model is not known ahead of now.
    if "asKnownAt" not in query:
        return
    at = _instant(str(query["asKnownAt"]).upper())
    if path in _DAYS_TO_COME or at is None or at > datetime.datetime.now(datetime.timezone.utc):
        query.pop("asKnownAt", None)


def _day(text):
    try:
        return datetime.date.fromisoformat(str(text)) if len(str(text)) == 10 else None
    except ValueError:
        return None


def _history(query):
    # A day not after today (the stack's zone is UTC).
    today = datetime.datetime.now(datetime.timezone.utc).date()
    day = _day(query.get("date", ""))
    if day and day > today:
        query["date"] = today.isoformat()


def _reference_series(query):
    # From not after to (today in Addis Ababa by default).
    addis = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=3)).date()
    start, end = _day(query.get("from", "")), _day(query.get("to", "")) or addis
    if start and start > end:
        query.pop("from", None)


def _reference(body):
    # One day for every entry, today's or before in Addis Ababa; each
    # currency once; selling not below buying.
    day = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)).date().isoformat()
    seen = set()
    data = []
    for entry in body["data"]:
        if not isinstance(entry, dict):
            data.append(entry)
            continue
        currency = entry.get("currency")
        code = str(currency.get("code", "")).upper() if isinstance(currency, dict) else ""
        if code and code in seen:
            continue
        seen.add(code)
        entry["date"] = day
        try:
            if float(entry["buying"]) > float(entry["selling"]):
                entry["buying"], entry["selling"] = entry["selling"], entry["buying"]
        except (KeyError, TypeError, ValueError):
            pass
        data.append(entry)
    body["data"] = data


def _alert(body):
    # A webhook and a bank of the fuzzing key's (they must exist); a
    # threshold with at most 8 digits after the point.
    body["webhookId"] = WEBHOOK
    if "bankId" in body:
        body["bankId"] = BANK
    threshold = body.get("threshold")
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        rounded = round(float(threshold), 8)
        body["threshold"] = rounded if 0 < rounded < 1e9 else 1


@schemathesis.hook
def before_call(context, case, kwargs):
    # Every phase's cases pass here (coverage cases are not generated
    # through strategies that map_body would see).
    if case.method.upper() == "POST" and isinstance(case.body, dict):
        if case.operation.path == "/api/v1/alerts":
            _alert(case.body)
            return
        if case.operation.path == "/api/v1/webhooks" and isinstance(case.body.get("url"), str):
            # An address that resolves (loopback, allowed in this stack).
            case.body["url"] = "http://127.0.0.1:9/fuzz"
            return
    if isinstance(case.query, dict):
        _known_at(case.operation.path, case.query)
    if case.operation.path == "/api/v1/revisions" and isinstance(case.query, dict):
        _revisions(case.query)
        return
    if case.operation.path == "/api/v1/rates/series" and isinstance(case.query, dict):
        _series(case.query)
        return
    if case.operation.path == "/api/v1/history" and isinstance(case.query, dict):
        _history(case.query)
        return
    if case.operation.path == "/api/v1/reference-rates/series" and isinstance(case.query, dict):
        _reference_series(case.query)
        return
    if case.operation.path == "/v1/admin/reference-rates" and isinstance(case.body, dict):
        if isinstance(case.body.get("data"), list):
            _reference(case.body)
        return
    if case.operation.path != "/v1/banks/{bankId}/boards" or case.method.upper() != "POST":
        return
    body = case.body
    if not isinstance(body, dict) or not isinstance(body.get("rates"), list):
        return
    seen = set()
    rates = []
    for rate in body["rates"]:
        if not isinstance(rate, dict):
            rates.append(rate)
            continue
        code = str(rate.get("currency", "")).upper()
        if code in seen:
            continue
        seen.add(code)
        _pair(rate, "cashBuying", "cashSelling")
        _pair(rate, "transactionalBuying", "transactionalSelling")
        rates.append(rate)
    body["rates"] = rates
    _instant_until_now(body, "asOf")
    if isinstance(body.get("source"), dict):
        _instant_until_now(body["source"], "capturedAt")


def _instant_until_now(fields, name):
    # An instant from 1990 to the push (asOf, a source's capturedAt).
    if not isinstance(fields.get(name), str):
        return
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        instant = datetime.datetime.fromisoformat(fields[name].replace("Z", "+00:00"))
        if instant.tzinfo is None:
            raise ValueError("no offset")
        inside = datetime.datetime(1990, 1, 1, tzinfo=datetime.timezone.utc) <= instant <= now
    except ValueError:
        inside = False
    if not inside:
        fields[name] = (now - datetime.timedelta(hours=1)).isoformat()
"#;

fn schemathesis() -> anyhow::Result<PathBuf> {
    let path = std::env::var("RATEWIRE_SCHEMATHESIS_BIN").map(PathBuf::from).context(
        "RATEWIRE_SCHEMATHESIS_BIN is not set: run `deploy/stack test`, which installs schemathesis",
    )?;
    if !path.exists() {
        bail!("schemathesis is not at {}", path.display());
    }
    Ok(path)
}

/// Runs schemathesis on the document at `document` against `base`, with
/// `config` (TOML) and `headers`; fails with its report.
async fn fuzz(
    stack: &Stack,
    name: &str,
    document: &str,
    base: &str,
    config: &str,
    headers: &[String],
    state: &State,
) -> anyhow::Result<()> {
    let dir = stack.logs.join(format!("fuzz-{name}"));
    std::fs::create_dir_all(&dir)?;
    let hooks = format!(
        "WEBHOOK = {:?}\nBANK = {}\n{HOOKS}",
        state.webhook, state.bank
    );
    std::fs::write(dir.join("ratewire_fuzz_hooks.py"), hooks)?;
    let config_file = dir.join("schemathesis.toml");
    std::fs::write(&config_file, config)?;
    let mut command = tokio::process::Command::new(schemathesis()?);
    command
        .current_dir(&dir)
        .env("PYTHONPATH", &dir)
        .env("SCHEMATHESIS_HOOKS", "ratewire_fuzz_hooks")
        .arg("--config-file")
        .arg(&config_file)
        .args(["run", document, "--url", base, "--checks", CHECKS])
        // One worker: with two, hypothesis sometimes fails on its own while
        // describing a strategy (an AST race in the tool, not a finding).
        .args(["--max-examples", "60", "--workers", "1", "--no-color"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--generation-database", "none"])
        .args(["--request-timeout", "20"]);
    for header in headers {
        command.arg("--header").arg(header);
    }
    let output = command.output().await.context("running schemathesis")?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(dir.join("report.txt"), &report)?;
    if !output.status.success() {
        bail!("schemathesis found problems in the {name} document:\n{report}");
    }
    Ok(())
}

/// What exists for generated requests to name.
struct State {
    webhook: String,
    bank: i64,
}

/// Statuses that depend on what exists, not on the request's shape (and
/// 304: a generated `If-None-Match: *` names any current copy).
fn config(accepted_too: &[&str]) -> String {
    let mut statuses = vec!["2xx", "304", "401", "403", "404", "409"];
    statuses.extend_from_slice(accepted_too);
    let list = statuses
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!("[checks.positive_data_acceptance]\nexpected-statuses = [{list}]\n")
}

#[tokio::test]
async fn every_document_is_as_strict_as_its_server() -> anyhow::Result<()> {
    // Generous limits: the run is hundreds of requests from one address,
    // keyless and with made-up tokens among them.
    let stack = Stack::builder()
        .env(
            "RATEWIRE_PLANS",
            "anonymous=100000/100000000,enterprise=100000/1000000000",
        )
        .env("RATEWIRE_AUTH_FAILURES_PER_MINUTE", "100000")
        .start()
        .await?;
    let key = stack.api_key("fuzz").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let board = Board::at(ago(0, 1)).rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);
    stack.wait_served("a board", bank, &key, "155.1").await?;
    let webhook: serde_json::Value = stack
        .http()
        .post(format!("{}/api/v1/webhooks", stack.api_url))
        .header("x-api-key", &key)
        .json(&serde_json::json!({"url": "http://127.0.0.1:9/fuzz"}))
        .send()
        .await?
        .json()
        .await?;
    let state = State {
        webhook: webhook["data"]["id"]
            .as_str()
            .context("a webhook")?
            .to_owned(),
        bank,
    };

    // Half the generated ids and codes name what exists, so requests reach
    // the views and history, not only their 404s (a conversion between
    // currencies no bank quotes is one of them); the live stream never
    // ends, so it is left to its own tests (live.rs).
    let existing = format!(
        r#"{}
[dictionaries.banks]
values = [{bank}]
[dictionaries.codes]
values = ["USD", "usd"]
[dictionaries.birr]
values = ["ETB"]
[parameters]
"query.bankId" = {{ dictionary = "banks", probability = 0.5 }}
"query.currencyCode" = {{ dictionary = "codes", probability = 0.5 }}
# An endless answer: every event the live tests receive is checked against
# the document instead (tests/src/sse.rs).
[[operations]]
include-path = "/api/v1/stream"
enabled = false
[[operations]]
include-path = "/api/v1/convert"
[operations.parameters]
"query.from" = {{ dictionary = "codes", probability = 0.5 }}
"query.to" = {{ dictionary = "birr", probability = 0.5 }}
"#,
        config(&[])
    );
    fuzz(
        &stack,
        "api",
        &format!("{}/api/v1/openapi.json", stack.api_url),
        &stack.api_url,
        &existing,
        &[format!("x-api-key: {key}")],
        &state,
    )
    .await?;
    fuzz(
        &stack,
        "publisher",
        &format!("{}/v1/openapi.json", stack.ingest_url),
        &stack.ingest_url,
        // The same Idempotency-Key with another body is 422 by design.
        &format!(
            "{}\n[parameters]\n\"path.bankId\" = {bank}\n",
            config(&["422"])
        ),
        &[format!("Authorization: Bearer {token}")],
        &state,
    )
    .await?;
    for (name, url) in [
        ("ingest-operator", &stack.ingest_operator_url),
        ("api-operator", &stack.api_operator_url),
    ] {
        fuzz(
            &stack,
            name,
            &format!("{url}/v1/openapi.json"),
            url,
            &config(&[]),
            &[format!("Authorization: Bearer {ADMIN_TOKEN}")],
            &state,
        )
        .await?;
    }
    Ok(())
}
