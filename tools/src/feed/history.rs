//! The demo's past: daily boards of its banks over the days before today,
//! and the National Bank's reference days beside them, published through
//! the backfill as a publisher loading its past would. A fresh stack's
//! charts and series then show a market, not one point.

use chrono::{Datelike, NaiveDate, TimeZone, Utc, Weekday};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::backfill::{self, FileBoard, FileContents, Sending};
use super::client::IngestClient;
use super::market::{self, reference_board, Style};
use super::reference::weekdays_until;

/// A bank whose past is published: its id, code and a publisher token.
pub struct Bank {
    pub id: i64,
    pub code: &'static str,
    pub token: String,
}

/// Each bank's board of each day but Sunday among the `days` days before
/// `today`, oldest first, made at 08:30 in Addis Ababa (05:30 UTC): the
/// day's market mids in the bank's style, moved by a little noise of its
/// own.
pub fn boards(
    banks: &[Bank],
    currencies: &[(&str, f64)],
    today: NaiveDate,
    days: u32,
) -> Vec<FileBoard> {
    let styles: Vec<Style> = banks.iter().map(|b| Style::of(b.code)).collect();
    let mut boards = Vec::new();
    for back in (1..=u64::from(days)).rev() {
        let Some(date) = today.checked_sub_days(chrono::Days::new(back)) else {
            continue;
        };
        if date.weekday() == Weekday::Sun {
            continue;
        }
        let Some(as_of) = date
            .and_hms_opt(5, 30, 0)
            .map(|t| Utc.from_utc_datetime(&t))
        else {
            continue;
        };
        let day = date.to_string();
        for (bank, style) in banks.iter().zip(&styles) {
            let mut rng = StdRng::seed_from_u64(market::seed(&["day", bank.code, &day]));
            let rates: Vec<String> = currencies
                .iter()
                .map(|(code, base)| {
                    let noise = rng.gen_range(-0.0015..0.0015);
                    let mid = market::mid(code, *base, date) * (1.0 + style.offset + noise);
                    style.entry(code, mid)
                })
                .collect();
            boards.push(FileBoard {
                bank_id: bank.id,
                as_of,
                body: backfill::board_body(&as_of, &format!("[{}]", rates.join(","))),
                origin: format!("demo history {day}"),
                entry_origins: None,
                entries: currencies.len(),
            });
        }
    }
    boards
}

/// Imports the National Bank's reference boards of `today` and the
/// `weekdays` weekdays before it; true when every one was.
pub async fn import_reference_days(
    client: &IngestClient,
    today: NaiveDate,
    weekdays: u32,
    shutdown: &CancellationToken,
) -> bool {
    let mut refused = 0;
    for day in weekdays_until(today, weekdays) {
        if shutdown.is_cancelled() {
            return false;
        }
        let imported = client
            .import_reference(reference_board(day).into_bytes())
            .await;
        if imported.imported() {
            debug!(%day, result = imported.describe(), "reference day");
        } else {
            warn!(%day, result = imported.describe(), "reference day not imported");
            refused += 1;
        }
    }
    refused == 0
}

/// Imports the reference days of the span and publishes the banks' boards;
/// what could not be published is logged, and the live demo goes on.
pub async fn publish(
    client: &IngestClient,
    banks: Vec<Bank>,
    currencies: &[(&str, f64)],
    today: NaiveDate,
    days: u32,
    shutdown: &CancellationToken,
) {
    import_reference_days(client, today, days * 5 / 7, shutdown).await;

    let contents = FileContents {
        boards: boards(&banks, currencies, today, days),
        unplaced: Vec::new(),
    };
    let sending = Sending {
        tokens: banks.into_iter().map(|b| (b.id, b.token)).collect(),
        concurrency: 4,
        attempts: 6,
        dry_run: false,
    };
    match backfill::publish(
        "demo history",
        contents,
        sending,
        client.clone(),
        shutdown.clone(),
    )
    .await
    {
        Ok(summary) if summary.complete() => info!(
            boards = summary.accepted.boards,
            days, "demo history published"
        ),
        Ok(summary) => warn!(summary = summary.render(), "demo history incomplete"),
        Err(e) => warn!(error = %e, "demo history not published"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_year_of_history_is_valid_for_ingest_and_the_same_each_time() {
        let today: NaiveDate = "2026-11-28".parse().unwrap();
        let banks = || {
            vec![Bank {
                id: 1,
                code: "CBE",
                token: String::new(),
            }]
        };
        let currencies = [("USD", 155.20), ("JPY", 1.03)];
        let year = boards(&banks(), &currencies, today, 365);
        // A year without its Sundays.
        assert_eq!(year.len(), 365 - 52);
        assert!(year.windows(2).all(|w| w[0].as_of < w[1].as_of));
        assert!(year.iter().all(|b| b.as_of.date_naive() < today));
        for board in &year {
            ratewire_ingest::board::parse(board.body.as_bytes(), Utc::now())
                .unwrap_or_else(|e| panic!("{}: {e:?}", board.body));
        }
        let again = boards(&banks(), &currencies, today, 365);
        assert!(year.iter().zip(&again).all(|(a, b)| a.body == b.body));
    }
}
