//! The readers: API consumers through the balancer, each asking one of the
//! usual questions in turn, every answer kept with its time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

/// How long a reader waits for an answer.
const PATIENCE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct Read {
    pub at: Instant,
    pub took: Duration,
    pub path: String,
    /// The status, or None for no answer.
    pub status: Option<u16>,
    pub problem: Option<String>,
}

impl Read {
    pub fn ok(&self) -> bool {
        matches!(self.status, Some(200..=299))
    }
}

pub type Reads = Arc<Mutex<Vec<Read>>>;

pub struct Reader {
    pub http: reqwest::Client,
    pub api: String,
    pub key: String,
    pub banks: Vec<i64>,
    /// Between one answer and the next question.
    pub pause: Duration,
}

impl Reader {
    /// The questions a reader asks, by turns.
    fn question(&self, rng: &mut StdRng) -> String {
        let bank = self.banks[rng.gen_range(0..self.banks.len())];
        let today = chrono::Utc::now().date_naive();
        match rng.gen_range(0..10) {
            0..=3 => format!("/api/v1/rates?bankId={bank}"),
            4 => "/api/v1/rates".into(),
            5 | 6 => "/api/v1/rates/best-rates?currencyCode=USD".into(),
            7 => "/api/v1/banks".into(),
            8 => format!("/api/v1/history?bankId={bank}&date={today}&currencyCode=EUR"),
            _ => format!(
                "/api/v1/rates/series?bankId={bank}&interval=hour&currencyCode=GBP&from={today}"
            ),
        }
    }

    pub async fn run(&self, seed: u64, reads: Reads, stop: CancellationToken) {
        let mut rng = StdRng::seed_from_u64(seed);
        while !stop.is_cancelled() {
            let path = self.question(&mut rng);
            let read = self.ask(path).await;
            reads.lock().expect("reads").push(read);
            tokio::select! {
                _ = tokio::time::sleep(self.pause) => {}
                _ = stop.cancelled() => return,
            }
        }
    }

    pub async fn ask(&self, path: String) -> Read {
        let at = Instant::now();
        let answer = self
            .http
            .get(format!("{}{path}", self.api))
            .header("x-api-key", &self.key)
            .timeout(PATIENCE)
            .send()
            .await;
        let (status, problem) = match answer {
            Ok(response) => {
                let status = response.status().as_u16();
                // The whole body: an answer cut off midway is no answer.
                match response.bytes().await {
                    Ok(_) if (200..300).contains(&status) => (Some(status), None),
                    Ok(body) => (
                        Some(status),
                        Some(String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()),
                    ),
                    Err(e) => (None, Some(format!("the body broke off: {e}"))),
                }
            }
            Err(e) if e.is_timeout() => (None, Some(format!("no answer within {PATIENCE:?}"))),
            Err(e) => (
                None,
                Some(format!("no answer: {}", causes(&e.without_url()))),
            ),
        };
        Read {
            at,
            took: at.elapsed(),
            path,
            status,
            problem,
        }
    }
}

/// An error with its causes, the innermost last: reqwest's own message
/// names only the URL.
pub fn causes(error: &dyn std::error::Error) -> String {
    let mut all = vec![error.to_string()];
    let mut next = error.source();
    while let Some(cause) = next {
        all.push(cause.to_string());
        next = cause.source();
    }
    all.join(": ")
}
