//! Background housekeeping: a job run every so often until shutdown, each
//! failure logged and retried at the next tick.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Runs `job` now and then every `interval` until `shutdown`; a failure is
/// logged as "`what` failed" and the job runs again at the next tick.
pub async fn every<E, F, Fut>(
    what: &str,
    interval: Duration,
    shutdown: CancellationToken,
    mut job: F,
) where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut tick = tokio::time::interval(interval);
    // A slow run must not be followed by a burst of missed ones.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = job().await {
            warn!(error = %e, "{what} failed; will retry");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn a_job_runs_each_interval_through_failures_until_shutdown() {
        let runs = Arc::new(AtomicU32::new(0));
        let shutdown = CancellationToken::new();
        let counted = Arc::clone(&runs);
        let task = tokio::spawn(every(
            "test",
            Duration::from_secs(10),
            shutdown.clone(),
            move || {
                let n = counted.fetch_add(1, Ordering::Relaxed);
                async move {
                    if n % 2 == 0 {
                        Err("odd one out")
                    } else {
                        Ok(())
                    }
                }
            },
        ));
        tokio::time::sleep(Duration::from_secs(35)).await;
        shutdown.cancel();
        task.await.unwrap();
        assert_eq!(runs.load(Ordering::Relaxed), 4, "at 0, 10, 20 and 30 s");
    }
}
