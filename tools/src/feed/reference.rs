//! The National Bank's reference rates, fed to ingest: saved responses
//! imported from files, or the published endpoint polled for each weekday.
//!
//! A response is checked with ingest's own reader before it is posted, so
//! an error page, a half-sent body or the wrong day is never posted; what
//! fails is fetched again.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use chrono::{Datelike, Days, NaiveDate, Utc, Weekday};
use ratewire_proto::reference::reference_day;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::feed::client::{Imported, IngestClient};

/// Tries per post while ingest is unavailable.
const POST_ATTEMPTS: u32 = 5;

/// Posts each saved response; a line per file on standard output. True
/// when every file was imported (published, corrected or unchanged).
pub async fn import_files(client: &IngestClient, files: &[PathBuf]) -> anyhow::Result<bool> {
    let mut complete = true;
    for file in files {
        let body = tokio::fs::read(file)
            .await
            .with_context(|| format!("reading {}", file.display()))?;
        let outcome = post(client, body).await;
        println!("{}: {}", file.display(), outcome.describe());
        complete &= outcome.imported();
    }
    Ok(complete)
}

/// Posts `body`, again while ingest is unavailable.
async fn post(client: &IngestClient, body: Vec<u8>) -> Imported {
    let mut wait = Duration::from_millis(500);
    let mut attempt = 1;
    loop {
        let outcome = client.import_reference(body.clone()).await;
        match outcome {
            Imported::Unavailable { ref cause } if attempt < POST_ATTEMPTS => {
                warn!(cause, attempt, "ingest unavailable; posting again");
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

/// How the poller fetches.
#[derive(Debug, Clone)]
pub struct PollSettings {
    /// The published endpoint; `{date}` is replaced by the day asked for,
    /// else `date=YYYY-MM-DD` is added to its query.
    pub url: String,
    pub every: Duration,
    /// Weekdays looked back over for days missed (today included).
    pub days_back: u32,
    /// How long one fetch may take.
    pub timeout: Duration,
    /// Tries per day and round (a 5xx, a timeout, a body that does not
    /// read), with a doubling wait between them.
    pub attempts: u32,
    /// One round, then exit.
    pub once: bool,
}

/// The URL asking for `date`.
pub fn url_for(template: &str, date: NaiveDate) -> String {
    if template.contains("{date}") {
        return template.replace("{date}", &date.to_string());
    }
    let separator = if template.contains('?') { '&' } else { '?' };
    format!("{template}{separator}date={date}")
}

/// The weekdays from `days_back` weekdays before `today` to `today`.
pub fn weekdays_until(today: NaiveDate, days_back: u32) -> Vec<NaiveDate> {
    let mut days = Vec::new();
    let mut day = today;
    while days.len() < days_back as usize + 1 {
        if !matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
            days.push(day);
        }
        match day.checked_sub_days(Days::new(1)) {
            Some(before) => day = before,
            None => break,
        }
    }
    days.reverse();
    days
}

/// What one fetch of a day gave.
#[derive(Debug)]
enum Fetched {
    /// A response that reads as that day's board.
    Day(Vec<u8>),
    /// The source has nothing for that day yet (or ever: a holiday).
    NotPublished(String),
    /// Worth fetching again: a 5xx, a timeout, a body that does not read.
    Failed(String),
}

/// Polls until `shutdown`: every `every`, each weekday of the look-back
/// not imported yet is fetched and, once it reads as that day, posted.
pub async fn poll(
    client: &IngestClient,
    settings: PollSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .timeout(settings.timeout)
        .connect_timeout(settings.timeout)
        .build()?;
    let mut imported: BTreeSet<NaiveDate> = BTreeSet::new();
    loop {
        let today = reference_day(Utc::now());
        imported.retain(|day| weekdays_until(today, settings.days_back).contains(day));
        for day in weekdays_until(today, settings.days_back) {
            if imported.contains(&day) || shutdown.is_cancelled() {
                continue;
            }
            let Some(body) = fetch_day(&http, &settings, day, &shutdown).await else {
                continue;
            };
            match post(client, body).await {
                outcome if outcome.imported() => {
                    info!(%day, result = outcome.describe(), "reference day imported");
                    imported.insert(day);
                }
                outcome => warn!(%day, result = outcome.describe(), "reference day not imported"),
            }
        }
        if settings.once {
            return Ok(());
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(settings.every) => {}
        }
    }
}

/// `day`'s response, once it reads as that day's board; `None` when the
/// source has none yet or every try failed.
async fn fetch_day(
    http: &reqwest::Client,
    settings: &PollSettings,
    day: NaiveDate,
    shutdown: &CancellationToken,
) -> Option<Vec<u8>> {
    let url = url_for(&settings.url, day);
    let mut wait = Duration::from_millis(500);
    for attempt in 1..=settings.attempts.max(1) {
        match fetch_once(http, &url, day).await {
            Fetched::Day(body) => return Some(body),
            Fetched::NotPublished(why) => {
                tracing::debug!(%day, why, "no reference published for the day yet");
                return None;
            }
            Fetched::Failed(why) => {
                warn!(%day, url, attempt, why, "fetching the reference day failed");
                if attempt < settings.attempts {
                    tokio::select! {
                        _ = shutdown.cancelled() => return None,
                        _ = tokio::time::sleep(wait) => {}
                    }
                    wait *= 2;
                }
            }
        }
    }
    None
}

async fn fetch_once(http: &reqwest::Client, url: &str, day: NaiveDate) -> Fetched {
    let response = match http.get(url).send().await {
        Ok(response) => response,
        Err(e) if e.is_timeout() => return Fetched::Failed("timed out".into()),
        Err(e) => return Fetched::Failed(e.to_string()),
    };
    let status = response.status();
    if !status.is_success() {
        return Fetched::Failed(format!("answered {status}"));
    }
    let body = match response.bytes().await {
        Ok(body) => body.to_vec(),
        Err(e) => return Fetched::Failed(format!("the body was cut short: {e}")),
    };
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&body) {
        if value["data"].as_array().is_some_and(Vec::is_empty) {
            return Fetched::NotPublished("an empty day".into());
        }
    }
    match ratewire_ingest::reference::parse(&body, Utc::now()) {
        Ok(board) if board.date() == day => Fetched::Day(body),
        Ok(board) => Fetched::NotPublished(format!("the source answered with {}", board.date())),
        Err(errors) => Fetched::Failed(format!("the body does not read: {errors:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn a_day_is_asked_for_in_the_url() {
        assert_eq!(
            url_for(
                "https://nbe.example/api/filter-exchange-rates",
                d("2026-05-18")
            ),
            "https://nbe.example/api/filter-exchange-rates?date=2026-05-18"
        );
        assert_eq!(
            url_for("http://h/x?lang=en", d("2026-05-18")),
            "http://h/x?lang=en&date=2026-05-18"
        );
        assert_eq!(
            url_for("http://h/{date}.json", d("2026-05-18")),
            "http://h/2026-05-18.json"
        );
    }

    #[test]
    fn missed_weekdays_are_looked_back_over() {
        // A Tuesday, two weekdays back: Friday, Monday and Tuesday.
        assert_eq!(
            weekdays_until(d("2026-05-19"), 2),
            [d("2026-05-15"), d("2026-05-18"), d("2026-05-19")]
        );
        assert_eq!(weekdays_until(d("2026-05-17"), 0), [d("2026-05-15")]);
    }
}
