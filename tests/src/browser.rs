//! A headless chromium for the browser tests (the system's, driven over
//! the DevTools protocol): pages that report their errors, and waiting for
//! what a page shows.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Result};
use chromiumoxide::cdp::browser_protocol::log::{EventEntryAdded, LogEntryLevel};
use chromiumoxide::cdp::js_protocol::runtime::{
    ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown,
};
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::{Browser, BrowserConfig, Page};
use futures_util::StreamExt;
use serde_json::Value;

use crate::{eventually, Stack};

pub fn artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    let _ = std::fs::create_dir_all(&dir);
    dir
}

fn chromium() -> PathBuf {
    std::env::var_os("RATEWIRE_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

/// A headless chromium of the test's own (its own profile, so its own
/// localStorage), and every error its pages report.
pub struct Chromium {
    browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Chromium {
    pub async fn launch(stack: &Stack) -> Result<Self> {
        let executable = chromium();
        if !executable.exists() {
            bail!(
                "{} is missing: `deploy/stack test` installs chromium (apt-get install chromium chromium-driver)",
                executable.display()
            );
        }
        let config = BrowserConfig::builder()
            .chrome_executable(executable)
            .new_headless_mode()
            .no_sandbox()
            .user_data_dir(stack.logs.join("chromium-profile"))
            .viewport(Viewport {
                width: 1280,
                height: 900,
                device_scale_factor: Some(1.0),
                ..Viewport::default()
            })
            .window_size(1280, 900)
            .args(["--disable-gpu", "--disable-dev-shm-usage", "--lang=en-US"])
            .launch_timeout(Duration::from_secs(60))
            .request_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| anyhow::anyhow!("chromium settings: {e}"))?;
        let (browser, mut handler) = Browser::launch(config).await?;
        let handler = tokio::spawn(async move {
            // Events chromiumoxide does not know come as errors: keep going.
            while handler.next().await.is_some() {}
        });
        Ok(Self {
            browser,
            handler,
            errors: Arc::default(),
        })
    }

    /// A page at `url`, reporting console errors, uncaught exceptions and
    /// browser-side errors (a refused resource, a CSP violation).
    pub async fn open(&self, url: &str) -> Result<Page> {
        let page = self.browser.new_page("about:blank").await?;
        page.enable_log().await?;
        page.enable_runtime().await?;
        let mut console = page.event_listener::<EventConsoleApiCalled>().await?;
        let mut exceptions = page.event_listener::<EventExceptionThrown>().await?;
        let mut entries = page.event_listener::<EventEntryAdded>().await?;
        let errors = Arc::clone(&self.errors);
        tokio::spawn(async move {
            loop {
                let error = tokio::select! {
                    Some(e) = console.next() => (e.r#type == ConsoleApiCalledType::Error)
                        .then(|| format!("console.error: {:?}", e.args.iter().map(|a| a.value.clone()).collect::<Vec<_>>())),
                    Some(e) = exceptions.next() => Some(format!("exception: {}", e.exception_details.text)),
                    Some(e) = entries.next() => (e.entry.level == LogEntryLevel::Error)
                        .then(|| format!("{:?}: {} {}", e.entry.source, e.entry.text, e.entry.url.clone().unwrap_or_default())),
                    else => break,
                };
                if let Some(error) = error {
                    errors.lock().unwrap().push(error);
                }
            }
        });
        page.goto(url).await?;
        Ok(page)
    }

    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }

    pub async fn close(mut self) {
        let _ = self.browser.close().await;
        let _ = self.browser.wait().await;
        self.handler.abort();
    }
}

/// The value of a JavaScript expression in the page.
pub async fn js(page: &Page, expression: &str) -> Result<Value> {
    Ok(page
        .evaluate(expression)
        .await?
        .into_value::<Value>()
        .unwrap_or(Value::Null))
}

/// Waits until `expression` is truthy in the page.
pub async fn until(page: &Page, what: &str, expression: &str, within: Duration) -> Result<()> {
    eventually(what, within, || async {
        match js(page, expression).await {
            Ok(Value::Bool(true)) => Some(()),
            _ => None,
        }
    })
    .await
}

/// Shows the page as a phone 360 px wide would, once the page has taken
/// the new width; fails naming up to five of the elements `within` (a CSS
/// selector, those inside a `.scroll` box aside) that reach past the screen
/// unless the page is at most 360 px wide.
pub async fn fits_a_phone(page: &Page, within: &str) -> Result<()> {
    use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
    page.execute(SetDeviceMetricsOverrideParams::new(360, 800, 2.0, true))
        .await?;
    until(
        page,
        "the page 360 px wide",
        "window.innerWidth === 360",
        Duration::from_secs(5),
    )
    .await?;
    let width = js(page, "document.documentElement.scrollWidth").await?;
    let wide = js(
        page,
        &format!(
            "[...document.querySelectorAll('{within} *')].filter(e => e.getBoundingClientRect().right > 361 && !e.closest('.scroll')).slice(0, 5).map(e => `${{e.tagName}}#${{e.id}}.${{e.className}} ${{Math.round(e.getBoundingClientRect().right)}}`)"
        ),
    )
    .await?;
    anyhow::ensure!(
        width.as_u64().unwrap_or(u64::MAX) <= 360,
        "the page is {width} px wide at 360: {wide}"
    );
    Ok(())
}

/// Types `key` into the page's key form and sends it, once the form shows.
pub async fn enter_key(page: &Page, key: &str, within: Duration) -> Result<()> {
    until(
        page,
        "the key form",
        "!document.querySelector('#key-form').hidden",
        within,
    )
    .await?;
    page.find_element("#key")
        .await?
        .click()
        .await?
        .type_str(key)
        .await?
        .press_key("Enter")
        .await?;
    Ok(())
}
