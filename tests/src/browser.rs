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
use chromiumoxide::page::ScreenshotParams;
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

    /// A page at `path` of the stack's API (`/?currency=USD`, say) that
    /// holds `key` as the pages keep it (localStorage), as if the reader
    /// had given it before.
    pub async fn open_with_key(&self, stack: &Stack, key: &str, path: &str) -> Result<Page> {
        // The reference: a page of the same origin that needs no key (a
        // bare file would make the browser ask for a favicon and log its
        // 404).
        let page = self.open(&format!("{}/docs", stack.api_url)).await?;
        js(
            &page,
            &format!(
                "localStorage.setItem('ratewire.apiKey', {}); location.assign({}); true",
                Value::from(key),
                Value::from(path)
            ),
        )
        .await?;
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

/// The widths every page must fit: a phone's and a laptop's.
pub const WIDTHS: [u32; 2] = [360, 1280];

/// A function of the screen's width: what does not fit it, as a list of
/// sentences (at most a dozen). The page wider than the screen; an element
/// reaching past its edge; a box that hides part of its content sideways
/// (a table in a box that scrolls, a code block); a table cell or caption
/// whose content is wider than it; a chart's label cut by the chart's
/// frame. Form fields, which scroll their own text, and what only screen
/// readers get (a box of 1 px) are left out.
const MISFITS: &str = r#"((width) => {
  const screen = Math.min(document.documentElement.clientWidth, width);
  const name = (e) => {
    const classes = typeof e.className === 'string' ? e.className.trim().split(/\s+/).filter(Boolean) : [];
    const text = (e.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 40);
    return `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}${classes.map((c) => `.${c}`).join('')}${text ? ` "${text}"` : ''}`;
  };
  const misfits = [];
  const page = document.documentElement.scrollWidth;
  if (page > screen) misfits.push(`the page is ${page} px wide on a screen of ${screen}`);
  for (const e of document.body.querySelectorAll('*')) {
    const box = e.getBoundingClientRect();
    if (e.getClientRects().length === 0 || box.width <= 1 || getComputedStyle(e).visibility === 'hidden') continue;
    const left = box.left + scrollX;
    const right = box.right + scrollX;
    if (left < -0.5 || right > screen + 0.5) {
      misfits.push(`${name(e)} spans ${Math.round(left)} to ${Math.round(right)} px`);
    }
    if (e instanceof SVGElement && e.ownerSVGElement) {
      const frame = e.ownerSVGElement.getBoundingClientRect();
      if (box.left < frame.left - 0.5 || box.right > frame.right + 0.5
        || box.top < frame.top - 0.5 || box.bottom > frame.bottom + 0.5) {
        misfits.push(`${name(e)} is cut by its chart's frame`);
      }
      continue;
    }
    if (/^(INPUT|SELECT|TEXTAREA)$/.test(e.tagName)) continue;
    const cell = /^(TD|TH|CAPTION)$/.test(e.tagName);
    const clips = getComputedStyle(e).overflowX !== 'visible';
    if ((cell || clips) && e.scrollWidth > e.clientWidth + 1) {
      misfits.push(`${name(e)} holds ${e.scrollWidth} px of content in ${e.clientWidth}`);
    }
  }
  return misfits.slice(0, 12);
})"#;

/// Shows the page `width` px wide (at 360 as a phone: its viewport tag
/// honoured, twice the pixels), once the page has taken the width and
/// redrawn its charts (a chart notes the width it was drawn at in
/// `data-width`).
pub async fn show_at(page: &Page, width: u32) -> Result<()> {
    use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
    let phone = width < 600;
    page.execute(SetDeviceMetricsOverrideParams::new(
        i64::from(width),
        if phone { 800 } else { 900 },
        if phone { 2.0 } else { 1.0 },
        phone,
    ))
    .await?;
    until(
        page,
        &format!("the page {width} px wide, its charts redrawn"),
        &format!(
            "(matchMedia('(width: {width}px)').matches || document.documentElement.clientWidth === {width}) && [...document.querySelectorAll('svg[data-width]')].every(s => s.dataset.width === String(s.clientWidth))"
        ),
        Duration::from_secs(5),
    )
    .await
}

/// Shows the page `width` px wide ([`show_at`]), saves it whole as
/// `{view}-{width}.png` among the artifacts, and fails naming what does
/// not fit (see `MISFITS`).
pub async fn fits(page: &Page, view: &str, width: u32) -> Result<()> {
    use chromiumoxide::cdp::browser_protocol::page::Viewport as Clip;
    show_at(page, width).await?;
    let misfits: Vec<String> =
        serde_json::from_value(js(page, &format!("({MISFITS})({width})")).await?)?;
    let height = js(page, "document.documentElement.scrollHeight")
        .await?
        .as_f64()
        .unwrap_or(900.0);
    let shot = page
        .screenshot(
            ScreenshotParams::builder()
                .capture_beyond_viewport(true)
                .clip(Clip {
                    x: 0.0,
                    y: 0.0,
                    width: f64::from(width),
                    height,
                    scale: 1.0,
                })
                .build(),
        )
        .await?;
    std::fs::write(artifacts().join(format!("{view}-{width}.png")), shot)?;
    anyhow::ensure!(
        misfits.is_empty(),
        "{view} does not fit a screen {width} px wide:\n{}",
        misfits.join("\n")
    );
    Ok(())
}

/// [`fits`] at each of [`WIDTHS`], the laptop's last (so the page stays at
/// the width it was opened with).
pub async fn fits_every_width(page: &Page, view: &str) -> Result<()> {
    for width in WIDTHS {
        fits(page, view, width).await?;
    }
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
