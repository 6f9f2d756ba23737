//! The dashboard's view of what was known, and when (issue 59), in a real
//! browser: the "known at" picker shows every panel (the best rates, the
//! banks' rates and spreads, the chart, the converter, the revisions) as
//! the API answers `asKnownAt` that instant, under a banner, with the live
//! stream paused and the instant in the URL, so that a link shows the same;
//! "Back to live" follows the stream again. A bank's revision log reads as
//! a table, and a rate or a revised board opens its board's provenance.
//! Each view fits a phone's screen and a laptop's; screenshots go to
//! `target/test-artifacts/`.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use chrono::{DateTime, DurationRound, SecondsFormat, Utc};
use ratewire_e2e::browser::{fits_every_width, js, until, Chromium};
use ratewire_e2e::{ago, eventually, Board, Stack};
use serde_json::{json, Value};

/// How long the page may take to show what it reads.
const SHOWN_WITHIN: Duration = Duration::from_secs(15);

const FIELDS: [&str; 4] = [
    "cashBuying",
    "cashSelling",
    "transactionalBuying",
    "transactionalSelling",
];

/// Each bank's row of the rates table: its id and the value of each field.
const TABLE: &str = "Object.fromEntries([...document.querySelectorAll('#banks tbody tr[data-bank]')].map(r => [r.dataset.bank, Object.fromEntries([...r.querySelectorAll('td[data-field]')].map(c => [c.dataset.field, Number(c.dataset.value)]))]))";

/// Each best-rates card: its field, value and bank.
const CARDS: &str = "Object.fromEntries([...document.querySelectorAll('#best [data-field]')].map(c => [c.dataset.field, [Number(c.dataset.value), Number(c.dataset.bank)]]))";

/// Each fact of the provenance panel: its field and value.
const FACTS: &str = "Object.fromEntries([...document.querySelectorAll('#provenance dd[data-field]')].map(d => [d.dataset.field, d.dataset.value]))";

/// A board quoting the dollar, its transactional pair half a birr inside
/// its cash one.
fn usd(as_of: &str, buying: f64, selling: f64) -> Board {
    Board::at(as_of)
        .rate("USD", buying, selling)
        .transactional("USD", buying + 0.5, selling - 0.5)
}

fn field<'a>(answer: &'a Value, name: &str) -> Result<&'a str> {
    answer[name]
        .as_str()
        .with_context(|| format!("{name} in {answer}"))
}

/// Pushes `board`, requires a 202 and waits until the API serves it;
/// ingest's answer (`eventId`, `knownAt`).
async fn publish(stack: &Stack, bank: i64, token: &str, board: &Board) -> Result<Value> {
    stack.push_and_wait(bank, token, board).await
}

/// Retracts the board `event` of `bank`, with a reason; ingest's answer.
async fn retract(
    stack: &Stack,
    bank: i64,
    token: &str,
    event: &str,
    reason: &str,
) -> Result<Value> {
    let response = stack
        .http()
        .delete(format!(
            "{}/v1/banks/{bank}/boards/{event}",
            stack.ingest_url
        ))
        .bearer_auth(token)
        .json(&json!({ "reason": reason }))
        .send()
        .await?;
    let status = response.status().as_u16();
    let body: Value = response.json().await?;
    ensure!(status == 202, "retracting {event}: {status} {body}");
    Ok(body)
}

/// `path` asked as known at `at`.
fn known_at(path: &str, at: &str) -> String {
    let join = if path.contains('?') { '&' } else { '?' };
    format!("{path}{join}asKnownAt={}", at.replace('+', "%2B"))
}

/// An answer of the API, which must be a 200.
async fn answer(stack: &Stack, key: &str, path: &str) -> Result<Value> {
    let (status, body) = stack.get(path, Some(key)).await?;
    ensure!(status == 200, "{path}: {status} {body}");
    Ok(body)
}

/// A number as the page reads it (a JavaScript number, shortest form).
fn number(value: &Value) -> Value {
    value.as_f64().map_or(Value::Null, Value::from)
}

/// Each bank's USD entry in a /rates answer, by bank id, as the table holds
/// them (a bank quoting no dollar has no row).
fn usd_rows(rates: &Value) -> Result<Value> {
    let mut rows = serde_json::Map::new();
    for group in rates["data"].as_array().context("rates")? {
        let bank = &group["data"][0];
        let Some(entry) = bank["exchangeRates"]
            .as_array()
            .and_then(|e| e.iter().find(|e| e["currency"]["id"] == "USD"))
        else {
            continue;
        };
        let values: serde_json::Map<String, Value> = FIELDS
            .iter()
            .map(|f| ((*f).to_owned(), number(&entry[*f])))
            .collect();
        rows.insert(bank["id"].to_string(), Value::Object(values));
    }
    Ok(Value::Object(rows))
}

/// Every panel of `page` shows what the API answers as known at `at` (or
/// live, for `None`): the rates table, the best-rates cards, the spreads,
/// the chart's points and a conversion.
async fn panels_show(
    page: &chromiumoxide::Page,
    stack: &Stack,
    key: &str,
    at: Option<&str>,
) -> Result<()> {
    let ask = |path: &str| at.map_or_else(|| path.to_owned(), |at| known_at(path, at));
    let rates = answer(stack, key, &ask("/api/v1/rates?transactional=true")).await?;
    let expected = usd_rows(&rates)?;
    until(
        page,
        &format!("the table as known at {at:?}: {expected}"),
        &format!("JSON.stringify({TABLE}) === JSON.stringify({expected})"),
        SHOWN_WITHIN,
    )
    .await?;

    let best = answer(
        stack,
        key,
        &ask("/api/v1/rates/best-rates?currencyCode=USD"),
    )
    .await?;
    let cards = js(page, CARDS).await?;
    for name in FIELDS {
        assert_eq!(
            cards[name][0], best["data"][name]["price"],
            "{name} card at {at:?}"
        );
        assert_eq!(
            cards[name][1], best["data"][name]["bank"]["id"],
            "{name} card's bank at {at:?}"
        );
    }

    let spreads = answer(
        stack,
        key,
        &ask("/api/v1/rates/spreads?currencyCode=USD&transactional=true"),
    )
    .await?;
    let mut expected: Vec<(i64, Value)> = spreads["data"]["banks"]
        .as_array()
        .context("spreads")?
        .iter()
        .map(|b| {
            (
                b["bank"]["id"].as_i64().unwrap_or_default(),
                number(&b["cashSpread"]),
            )
        })
        .collect();
    expected.sort_by_key(|(id, _)| *id);
    let expected = serde_json::to_string(&expected)?;
    until(
        page,
        &format!("the spreads as known at {at:?}: {expected}"),
        &format!("JSON.stringify([...document.querySelectorAll('#spreads tbody tr[data-bank]')].map(r => [Number(r.dataset.bank), Number(r.querySelector('td[data-field=cashSpread]').dataset.value)]).sort((a, b) => a[0] - b[0])) === JSON.stringify({expected})"),
        SHOWN_WITHIN,
    )
    .await?;

    let now = at.map_or_else(Utc::now, |at| {
        DateTime::parse_from_rfc3339(at).map_or_else(|_| Utc::now(), |t| t.with_timezone(&Utc))
    });
    let from = (now - chrono::Duration::days(30)).format("%Y-%m-%d");
    let series = answer(
        stack,
        key,
        &ask(&format!(
            "/api/v1/rates/series?currencyCode=USD&interval=day&field=cashBuying&from={from}"
        )),
    )
    .await?;
    let points = series["data"]["points"]
        .as_array()
        .context("points")?
        .iter()
        .filter(|p| !p["value"].is_null())
        .count();
    until(
        page,
        &format!("the chart's {points} points as known at {at:?}"),
        &format!("document.querySelector('#chart').dataset.points === '{points}'"),
        SHOWN_WITHIN,
    )
    .await?;

    let converted = answer(
        stack,
        key,
        &ask("/api/v1/convert?from=USD&to=ETB&amount=100"),
    )
    .await?;
    let amount = converted["data"]["results"][0]["amount"]
        .as_f64()
        .context("an amount")?;
    js(
        page,
        "(() => { document.querySelector('#amount').value = '100'; document.querySelector('#from').value = 'USD'; document.querySelector('#to').value = 'ETB'; document.querySelector('#convert').requestSubmit(); return true; })()",
    )
    .await?;
    until(
        page,
        &format!("the conversion as known at {at:?}"),
        &format!("Number(document.querySelector('#conversions tbody tr td[data-value]')?.dataset.value) === {amount}"),
        SHOWN_WITHIN,
    )
    .await?;
    Ok(())
}

/// Shows the board in the provenance panel and checks each fact against
/// `/api/v1/boards/{event}`.
async fn panel_shows_board(
    page: &chromiumoxide::Page,
    stack: &Stack,
    key: &str,
    event: &str,
) -> Result<Value> {
    until(
        page,
        &format!("the provenance of {event}"),
        &format!("document.querySelector('#provenance').open && document.querySelector('#provenance dd[data-field=eventId]')?.dataset.value === '{event}'"),
        SHOWN_WITHIN,
    )
    .await?;
    let board = answer(stack, key, &format!("/api/v1/boards/{event}")).await?;
    let board = &board["data"];
    let facts = js(page, FACTS).await?;
    let text = |v: &Value| match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    for name in [
        "status",
        "asOf",
        "receivedAt",
        "knownAt",
        "reason",
        "eventId",
    ] {
        assert_eq!(facts[name], text(&board[name]), "{name}: {facts}");
    }
    let log = &board["log"];
    assert_eq!(
        facts["log"],
        format!(
            "{}/{}/{}",
            text(&log["topic"]),
            log["partition"],
            log["offset"]
        ),
        "{facts}"
    );
    if board["source"].is_null() {
        assert_eq!(facts["source"], "", "{facts}");
    } else {
        for (fact, name) in [
            ("source", "url"),
            ("method", "method"),
            ("capturedAt", "capturedAt"),
            ("sha256", "sha256"),
        ] {
            assert_eq!(facts[fact], text(&board["source"][name]), "{fact}: {facts}");
        }
    }
    // The rates as published.
    let rates = js(
        page,
        "Object.fromEntries([...document.querySelectorAll('#provenance-rates tbody tr')].map(r => [r.dataset.currency, Object.fromEntries([...r.querySelectorAll('td[data-field]')].map(c => [c.dataset.field, c.dataset.value === '' ? null : Number(c.dataset.value)]))]))",
    )
    .await?;
    for rate in board["rates"].as_array().context("rates")? {
        let currency = field(&rate["currency"], "id")?;
        for name in FIELDS {
            assert_eq!(rates[currency][name], rate[name], "{currency} {name}");
        }
    }
    // And what revised it.
    let revisions: Vec<Value> = board["revisions"]
        .as_array()
        .context("revisions")?
        .iter()
        .map(|r| r["eventId"].clone())
        .collect();
    let shown = js(
        page,
        "[...document.querySelectorAll('#provenance-revisions li[data-event]')].map(l => l.dataset.event)",
    )
    .await?;
    assert_eq!(shown, Value::Array(revisions));
    Ok(board.clone())
}

async fn close_panel(page: &chromiumoxide::Page) -> Result<()> {
    js(
        page,
        "document.querySelector('#provenance-close').click(); true",
    )
    .await?;
    until(
        page,
        "the panel closed",
        "!document.querySelector('#provenance').open",
        SHOWN_WITHIN,
    )
    .await
}

/// Clicks the rate `field` of `bank` in the rates table.
async fn click_rate(page: &chromiumoxide::Page, bank: i64, field: &str) -> Result<()> {
    let clicked = js(page, &format!("(() => {{ const b = document.querySelector('#banks tr[data-bank=\"{bank}\"] td[data-field={field}] button.rate'); b?.click(); return !!b; }})()")).await?;
    ensure!(clicked == true, "bank {bank}'s {field} is a button");
    Ok(())
}

/// A page of the dashboard as known at `at`, by its link.
async fn open_at(
    chromium: &Chromium,
    stack: &Stack,
    key: &str,
    at: &str,
) -> Result<chromiumoxide::Page> {
    let path = format!("/?currency=USD&knownAt={}", at.replace(':', "%3A"));
    let page = chromium.open_with_key(stack, key, &path).await?;
    until(
        &page,
        &format!("the banner of {at}"),
        &format!("!document.querySelector('#known-at-banner').hidden && document.querySelector('#known-at-time').dateTime === '{at}'"),
        SHOWN_WITHIN,
    )
    .await?;
    Ok(page)
}

/// Chooses `bank` for the revision log.
async fn choose_revisions_of(page: &chromiumoxide::Page, bank: i64) -> Result<()> {
    let chosen = js(page, &format!("(() => {{ const s = document.querySelector('#revisions-bank'); s.value = '{bank}'; s.dispatchEvent(new Event('change')); return s.value === '{bank}'; }})()")).await?;
    ensure!(chosen == true, "bank {bank} among the revision log's banks");
    Ok(())
}

#[tokio::test]
async fn the_dashboard_shows_what_was_known_the_revision_log_and_where_a_board_came_from(
) -> Result<()> {
    let stack = Stack::start().await?;
    let (cbe, cbe_token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    let key = stack.api_key("known-at").await?;

    // Before: CBE's board, with where it came from, then Awash's.
    let source = json!({"url": "https://combanketh.example/en/exchange-rate", "method": "page",
        "capturedAt": ago(0, 3), "sha256": "9f".repeat(32)});
    let first = publish(
        &stack,
        cbe,
        &cbe_token,
        &usd(&ago(0, 3), 155.10, 158.20).source(source.clone()),
    )
    .await?;
    let awash_board = publish(
        &stack,
        awash,
        &awash_token,
        &usd(&ago(0, 2), 154.90, 158.00),
    )
    .await?;
    // The instant to show: the next whole second after both became known
    // (the picker takes whole seconds), and nothing more known until then.
    let known: DateTime<Utc> =
        DateTime::parse_from_rfc3339(field(&awash_board, "knownAt")?)?.into();
    let then = known.duration_trunc(chrono::Duration::seconds(1))? + chrono::Duration::seconds(1);
    eventually("the instant passed", Duration::from_secs(3), || async {
        (Utc::now() > then + chrono::Duration::milliseconds(50)).then_some(())
    })
    .await?;
    let then_text = then.to_rfc3339_opts(SecondsFormat::Millis, true);

    // After: CBE's board with a typo and its correction, with a reason;
    // Awash retracts its board.
    let typo_as_of = ago(0, 1);
    let typo = publish(&stack, cbe, &cbe_token, &usd(&typo_as_of, 1553.5, 1584.0)).await?;
    let reason = "the 1-hour board was read ten times too high";
    let correction = publish(
        &stack,
        cbe,
        &cbe_token,
        &usd(&typo_as_of, 155.35, 158.40)
            .reason(reason)
            .source(json!({"method": "manual"})),
    )
    .await?;
    let retraction_reason = "published in error";
    let retraction = retract(
        &stack,
        awash,
        &awash_token,
        field(&awash_board, "eventId")?,
        retraction_reason,
    )
    .await?;
    eventually("the retraction served", Duration::from_secs(30), || async {
        let (_, body) = stack
            .get(&format!("/api/v1/rates?bankId={awash}"), Some(&key))
            .await
            .ok()?;
        (!body.to_string().contains("154.9")).then_some(())
    })
    .await?;

    let chromium = Chromium::launch(&stack).await?;
    let page = chromium
        .open_with_key(&stack, &key, "/?currency=USD")
        .await?;
    until(
        &page,
        "the stream live",
        "document.querySelector('#live').dataset.state === 'live'",
        SHOWN_WITHIN,
    )
    .await?;
    panels_show(&page, &stack, &key, None).await?;

    // The picker: every panel as known then, under the banner, the stream
    // paused and the instant in the URL.
    js(
        &page,
        &format!("(() => {{ document.querySelector('#known-at').value = '{}'; document.querySelector('#known-at-form').requestSubmit(); return true; }})()",
            then.format("%Y-%m-%dT%H:%M:%S")),
    )
    .await?;
    until(
        &page,
        "the banner",
        &format!("!document.querySelector('#known-at-banner').hidden && document.querySelector('#known-at-banner').textContent.includes('Showing what was known at') && document.querySelector('#known-at-banner').textContent.includes('{} (UTC)') && document.querySelector('#known-at-time').dateTime === '{then_text}'",
            then.format("%Y-%m-%d %H:%M:%S")),
        SHOWN_WITHIN,
    )
    .await?;
    until(
        &page,
        "the instant in the URL and the stream paused",
        &format!("new URLSearchParams(location.search).get('knownAt') === '{then_text}' && document.querySelector('#live').dataset.state === 'paused'"),
        SHOWN_WITHIN,
    )
    .await?;
    // The reference view (spreads) is among the panels.
    js(
        &page,
        "document.querySelector('input[name=view][value=reference]').click(); true",
    )
    .await?;
    panels_show(&page, &stack, &key, Some(&then_text)).await?;
    // Both banks, at their first boards: no typo, no retraction yet.
    let table = js(&page, TABLE).await?;
    assert_eq!(table[cbe.to_string()]["cashBuying"], 155.10, "{table}");
    assert_eq!(table[awash.to_string()]["cashBuying"], 154.90, "{table}");
    // The revision log as known then: nothing revised yet.
    choose_revisions_of(&page, cbe).await?;
    until(
        &page,
        "no revision then",
        "document.querySelectorAll('#revisions tbody tr[data-event]').length === 0 && document.querySelector('#revisions tbody').textContent.includes('revised no board')",
        SHOWN_WITHIN,
    )
    .await?;
    fits_every_width(&page, "dashboard-known-at").await?;

    // A rate opens its board as it was then: CBE's first, with its source,
    // and a note that its status is today's.
    js(
        &page,
        "document.querySelector('input[name=view][value=rates]').click(); true",
    )
    .await?;
    click_rate(&page, cbe, "cashBuying").await?;
    let board = panel_shows_board(&page, &stack, &key, field(&first, "eventId")?).await?;
    assert_eq!(board["source"], source);
    assert_eq!(board["status"], "superseded", "later boards came");
    assert_eq!(
        js(
            &page,
            "document.querySelector('#provenance').textContent.includes('as known now')"
        )
        .await?,
        true
    );
    close_panel(&page).await?;

    // While the past is shown, a new board does not reach the page.
    let latest = publish(&stack, cbe, &cbe_token, &usd(&ago(0, 0), 161.5, 165.0)).await?;
    let table = js(&page, TABLE).await?;
    assert_eq!(table[cbe.to_string()]["cashBuying"], 155.10, "{table}");

    // A link with the instant (to the millisecond: the instant CBE's first
    // board became known, before Awash's) shows the same as the API.
    let first_known = field(&first, "knownAt")?;
    let linked = open_at(&chromium, &stack, &key, first_known).await?;
    panels_show(&linked, &stack, &key, Some(first_known)).await?;
    // A tab in the background is not laid out again: the first comes back.
    linked.close().await?;
    page.bring_to_front().await?;

    // Back to live: the banner goes, the stream follows again, the URL
    // forgets the instant, and the latest board shows.
    js(
        &page,
        "document.querySelector('#back-to-live').click(); true",
    )
    .await?;
    until(
        &page,
        "live again",
        "document.querySelector('#known-at-banner').hidden && document.querySelector('#live').dataset.state === 'live' && !new URLSearchParams(location.search).has('knownAt')",
        SHOWN_WITHIN,
    )
    .await?;
    panels_show(&page, &stack, &key, None).await?;
    let table = js(&page, TABLE).await?;
    assert_eq!(table[cbe.to_string()]["cashBuying"], 161.5, "{table}");

    // The revision log: CBE's correction, with its reason and change.
    choose_revisions_of(&page, cbe).await?;
    until(
        &page,
        "CBE's correction in the log",
        &format!("document.querySelector('#revisions tbody tr[data-event=\"{}\"]')?.dataset.kind === 'correction'", field(&correction, "eventId")?),
        SHOWN_WITHIN,
    )
    .await?;
    let logged = answer(&stack, &key, &format!("/api/v1/revisions?bankId={cbe}")).await?;
    let rows = js(
        &page,
        "[...document.querySelectorAll('#revisions tbody tr[data-event]')].map(r => ({ eventId: r.dataset.event, revisedEventId: r.dataset.revised, kind: r.dataset.kind, knownAt: r.querySelector('[data-field=knownAt] time').dateTime, reason: r.querySelector('[data-field=reason]').textContent, changes: [...r.querySelectorAll('[data-field=changes] li')].map(l => [l.dataset.currency, l.dataset.field, l.dataset.before, l.dataset.after]) }))",
    )
    .await?;
    let expected: Vec<Value> = logged["data"]["revisions"]
        .as_array()
        .context("revisions")?
        .iter()
        .map(|r| {
            json!({
                "eventId": r["eventId"], "revisedEventId": r["revisedEventId"], "kind": r["kind"],
                "knownAt": r["knownAt"], "reason": r["reason"],
                "changes": r["changes"].as_array().into_iter().flatten().map(|c| json!([
                    c["currencyCode"], c["field"], c["before"].to_string(),
                    if c["after"].is_null() { String::new() } else { c["after"].to_string() },
                ])).collect::<Vec<_>>(),
            })
        })
        .collect();
    assert_eq!(rows, Value::Array(expected), "the revision table");
    assert_eq!(rows[0]["reason"], reason);
    assert_eq!(rows[0]["revisedEventId"], field(&typo, "eventId")?);
    // Awash's retraction, with its reason: every value withdrawn.
    choose_revisions_of(&page, awash).await?;
    until(
        &page,
        "Awash's retraction in the log",
        &format!("(() => {{ const r = document.querySelector('#revisions tbody tr[data-event=\"{}\"]'); return r?.dataset.kind === 'retraction' && r.querySelector('[data-field=reason]').textContent === '{retraction_reason}' && r.querySelectorAll('[data-field=changes] li[data-after=\"\"]').length === 4; }})()", field(&retraction, "eventId")?),
        SHOWN_WITHIN,
    )
    .await?;
    fits_every_width(&page, "dashboard-revisions").await?;

    // The typo's board from the log: corrected, and by what.
    choose_revisions_of(&page, cbe).await?;
    let typo_id = field(&typo, "eventId")?;
    until(
        &page,
        "the typo's board named in the log",
        &format!("!!document.querySelector('#revisions [data-field=asOf] button[data-board=\"{typo_id}\"]')"),
        SHOWN_WITHIN,
    )
    .await?;
    js(
        &page,
        &format!("document.querySelector('#revisions [data-field=asOf] button[data-board=\"{typo_id}\"]').click(); true"),
    )
    .await?;
    let board = panel_shows_board(&page, &stack, &key, typo_id).await?;
    assert_eq!(board["status"], "corrected");
    fits_every_width(&page, "dashboard-provenance").await?;
    close_panel(&page).await?;

    // A rate of the latest board: in force.
    click_rate(&page, cbe, "cashSelling").await?;
    let board = panel_shows_board(&page, &stack, &key, field(&latest, "eventId")?).await?;
    assert_eq!(board["status"], "inForce");
    close_panel(&page).await?;

    // As known when the typo was, CBE's rate is the typo's, and its panel
    // shows the typo's board, corrected since, though a correction of the
    // same asOf is in force now.
    let typo_known = field(&typo, "knownAt")?;
    let then_page = open_at(&chromium, &stack, &key, typo_known).await?;
    until(
        &then_page,
        "the typo's rate shown",
        &format!("Number(document.querySelector('#banks tr[data-bank=\"{cbe}\"] td[data-field=cashBuying]')?.dataset.value) === 1553.5"),
        SHOWN_WITHIN,
    )
    .await?;
    click_rate(&then_page, cbe, "cashBuying").await?;
    let board = panel_shows_board(&then_page, &stack, &key, typo_id).await?;
    assert_eq!(board["status"], "corrected");
    then_page.close().await?;

    // As known just before the latest board, CBE's rate is the
    // correction's: its panel shows the correcting board, its source and
    // reason.
    let before_latest: DateTime<Utc> =
        DateTime::parse_from_rfc3339(field(&latest, "knownAt")?)?.into();
    let before_latest = (before_latest - chrono::Duration::milliseconds(1))
        .to_rfc3339_opts(SecondsFormat::Millis, true);
    let corrected = open_at(&chromium, &stack, &key, &before_latest).await?;
    until(
        &corrected,
        "the correction's rate shown",
        &format!("Number(document.querySelector('#banks tr[data-bank=\"{cbe}\"] td[data-field=cashBuying]')?.dataset.value) === 155.35"),
        SHOWN_WITHIN,
    )
    .await?;
    click_rate(&corrected, cbe, "cashBuying").await?;
    let board = panel_shows_board(&corrected, &stack, &key, field(&correction, "eventId")?).await?;
    assert_eq!(board["reason"], reason);
    assert_eq!(board["source"]["method"], "manual");
    assert_eq!(board["status"], "superseded", "the latest board came after");

    let errors = chromium.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    chromium.close().await;
    Ok(())
}
