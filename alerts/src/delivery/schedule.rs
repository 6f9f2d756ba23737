//! When a failed message is tried again: after 5 seconds, 5 minutes,
//! 30 minutes, 2, 5, 10 and 10 hours (eight attempts over 27 h 35 min),
//! each wait lengthened by up to a fifth at random so that endpoints that
//! failed together are not retried together. Jitter only lengthens, so the
//! first retry comes within 6 s and the attempts span at least 27 hours.

use std::time::Duration;

use rand::Rng;

const WAITS: [Duration; 7] = [
    Duration::from_secs(5),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(5 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
];

/// Attempts a message gets at most.
pub const ATTEMPTS: usize = WAITS.len() + 1;

/// The wait after the `attempts`-th failed attempt (1-based); `None`:
/// that was the last.
pub fn retry_after(attempts: u32) -> Option<Duration> {
    let wait = *WAITS.get((attempts as usize).checked_sub(1)?)?;
    let jitter = rand::thread_rng().gen_range(0.0..=0.2);
    Some(wait.mul_f64(1.0 + jitter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_retry_comes_within_ten_seconds() {
        for _ in 0..100 {
            let wait = retry_after(1).unwrap();
            assert!(wait >= Duration::from_secs(5) && wait <= Duration::from_secs(6));
        }
    }

    #[test]
    fn retries_span_at_least_a_day_then_stop() {
        let total: Duration = (1..ATTEMPTS as u32).map(|n| retry_after(n).unwrap()).sum();
        assert!(total >= Duration::from_secs(27 * 3600), "{total:?}");
        assert_eq!(retry_after(ATTEMPTS as u32), None);
        assert_eq!(retry_after(0), None);
    }
}
