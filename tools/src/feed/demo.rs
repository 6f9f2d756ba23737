//! The demo simulator: behaves like a set of real bank publishers
//! (registers banks through the operator API, takes a token per bank, then
//! pushes boards over HTTP), and the National Bank, whose reference board
//! of each weekday it imports as that bank publishes it.

use std::time::Duration;

use anyhow::Context;
use chrono::{NaiveDate, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ratewire_proto::reference::reference_day;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::backfill;
use super::client::{new_bank, IngestClient, Pushed};
use super::history;
use super::market::{self, Style, DEMO_CURRENCIES};

/// The demo bank that now and then misses its schedule: silent for a
/// minute in every ten, after the feed's first round (which publishes for
/// every bank, so that a fresh stack, or `--once`, serves them all).
pub const MISSING_BANK: &str = "ENAT";

/// Whether [`MISSING_BANK`] keeps silent at `now`: the eighth minute of
/// every ten.
fn silent(code: &str, now: chrono::DateTime<Utc>) -> bool {
    code == MISSING_BANK && (now.timestamp() / 60) % 10 == 7
}

/// The schedule the demo banks are registered with: a board every
/// `interval`, and never more often than every ten seconds (the shortest
/// period a schedule takes).
fn schedule(interval: Duration) -> serde_json::Value {
    let seconds = interval.as_secs_f64().ceil().max(10.0) as u64;
    serde_json::json!({ "every": format!("PT{seconds}S") })
}

/// Weekdays before today whose reference boards the demo imports, so a
/// fresh stack has a weekend to carry over.
const REFERENCE_DAYS_BACK: u32 = 4;

/// Ethiopian banks the demo registers, in order: (code, name). The
/// silent one and the wide one are among the first 12, the default count.
pub const DEMO_BANKS: [(&str, &str); 15] = [
    ("CBE", "Commercial Bank of Ethiopia"),
    ("AWASH", "Awash Bank"),
    ("DASHEN", "Dashen Bank"),
    ("BOA", "Bank of Abyssinia"),
    ("WEGAGEN", "Wegagen Bank"),
    ("NIB", "Nib International Bank"),
    ("HIBRET", "Hibret Bank"),
    ("BUNNA", "Bunna Bank"),
    ("OROMIA", "Oromia Bank"),
    ("ZEMEN", "Zemen Bank"),
    ("ENAT", "Enat Bank"),
    ("BERHAN", "Berhan Bank"),
    ("COOP", "Cooperative Bank of Oromia"),
    ("ABAY", "Abay Bank"),
    ("AMHARA", "Amhara Bank"),
];

#[derive(Debug, Clone)]
pub struct DemoSettings {
    pub ingest_url: String,
    pub operator_url: String,
    pub admin_token: String,
    pub banks: usize,
    pub currencies: usize,
    pub interval: Duration,
    /// Publish one round and stop.
    pub once: bool,
    /// Days of daily boards published for the banks this run registers,
    /// beside the live rounds (0: none).
    pub history_days: u32,
}

/// One simulated bank: its quoting style and current mid rates.
struct SimBank {
    id: i64,
    code: &'static str,
    token: String,
    style: Style,
    mids: Vec<(String, f64)>,
}

impl SimBank {
    /// Moves some mids a little (a random walk from today's market, each
    /// currency repriced with [`market::MOVE_CHANCE`]) and quotes a board,
    /// as JSON text.
    fn next_board(&mut self, rng: &mut StdRng) -> String {
        let mut rates = Vec::with_capacity(self.mids.len());
        for (code, mid) in &mut self.mids {
            if rng.gen_bool(market::MOVE_CHANCE) {
                *mid *= 1.0 + rng.gen_range(-0.0015..0.0015);
            }
            rates.push(self.style.entry(code, *mid));
        }
        backfill::board_body(&Utc::now(), &format!("[{}]", rates.join(",")))
    }
}

pub async fn run_demo(settings: DemoSettings, shutdown: CancellationToken) -> anyhow::Result<()> {
    let client = IngestClient::new(
        &settings.ingest_url,
        &settings.operator_url,
        Some(&settings.admin_token),
    )?;
    let mut rng = StdRng::from_entropy();
    let existing = client.banks().await?;

    let today = Utc::now().date_naive();
    let currencies = &DEMO_CURRENCIES[..settings.currencies.min(DEMO_CURRENCIES.len())];
    let mut banks = Vec::new();
    let mut registered = Vec::new();
    for (code, name) in DEMO_BANKS.iter().take(settings.banks) {
        let known = existing.iter().find(|b| b["code"] == *code);
        let id = match known {
            Some(bank) => bank["id"].as_i64().context("bank without id")?,
            None => {
                let lower = code.to_ascii_lowercase();
                let mut bank = new_bank(
                    code,
                    name,
                    &format!("https://assets.ratewire.example/banks/{lower}.png"),
                    &[("telegram", &format!("https://t.me/{lower}bank"))],
                );
                bank["schedule"] = schedule(settings.interval);
                let id = client.register_bank(bank).await?;
                info!(code, id, "registered demo bank");
                id
            }
        };
        let (token, _) = client
            .create_token(id)
            .await?
            .context("the demo bank vanished")?;
        if known.is_none() {
            registered.push(history::Bank {
                id,
                code,
                token: token.clone(),
            });
        }
        let style = Style::of(code);
        banks.push(SimBank {
            id,
            code,
            token,
            style,
            mids: currencies
                .iter()
                .map(|(code, base)| {
                    let mid = market::mid(code, *base, today) * (1.0 + style.offset);
                    (code.to_string(), mid)
                })
                .collect(),
        });
    }
    // The past of banks registered now (a bank known before has its own),
    // beside the live rounds: an older board never replaces a newer one, so
    // the banks are served at once and their history fills in behind.
    let past = (settings.history_days > 0 && !registered.is_empty()).then(|| {
        info!(
            banks = registered.len(),
            days = settings.history_days,
            "demo history publishing"
        );
        let (client, currencies, shutdown) =
            (client.clone(), currencies.to_vec(), shutdown.clone());
        let days = settings.history_days;
        tokio::spawn(async move {
            history::publish(&client, registered, &currencies, today, days, &shutdown).await
        })
    });
    info!(
        banks = banks.len(),
        interval_ms = settings.interval.as_millis() as u64,
        "demo feed publishing"
    );

    let mut tick = tokio::time::interval(settings.interval);
    let mut referenced: Option<NaiveDate> = None;
    let mut first = true;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let today = reference_day(Utc::now());
        if referenced != Some(today)
            && history::import_reference_days(&client, today, REFERENCE_DAYS_BACK, &shutdown).await
        {
            referenced = Some(today);
        }
        let (mut accepted, mut failed) = (0, 0);
        for bank in &mut banks {
            if !first && silent(bank.code, Utc::now()) {
                continue;
            }
            let board = bank.next_board(&mut rng);
            match client.push_board(bank.id, &bank.token, board, None).await {
                Pushed::Accepted { .. } => accepted += 1,
                refused => {
                    failed += 1;
                    warn!(bank = bank.id, answer = ?refused, "board not accepted");
                }
            }
        }
        info!(accepted, failed, "demo round published");
        first = false;
        if settings.once {
            break;
        }
    }
    if let Some(past) = past {
        past.await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_simulated_board_is_valid_for_ingest() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut bank = SimBank {
            id: 1,
            code: "CBE",
            token: String::new(),
            style: Style::of("CBE"),
            mids: DEMO_CURRENCIES
                .iter()
                .map(|(c, m)| (c.to_string(), *m))
                .collect(),
        };
        let body = bank.next_board(&mut rng).into_bytes();
        let board = ratewire_ingest::board::parse(&body, Utc::now())
            .expect("the demo publishes valid boards");
        assert_eq!(board.rates().len(), DEMO_CURRENCIES.len());
    }

    #[test]
    fn the_demo_s_schedule_and_its_missing_bank() {
        assert_eq!(schedule(Duration::from_secs(3))["every"], "PT10S");
        assert_eq!(schedule(Duration::from_millis(30_500))["every"], "PT31S");
        let at = |minute: u32| {
            chrono::NaiveDate::from_ymd_opt(2026, 11, 29)
                .unwrap()
                .and_hms_opt(10, minute, 30)
                .unwrap()
                .and_utc()
        };
        assert!(silent(MISSING_BANK, at(17)));
        assert!(!silent(MISSING_BANK, at(18)));
        assert!(!silent("CBE", at(17)));
    }

    #[test]
    fn the_silent_and_the_wide_bank_are_among_the_12_a_demo_registers_by_default() {
        let first: Vec<&str> = DEMO_BANKS.iter().take(12).map(|(code, _)| *code).collect();
        assert!(first.contains(&MISSING_BANK));
        assert!(first.contains(&crate::feed::market::WIDE_SPREAD_BANK));
    }
}
