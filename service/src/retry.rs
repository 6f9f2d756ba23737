//! Waiting for a dependency: the same back-off in every process, so a
//! Postgres or broker outage is logged alike and recovered from by itself.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Runs `attempt` until it succeeds, backing off from 100 ms to 5 s between
/// failures and logging each; `None` when `shutdown` comes first.
pub async fn retry<T, E, F, Fut>(
    what: &str,
    shutdown: &CancellationToken,
    mut attempt: F,
) -> Option<T>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut delay = Duration::from_millis(100);
    loop {
        match attempt().await {
            Ok(value) => return Some(value),
            Err(e) => warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "{what} failed"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn retry_keeps_trying_until_success() {
        let calls = AtomicU32::new(0);
        let shutdown = CancellationToken::new();
        let value = retry("test", &shutdown, || async {
            match calls.fetch_add(1, Ordering::Relaxed) {
                0..=2 => Err("not yet"),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(value, Some(3));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_gives_up_on_shutdown() {
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let value: Option<()> = retry("test", &shutdown, || async { Err("down") }).await;
        assert_eq!(value, None);
    }
}
