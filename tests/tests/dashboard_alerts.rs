//! The dashboard's "Alerts" panel in a real browser: a key adds a webhook
//! (its secret shown once) and an alert, sees it fire live as a board
//! crosses the threshold (the same call its webhook receives), and deletes
//! it. The panel stays hidden for keyless visitors, and fits a phone's
//! screen and a laptop's.

use std::time::Duration;

use anyhow::Result;
use ratewire_e2e::browser::{enter_key, fits_every_width, js, until, Chromium};
use ratewire_e2e::receiver::Receiver;
use ratewire_e2e::{ago, Board, Stack};
use serde_json::{json, Value};

const LOADED_WITHIN: Duration = Duration::from_secs(15);

fn usd(buying: f64, selling: f64, as_of: &str) -> Board {
    Board::at(as_of).rate("USD", buying, selling)
}

/// Runs `script` (statements) in the page.
async fn run(page: &chromiumoxide::Page, script: &str) -> Result<Value> {
    js(page, &format!("(() => {{ {script}; return true; }})()")).await
}

#[tokio::test]
async fn the_alerts_panel_makes_an_alert_shows_it_fire_and_deletes_it() -> Result<()> {
    let stack = Stack::start().await?;
    let (cbe, token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    assert_eq!(
        stack
            .publish_board(cbe, &token, usd(150.0, 158.0, &ago(0, 2)))
            .await?
            .0,
        202
    );
    let key = stack.api_key("browser").await?;
    stack.wait_served("CBE's board", cbe, &key, "150").await?;
    let receiver = Receiver::start().await?;

    let chromium = Chromium::launch(&stack).await?;
    let page = chromium
        .open(&format!("{}/?currency=USD", stack.api_url))
        .await?;
    until(
        &page,
        "the key form",
        "!document.querySelector('#key-form').hidden",
        LOADED_WITHIN,
    )
    .await?;
    assert_eq!(
        js(&page, "document.querySelector('#alerts-section').hidden").await?,
        true,
        "no key, no alerts"
    );
    enter_key(&page, &key, LOADED_WITHIN).await?;
    until(
        &page,
        "the alerts panel",
        "!document.querySelector('#alerts-section').hidden && document.querySelector('#alert-form').hidden",
        LOADED_WITHIN,
    )
    .await?;

    // A webhook first: its secret is shown once.
    page.find_element("#webhook-url")
        .await?
        .click()
        .await?
        .type_str(receiver.url())
        .await?;
    run(
        &page,
        "document.querySelector('#webhook-form').requestSubmit()",
    )
    .await?;
    until(
        &page,
        "the secret shown and the alert form",
        "document.querySelector('#webhook-secret').textContent.includes('whsec_') && !document.querySelector('#alert-form').hidden",
        LOADED_WITHIN,
    )
    .await?;

    // CBE's cash buying above 155.
    run(
        &page,
        &format!(
            "document.querySelector('#alert-bank').value = '{cbe}';
             document.querySelector('#alert-field').value = 'cashBuying';
             document.querySelector('#alert-condition').value = 'above';
             document.querySelector('#alert-threshold').value = '155';
             document.querySelector('#alert-form').requestSubmit()"
        ),
    )
    .await?;
    until(
        &page,
        "the alert listed",
        "document.querySelectorAll('#alerts tbody tr[data-alert]').length === 1",
        LOADED_WITHIN,
    )
    .await?;
    let (_, listed) = stack.get("/api/v1/alerts", Some(&key)).await?;
    let alert = &listed["data"][0];
    assert_eq!(
        (
            alert["bankId"].clone(),
            alert["field"].clone(),
            alert["threshold"].clone()
        ),
        (json!(cbe), json!("cashBuying"), json!(155))
    );
    let id = alert["id"].as_str().unwrap().to_owned();
    let row = format!("#alerts tr[data-alert=\"{id}\"]");
    let cells = js(
        &page,
        &format!("[...document.querySelectorAll('{row} td')].map(c => c.textContent)"),
    )
    .await?;
    assert_eq!(cells[0], "USD");
    assert_eq!(cells[1], "Commercial Bank of Ethiopia");
    assert_eq!(cells[6], "waiting for a board");

    // A board above it: the page shows the firing live, the webhook gets it.
    until(
        &page,
        "the stream live",
        "document.querySelector('#live').dataset.state === 'live'",
        LOADED_WITHIN,
    )
    .await?;
    assert_eq!(
        stack
            .publish_board(cbe, &token, usd(156.25, 158.0, &ago(0, 1)))
            .await?
            .0,
        202
    );
    until(
        &page,
        "the firing listed",
        "document.querySelectorAll('#alert-events li').length === 1",
        LOADED_WITHIN,
    )
    .await?;
    let delivered = receiver.wait_for(1, LOADED_WITHIN).await?;
    let shown = js(
        &page,
        "document.querySelector('#alert-events li').dataset.message",
    )
    .await?;
    assert_eq!(shown, delivered[0].id(), "the same message");
    let text = js(
        &page,
        "document.querySelector('#alert-events li').textContent",
    )
    .await?;
    let text = text.as_str().unwrap_or_default();
    assert!(
        text.contains("Commercial Bank of Ethiopia") && text.contains("above"),
        "{text}"
    );
    until(
        &page,
        "the row triggered",
        &format!("document.querySelector('{row} td[data-field=fired]')?.textContent === '1' && document.querySelector('{row} td[data-field=state]').textContent === 'triggered'"),
        LOADED_WITHIN,
    )
    .await?;
    // On a phone and a laptop, the panel (its long URL in a choice, the
    // table of alerts) fits the screen, no cell cut.
    fits_every_width(&page, "dashboard-alerts").await?;

    // Deleted from the page: gone from the API.
    page.find_element(&format!("{row} button.delete"))
        .await?
        .click()
        .await?;
    until(
        &page,
        "the alert gone",
        "document.querySelectorAll('#alerts tbody tr[data-alert]').length === 0",
        LOADED_WITHIN,
    )
    .await?;
    let (_, listed) = stack.get("/api/v1/alerts", Some(&key)).await?;
    assert_eq!(listed["data"], json!([]));
    let errors = chromium.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    chromium.close().await;
    Ok(())
}
