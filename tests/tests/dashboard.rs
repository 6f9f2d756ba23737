//! The dashboard and the API reference in a real browser (the system's
//! chromium, headless, driven over the DevTools protocol): the page loads
//! with no console errors, shows what the API says, follows a pushed board
//! live, draws the series, converts like the convert endpoint, tells a
//! refused key, and `/docs` lists every endpoint. Every view fits a phone's
//! screen and a laptop's, with no cell or caption cut. Screenshots of each
//! view at each width go to `target/test-artifacts/`.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chromiumoxide::page::ScreenshotParams;
use chrono::Datelike;
use futures_util::StreamExt;
use ratewire_e2e::browser::{
    artifacts, enter_key, fits, fits_every_width, js, until, Chromium, WIDTHS,
};
use ratewire_e2e::{ago, earlier_today, eventually, reference_day, Board, Stack};
use serde_json::Value;

/// What the issue promises a reader: a pushed board on the page within 2 s.
const LIVE_WITHIN: Duration = Duration::from_secs(2);
/// The page's whole payload, compressed.
const PAYLOAD_BUDGET: usize = 150 * 1024;
/// How long the page may take to show what it loads.
const LOADED_WITHIN: Duration = Duration::from_secs(15);

/// The entries of `/docs`' endpoint list that are split across its columns,
/// or whose path is (its text from the first `/` to the next space).
const SPLIT_PATHS: &str = r"[...document.querySelectorAll('#toc li')].filter((li) => {
  if (li.getClientRects().length !== 1) return true;
  const walker = document.createTreeWalker(li, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const start = node.data.indexOf('/');
    if (start < 0) continue;
    const path = document.createRange();
    path.setStart(node, start);
    path.setEnd(node, start + node.data.slice(start).search(/\s|$/));
    return path.getClientRects().length !== 1;
  }
  return true;
}).map((li) => li.textContent)";

/// Whether the chart's legend is shown, names the National Bank's line, and
/// overlaps none of the lines drawn.
const LEGEND_CLEAR: &str = r"(() => {
  const legend = document.querySelector('.chart .legend');
  if (!legend || legend.getClientRects().length === 0 || !legend.textContent.includes('National Bank')) return false;
  const box = legend.getBoundingClientRect();
  return [...document.querySelectorAll('#chart path')].every((path) => {
    const line = path.getBoundingClientRect();
    return box.bottom <= line.top || box.top >= line.bottom || box.right <= line.left || box.left >= line.right;
  });
})()";

/// A board of `rates` (currency, cash buying and selling), each with
/// transactional rates half a birr inside its cash ones.
fn board(rates: &[(&str, f64, f64)], as_of: &str) -> Board {
    rates
        .iter()
        .fold(Board::at(as_of), |board, &(currency, buying, selling)| {
            board.rate(currency, buying, selling).transactional(
                currency,
                buying + 0.5,
                selling - 0.5,
            )
        })
}

/// The weekdays among the last `days` days (today included), oldest first,
/// each with how many days back it is: the days the National Bank
/// publishes.
fn weekdays_back(days: i64) -> Vec<(i64, chrono::NaiveDate)> {
    let today = chrono::Utc::now().date_naive();
    (0..days)
        .rev()
        .map(|back| (back, today - chrono::Duration::days(back)))
        .filter(|(_, date)| !matches!(date.weekday(), chrono::Weekday::Sat | chrono::Weekday::Sun))
        .collect()
}

/// Imports the National Bank's reference for `date` (`usd` for the dollar).
async fn import_reference(stack: &Stack, date: chrono::NaiveDate, usd: f64) -> Result<()> {
    let response = stack
        .http()
        .post(format!(
            "{}/v1/admin/reference-rates",
            stack.ingest_operator_url
        ))
        .bearer_auth(ratewire_e2e::ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(reference_day(date, usd))
        .send()
        .await?;
    anyhow::ensure!(
        response.status() == 202,
        "the reference of {date}: {}",
        response.status()
    );
    Ok(())
}

/// Two banks quoting USD, EUR and AED (the longest currency name the
/// header's choice must hold on a phone), CBE with a board on each of the
/// last six days (for the chart).
async fn seeded() -> Result<(Stack, i64, String, i64)> {
    let stack = Stack::start().await?;
    let (cbe, cbe_token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    for day in (1..=6).rev() {
        let usd = 150.0 + day as f64;
        let status = stack
            .publish_board(
                cbe,
                &cbe_token,
                board(
                    &[("USD", usd, usd + 4.0), ("EUR", 170.0, 176.0)],
                    &ago(day, 0),
                ),
            )
            .await?
            .0;
        assert_eq!(status, 202);
    }
    let status = stack
        .publish_board(
            cbe,
            &cbe_token,
            board(
                &[
                    ("USD", 155.25, 159.0),
                    ("EUR", 171.5, 177.0),
                    ("AED", 42.0, 43.5),
                ],
                &earlier_today(),
            ),
        )
        .await?
        .0;
    assert_eq!(status, 202);
    let status = stack
        .publish_board(
            awash,
            &awash_token,
            board(
                &[
                    ("USD", 154.75, 158.5),
                    ("EUR", 172.25, 176.5),
                    ("AED", 42.1, 43.4),
                ],
                &earlier_today(),
            ),
        )
        .await?
        .0;
    assert_eq!(status, 202);
    let key = stack.api_key("browser").await?;
    stack
        .wait_served("CBE's board", cbe, &key, "155.25")
        .await?;
    stack
        .wait_served("Awash's board", awash, &key, "154.75")
        .await?;
    Ok((stack, cbe, cbe_token, awash))
}

#[tokio::test]
async fn the_dashboard_shows_the_api_and_follows_it_live() -> Result<()> {
    let (stack, cbe, cbe_token, _) = seeded().await?;
    let key = stack.api_key("reader").await?;
    let chromium = Chromium::launch(&stack).await?;
    let page = chromium
        .open(&format!("{}/?currency=USD", stack.api_url))
        .await?;

    // No key yet: the page asks for one, once, and its live badge says what
    // it waits for rather than "connecting".
    until(
        &page,
        "the live badge asking for a key",
        "(() => { const live = document.querySelector('#live'); return live.dataset.state !== 'connecting' && live.textContent.includes('API key'); })()",
        LOADED_WITHIN,
    )
    .await?;
    enter_key(&page, &key, LOADED_WITHIN).await?;
    until(
        &page,
        "the table filled",
        "document.querySelectorAll('#banks tbody tr[data-bank]').length === 2",
        LOADED_WITHIN,
    )
    .await?;
    let form = js(
        &page,
        "getComputedStyle(document.querySelector('#key-form')).display",
    )
    .await?;
    assert_eq!(form, "none", "the key form is put away once the key works");

    // The best-rates cards show what best-rates says.
    let (_, best) = stack
        .get("/api/v1/rates/best-rates?currencyCode=USD", Some(&key))
        .await?;
    let cards = js(
        &page,
        "Object.fromEntries([...document.querySelectorAll('#best [data-field]')].map(c => [c.dataset.field, [Number(c.dataset.value), Number(c.dataset.bank)]]))",
    )
    .await?;
    for field in [
        "cashBuying",
        "cashSelling",
        "transactionalBuying",
        "transactionalSelling",
    ] {
        assert_eq!(
            cards[field][0], best["data"][field]["price"],
            "{field} card"
        );
        assert_eq!(
            cards[field][1], best["data"][field]["bank"]["id"],
            "{field} card's bank"
        );
    }

    // The table shows each bank's values as /rates has them.
    let (_, rates) = stack
        .get("/api/v1/rates?transactional=true", Some(&key))
        .await?;
    let shown = js(
        &page,
        "Object.fromEntries([...document.querySelectorAll('#banks tbody tr[data-bank]')].map(r => [r.dataset.bank, Object.fromEntries([...r.querySelectorAll('td[data-field]')].map(c => [c.dataset.field, Number(c.dataset.value)]))]))",
    )
    .await?;
    for group in rates["data"].as_array().context("rates")? {
        let bank = &group["data"][0];
        let usd = bank["exchangeRates"]
            .as_array()
            .context("exchangeRates")?
            .iter()
            .find(|e| e["currency"]["id"] == "USD")
            .context("a USD entry")?;
        for field in [
            "cashBuying",
            "cashSelling",
            "transactionalBuying",
            "transactionalSelling",
        ] {
            assert_eq!(
                shown[bank["id"].to_string()][field],
                usd[field],
                "bank {} {field}",
                bank["id"]
            );
        }
    }

    // The chart draws the series' points (the best cash buying over 30 days).
    let from = (chrono::Utc::now() - chrono::Duration::days(30)).format("%Y-%m-%d");
    let (_, series) = stack
        .get(
            &format!(
                "/api/v1/rates/series?currencyCode=USD&interval=day&field=cashBuying&from={from}"
            ),
            Some(&key),
        )
        .await?;
    let points = series["data"]["points"]
        .as_array()
        .context("points")?
        .iter()
        .filter(|p| !p["value"].is_null())
        .count();
    assert!(points >= 7, "a week of days with rates, saw {points}");
    until(
        &page,
        "the chart drawn",
        &format!("document.querySelector('#chart').dataset.points === '{points}' && !!document.querySelector('#chart path.line')"),
        LOADED_WITHIN,
    )
    .await?;

    // The converter gives what the convert endpoint gives.
    let (_, converted) = stack
        .get("/api/v1/convert?from=USD&to=ETB&amount=250", Some(&key))
        .await?;
    js(
        &page,
        "(() => { document.querySelector('#amount').value = '250'; document.querySelector('#from').value = 'USD'; document.querySelector('#to').value = 'ETB'; document.querySelector('#convert').requestSubmit(); return true; })()",
    )
    .await?;
    let expected = converted["data"]["results"][0]["amount"]
        .as_f64()
        .context("an amount")?;
    until(
        &page,
        "the conversion shown",
        &format!("Number(document.querySelector('#conversions tbody tr td[data-value]')?.dataset.value) === {expected}"),
        LOADED_WITHIN,
    )
    .await?;
    let first_bank = js(
        &page,
        "document.querySelector('#conversions tbody tr').dataset.bank",
    )
    .await?;
    assert_eq!(
        first_bank.as_str().map(str::to_owned),
        Some(converted["data"]["results"][0]["bank"]["id"].to_string())
    );

    // A board pushed while the page is open shows without a reload.
    until(
        &page,
        "the stream live",
        "document.querySelector('#live').dataset.state === 'live'",
        LOADED_WITHIN,
    )
    .await?;
    let pushed = stack
        .publish_board(
            cbe,
            &cbe_token,
            board(&[("USD", 161.5, 165.0), ("EUR", 171.5, 177.0)], &ago(0, 0)),
        )
        .await?;
    let accepted = Instant::now();
    assert_eq!(pushed.0, 202);
    until(
        &page,
        "the pushed board in the table",
        &format!("Number(document.querySelector('#banks tr[data-bank=\"{cbe}\"] td[data-field=cashBuying]')?.dataset.value) === 161.5"),
        LIVE_WITHIN,
    )
    .await?;
    let shown_after = accepted.elapsed();
    assert!(
        shown_after <= LIVE_WITHIN,
        "shown {shown_after:?} after the 202"
    );
    // And it is the best buyer now.
    until(
        &page,
        "the best card updated",
        "Number(document.querySelector('#best [data-field=cashBuying]').dataset.value) === 161.5",
        LIVE_WITHIN,
    )
    .await?;
    // The view is in the URL, so a link shows the same.
    let url = js(&page, "location.search").await?;
    assert!(
        url.as_str().unwrap_or_default().contains("currency=USD"),
        "{url}"
    );

    let errors = chromium.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");

    page.save_screenshot(
        ScreenshotParams::builder().full_page(true).build(),
        artifacts().join("dashboard-desktop.png"),
    )
    .await?;
    // The rates, the chart and a conversion on a phone and a laptop.
    fits_every_width(&page, "dashboard-rates").await?;

    // Another tab with a refused key is told so.
    let refused = chromium
        .open_with_key(&stack, "rwk_notakey_00000000000000000000000000000000", "/")
        .await?;
    until(
        &refused,
        "the 401 message",
        "!document.querySelector('#key-form').hidden && document.querySelector('#key-reason').textContent.includes('Invalid API key')",
        LOADED_WITHIN,
    )
    .await?;
    chromium.close().await;
    Ok(())
}

#[tokio::test]
async fn without_keys_the_page_needs_none_and_the_reference_lists_every_endpoint() -> Result<()> {
    // The anonymous minute holds the dashboard's reads and refreshes and the
    // reference's "Try it" while both pages are measured at two widths.
    let stack = Stack::builder()
        .env("RATEWIRE_ANONYMOUS_ACCESS", "true")
        .env(
            "RATEWIRE_PLANS",
            "free=60/10000/1,pro=1000/1000000/10,enterprise=100000/1000000000/1000,anonymous=60/10000/1,tiny=2/1000/1",
        )
        .start()
        .await?;
    let (bank, token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    assert_eq!(
        stack
            .publish_board(bank, &token, board(&[("USD", 155.25, 159.0)], &ago(0, 1)))
            .await?
            .0,
        202
    );
    let key = stack.api_key("waiting").await?;
    stack.wait_served("the board", bank, &key, "155.25").await?;

    let chromium = Chromium::launch(&stack).await?;
    let page = chromium.open(&format!("{}/", stack.api_url)).await?;
    until(
        &page,
        "the table filled without a key",
        "document.querySelectorAll('#banks tbody tr[data-bank]').length === 1 && document.querySelector('#key-form').hidden",
        LOADED_WITHIN,
    )
    .await?;
    until(
        &page,
        "the stream live",
        "document.querySelector('#live').dataset.state === 'live'",
        LOADED_WITHIN,
    )
    .await?;

    let docs = chromium.open(&format!("{}/docs", stack.api_url)).await?;
    let spec: Value = stack
        .http()
        .get(format!("{}/api/v1/openapi.json", stack.api_url))
        .send()
        .await?
        .json()
        .await?;
    let mut paths: Vec<String> = spec["paths"]
        .as_object()
        .context("paths")?
        .keys()
        .cloned()
        .collect();
    paths.sort();
    until(
        &docs,
        "the operations listed",
        "document.querySelectorAll('section[data-path]').length > 0",
        LOADED_WITHIN,
    )
    .await?;
    let listed = js(&docs, "[...new Set([...document.querySelectorAll('section[data-path]')].map(s => s.dataset.path))].sort()").await?;
    let listed: Vec<String> = serde_json::from_value(listed)?;
    assert_eq!(
        listed, paths,
        "every endpoint of the OpenAPI document, and only those"
    );
    // Trying one from the page answers it.
    js(&docs, "(() => { const s = document.querySelector('section[data-path=\"/api/v1/currencies\"]'); s.querySelector('details').open = true; s.querySelector('form').requestSubmit(); return true; })()").await?;
    until(
        &docs,
        "the tried request answered",
        "document.querySelector('section[data-path=\"/api/v1/currencies\"] .answer')?.textContent.includes('200')",
        LOADED_WITHIN,
    )
    .await?;

    // On a phone and a laptop, an answer open: nothing wider than the
    // screen, and no path split across the endpoint list's columns or lines.
    for width in WIDTHS {
        fits(&docs, "docs", width).await?;
        let split = js(&docs, SPLIT_PATHS).await?;
        assert_eq!(split, Value::Array(vec![]), "paths split at {width} px");
    }
    let errors = chromium.errors();
    assert!(errors.is_empty(), "the pages reported errors: {errors:#?}");

    // A key over its plan's minute is told when to come back.
    let tiny = stack.api_key_on("tiny", "tiny").await?;
    let limited = chromium.open_with_key(&stack, &tiny, "/").await?;
    until(
        &limited,
        "the 429 message",
        "/Rate limit exceeded\\. Try again in \\d+ s\\./.test(document.querySelector('#notice').textContent) && !document.querySelector('#notice').hidden",
        LOADED_WITHIN,
    )
    .await?;
    chromium.close().await;
    Ok(())
}

#[tokio::test]
async fn the_pages_are_small_strict_and_cached() -> Result<()> {
    let stack = Stack::start().await?;
    let http = stack.http();
    let get = |path: &str, accept_gzip: bool| {
        let mut request = http.get(format!("{}{path}", stack.api_url));
        if accept_gzip {
            request = request.header("accept-encoding", "gzip");
        }
        request.send()
    };
    let index = get("/", true).await?;
    assert_eq!(index.status(), 200);
    let csp = index.headers()["content-security-policy"]
        .to_str()?
        .to_owned();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert_eq!(index.headers()["content-encoding"], "gzip");
    let html = String::from_utf8_lossy(&{
        let plain = get("/", false).await?;
        plain.bytes().await?
    })
    .into_owned();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page loads nothing from elsewhere"
    );

    // Everything the dashboard loads, as a browser gets it: the files the
    // page names and the modules each module imports.
    let mut total = index.bytes().await?.len();
    let mut files = vec![("/".to_owned(), total)];
    let mut wanted: Vec<String> = html
        .split("/assets/")
        .skip(1)
        .filter_map(|reference| reference.split('"').next())
        .map(str::to_owned)
        .collect();
    while let Some(asset) = wanted.pop() {
        if files.iter().any(|(file, _)| *file == asset) {
            continue;
        }
        let text = get(&format!("/assets/{asset}"), false)
            .await?
            .text()
            .await?;
        wanted.extend(
            text.lines()
                .filter_map(|line| line.split("from './").nth(1))
                .filter_map(|module| module.split('\'').next())
                .map(str::to_owned),
        );
        let response = get(&format!("/assets/{asset}"), true).await?;
        assert_eq!(response.status(), 200, "{asset}");
        assert!(response.headers().contains_key("etag"), "{asset}");
        let size = response.bytes().await?.len();
        files.push((asset, size));
        total += size;
    }
    assert!(
        files.len() >= 10,
        "the page and its styles and modules: {files:?}"
    );
    std::fs::write(
        artifacts().join("dashboard-payload.txt"),
        format!("{files:?}\ntotal {total} bytes gzipped (budget {PAYLOAD_BUDGET})\n"),
    )?;
    assert!(
        total < PAYLOAD_BUDGET,
        "the dashboard weighs {total} bytes gzipped: {files:?}"
    );

    // Unchanged: 304. Unknown: 404 as JSON, with the same strict headers.
    let first = get("/assets/app.js", true).await?;
    let etag = first.headers()["etag"].clone();
    let again = http
        .get(format!("{}/assets/app.js", stack.api_url))
        .header("accept-encoding", "gzip")
        .header("if-none-match", etag)
        .send()
        .await?;
    assert_eq!(again.status(), 304);
    let missing = get("/assets/nothing.js", false).await?;
    assert_eq!(missing.status(), 404);
    assert!(missing.headers().contains_key("content-security-policy"));
    assert_eq!(get("/assets/index.html", false).await?.status(), 404);
    // The pages need no key; the data behind them still does.
    assert_eq!(get("/docs", false).await?.status(), 200);
    assert_eq!(get("/api/v1/currencies", false).await?.status(), 401);
    Ok(())
}

#[tokio::test]
async fn the_national_bank_view_shows_spreads_premiums_and_stale_boards() -> Result<()> {
    let (stack, cbe, _, awash) = seeded().await?;
    // A bank quoting cash only, with a board of five days ago: stale. Its
    // spread is 2.5 % exactly, which must still show four decimals.
    let (dashen, dashen_token) = stack.bank_with_token("DASHEN", "Dashen Bank").await?;
    let cash_only = Board::at(ago(5, 0)).rate("USD", "158", "162");
    assert_eq!(
        stack
            .publish_board(dashen, &dashen_token, &cash_only)
            .await?
            .0,
        202
    );
    // A reference for each of the last ten days (weekdays only, as
    // published), each day's different.
    let days = weekdays_back(10);
    for &(back, date) in &days {
        import_reference(&stack, date, 150.0 + back as f64 / 2.0).await?;
    }
    let last = days.last().context("a weekday")?.1.to_string();
    let key = stack.api_key("reference-view").await?;
    stack
        .wait_served("Dashen's board", dashen, &key, "162")
        .await?;
    let spreads = eventually("the premiums computed", Duration::from_secs(30), || async {
        let (_, body) = stack
            .get(
                "/api/v1/rates/spreads?currencyCode=USD&transactional=true",
                Some(&key),
            )
            .await
            .ok()?;
        // Every day folded: the last one is in force.
        let banks = body["data"]["banks"].as_array()?;
        (banks.len() == 3
            && body["data"]["reference"]["date"] == last.as_str()
            && banks
                .iter()
                .all(|b| b["cashBuyingPremiumPercent"].is_number()))
        .then_some(body)
    })
    .await?;

    let chromium = Chromium::launch(&stack).await?;
    let page = chromium
        .open_with_key(&stack, &key, "/?currency=USD&view=reference&reference=1")
        .await?;
    until(
        &page,
        "the National Bank view filled",
        "document.querySelectorAll('#spreads tbody tr[data-bank]').length === 3 && !document.querySelector('#spreads').hidden",
        LOADED_WITHIN,
    )
    .await?;

    // Each row as the spreads endpoint says, narrowest spread first.
    let shown = js(
        &page,
        "[...document.querySelectorAll('#spreads tbody tr[data-bank]')].map(r => [Number(r.dataset.bank), Object.fromEntries([...r.querySelectorAll('td[data-field]')].map(c => [c.dataset.field, c.dataset.value === '' ? null : Number(c.dataset.value)])), r.classList.contains('stale')])",
    )
    .await?;
    let rows = spreads["data"]["banks"].as_array().context("banks")?;
    for (row, expected) in shown.as_array().context("rows")?.iter().zip(rows) {
        assert_eq!(row[0], expected["bank"]["id"]);
        for field in [
            "cashSpread",
            "cashSpreadPercent",
            "cashBuyingPremiumPercent",
            "cashSellingPremiumPercent",
            "transactionalSpreadPercent",
        ] {
            assert_eq!(row[1][field], expected[field], "bank {} {field}", row[0]);
        }
        assert_eq!(row[2], expected["stale"], "bank {} stale", row[0]);
    }
    // Percentages line up: four decimals each, as the API has them.
    let ragged = js(
        &page,
        r"[...document.querySelectorAll('#spreads td[data-field$=Percent]')].filter(c => c.dataset.value !== '' && !/^[+-]?\d+\.\d{4} %$/.test(c.textContent)).map(c => c.textContent)",
    )
    .await?;
    assert_eq!(
        ragged,
        Value::Array(vec![]),
        "percentages without four decimals"
    );
    let stale: Vec<i64> = rows
        .iter()
        .filter(|r| r["stale"] == true)
        .filter_map(|r| r["bank"]["id"].as_i64())
        .collect();
    assert_eq!(stale, [dashen], "only the five-day-old board is stale");
    // Spreads over the 2 % cap are marked as the endpoint flags them:
    // Dashen's 2.5 % at least.
    let marked = js(
        &page,
        "[...document.querySelectorAll('#spreads td.over-cap')].map(c => [Number(c.closest('tr').dataset.bank), c.dataset.field])",
    )
    .await?;
    let flagged: Vec<Value> = rows
        .iter()
        .flat_map(|r| {
            [
                ("cashOverSpreadCap", "cashSpreadPercent"),
                ("transactionalOverSpreadCap", "transactionalSpreadPercent"),
            ]
            .into_iter()
            .filter(|(flag, _)| r[*flag] == true)
            .map(|(_, field)| serde_json::json!([r["bank"]["id"], field]))
        })
        .collect();
    assert!(
        flagged.contains(&serde_json::json!([dashen, "cashSpreadPercent"])),
        "{spreads}"
    );
    assert_eq!(marked, Value::Array(flagged));
    assert!(
        js(
            &page,
            "document.querySelector('#reference-note').textContent.includes('weighted average')"
        )
        .await?
            == true
    );

    // Sortable: by selling premium, highest first on a second click.
    js(&page, "document.querySelector('#spreads th[data-key=cashSellingPremiumPercent] button').click(); document.querySelector('#spreads th[data-key=cashSellingPremiumPercent] button').click(); true").await?;
    let order = js(
        &page,
        "[...document.querySelectorAll('#spreads tbody tr[data-bank]')].map(r => Number(r.querySelector('td[data-field=cashSellingPremiumPercent]').dataset.value))",
    )
    .await?;
    let order: Vec<f64> = order
        .as_array()
        .context("order")?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    assert!(order.windows(2).all(|w| w[0] >= w[1]), "{order:?}");
    // The chart draws the National Bank's line over every day it was
    // published, beside a bank that has quoted only today: a step for each
    // new day's rate, and the legend clear of both lines.
    js(&page, &format!("(() => {{ const s = document.querySelector('#chart-bank'); s.value = '{awash}'; s.dispatchEvent(new Event('change')); return s.value === '{awash}'; }})()")).await?;
    until(
        &page,
        "the reference line drawn",
        &format!("document.querySelector('#chart').dataset.points === '1' && document.querySelector('#chart').dataset.referencePoints === '{}' && !!document.querySelector('#chart path.reference') && !!document.querySelector('#chart path.line')", days.len()),
        LOADED_WITHIN,
    )
    .await?;
    let steps = js(
        &page,
        "(document.querySelector('#chart path.reference').getAttribute('d').match(/V/g) || []).length",
    )
    .await?;
    assert_eq!(
        steps,
        days.len() - 1,
        "a step for each reference day after the first"
    );
    assert_eq!(
        js(&page, LEGEND_CLEAR).await?,
        true,
        "the legend, clear of the lines"
    );
    fits_every_width(&page, "dashboard-national-bank").await?;

    // Back to the rates: the cash-only bank shows no stray text in the
    // transactional columns, and its stale board is marked there too.
    js(
        &page,
        "document.querySelector('input[name=view][value=rates]').click(); true",
    )
    .await?;
    until(
        &page,
        "the rates view",
        "!document.querySelector('#banks').hidden && document.querySelector('#spreads').hidden",
        LOADED_WITHIN,
    )
    .await?;
    let dashen_row = js(
        &page,
        &format!("(() => {{ const r = document.querySelector('#banks tr[data-bank=\"{dashen}\"]'); return [r.textContent, r.classList.contains('stale')]; }})()"),
    )
    .await?;
    let text = dashen_row[0].as_str().unwrap_or_default();
    assert!(!text.contains("false") && !text.contains("true"), "{text}");
    assert_eq!(dashen_row[1], true, "{text}");
    let table = js(&page, "document.querySelector('#banks tbody').textContent").await?;
    assert!(
        !table.as_str().unwrap_or_default().contains("false"),
        "{table}"
    );
    for bank in [cbe, awash] {
        let marked = js(
            &page,
            &format!("document.querySelector('#banks tr[data-bank=\"{bank}\"]').classList.contains('stale')"),
        )
        .await?;
        assert_eq!(marked, false);
    }

    // The week's quality: every bank, Dashen's spread over the cap marked.
    until(
        &page,
        "the quality table",
        "document.querySelectorAll('#quality tbody tr[data-bank]').length === 3",
        LOADED_WITHIN,
    )
    .await?;
    let over = js(
        &page,
        &format!("document.querySelector('#quality tr[data-bank=\"{dashen}\"] [data-field=overCap]').textContent"),
    )
    .await?;
    assert!(
        over.as_str()
            .unwrap_or_default()
            .starts_with("1 open, up to 2.5"),
        "{over}"
    );

    let errors = chromium.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    chromium.close().await;
    Ok(())
}

/// Whether no two of the chart's labels overlap.
const LABELS_APART: &str = r"(() => {
  const boxes = [...document.querySelectorAll('#chart text')].map((t) => t.getBoundingClientRect());
  return boxes.every((a, i) => boxes.slice(i + 1)
    .every((b) => a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top));
})()";

#[tokio::test]
async fn a_year_of_daily_boards_and_reference_days_reads_as_a_chart() -> Result<()> {
    let stack = Stack::start().await?;
    let (cbe, cbe_token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    // CBE's board of each day for a year, the dollar wandering between
    // about 140 and 170, and the National Bank's reference of each weekday
    // a little below it: what a fresh stack's demo history looks like.
    let dollar = |back: i64| {
        let back = back as f64;
        155.0 + 12.0 * (back / 40.0).sin() + 3.0 * (back / 7.0).cos()
    };
    let boards: Vec<Result<(u16, Value)>> = futures_util::stream::iter((0..=365).rev())
        .map(|back| {
            let usd = dollar(back);
            let board = Board::at(ago(back, 0)).rate(
                "USD",
                format!("{usd:.2}"),
                format!("{:.2}", usd + 4.0),
            );
            let token = &cbe_token;
            let stack = &stack;
            async move { stack.publish_board(cbe, token, board).await }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    for published in boards {
        assert_eq!(published?.0, 202);
    }
    let days = weekdays_back(366);
    let imports: Vec<Result<()>> = futures_util::stream::iter(days.iter().copied())
        .map(|(back, date)| import_reference(&stack, date, dollar(back) - 1.5))
        .buffer_unordered(8)
        .collect()
        .await;
    imports.into_iter().collect::<Result<Vec<()>>>()?;
    assert_eq!(
        stack
            .publish_board(
                awash,
                &awash_token,
                board(&[("USD", 154.75, 158.5)], &ago(0, 1))
            )
            .await?
            .0,
        202
    );

    let key = stack.api_key("year").await?;
    stack
        .wait_served("Awash's board", awash, &key, "154.75")
        .await?;
    let from = (chrono::Utc::now() - chrono::Duration::days(365))
        .format("%Y-%m-%d")
        .to_string();
    let points = eventually("a year folded", Duration::from_secs(60), || async {
        let (_, series) = stack
            .get(
                &format!(
                    "/api/v1/rates/series?bankId={cbe}&currencyCode=USD&interval=day&from={from}"
                ),
                Some(&key),
            )
            .await
            .ok()?;
        let (_, reference) = stack
            .get(
                &format!("/api/v1/reference-rates/series?currencyCode=USD&from={from}"),
                Some(&key),
            )
            .await
            .ok()?;
        let points = series["data"]["points"].as_array()?.len();
        let reference = reference["data"]["points"].as_array()?.len();
        (points == 366 && reference == days.len()).then_some(points)
    })
    .await?;

    let chromium = Chromium::launch(&stack).await?;
    let page = chromium
        .open_with_key(
            &stack,
            &key,
            &format!("/?currency=USD&bank={cbe}&range=1y&reference=1"),
        )
        .await?;
    until(
        &page,
        "the year drawn with its reference line",
        &format!(
            "document.querySelector('#chart').dataset.points === '{points}' && document.querySelector('#chart').dataset.referencePoints === '{}'",
            days.len()
        ),
        LOADED_WITHIN,
    )
    .await?;
    // Readable on a phone and a laptop: the labels apart, the legend clear
    // of the lines, nothing cut.
    for width in WIDTHS {
        fits(&page, "dashboard-year", width).await?;
        assert_eq!(
            js(&page, LABELS_APART).await?,
            true,
            "the chart's labels apart at {width} px"
        );
        assert_eq!(
            js(&page, LEGEND_CLEAR).await?,
            true,
            "the legend clear of the lines at {width} px"
        );
    }
    let errors = chromium.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    chromium.close().await;
    Ok(())
}
