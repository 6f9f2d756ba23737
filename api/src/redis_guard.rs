//! Redis on the request path, never waited on for long.
//!
//! Every call a request makes (the limiter's round trip, the key cache, a
//! view) gets a budget (`RATEWIRE_REDIS_BUDGET_MS`). The first failure or
//! overrun opens a breaker: from then on no request touches Redis. The
//! limiter decides in this process, views come from Postgres, keys from
//! this process's memory and Postgres. Meanwhile a probe pings Redis a few
//! times a second and closes the breaker once it answers within the budget.
//! Then the counts taken meanwhile are added to Redis (see the limiter).
//!
//! A Redis that refuses connections fails fast anyway; this is what keeps
//! the API answering when Redis hangs (accepts connections and never
//! answers: a stopped process, a full network buffer) or slows down. Each
//! change of state is logged once, shown on `/readyz` (`degraded`) and in
//! `ratewire_api_redis_breaker_open`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ratewire_readmodel::redis::Connection;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How often the probe pings while the breaker is open.
const PROBE_OPEN: Duration = Duration::from_millis(200);
/// How often it pings while the breaker is closed (so a Redis that hangs
/// with no request under way is noticed too).
const PROBE_CLOSED: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct RedisGuard(Arc<Inner>);

struct Inner {
    conn: Connection,
    budget: Duration,
    open: AtomicBool,
    /// How many times the breaker opened since start.
    outages: AtomicU64,
    /// Wakes the probe when a request opens the breaker.
    opened: Notify,
    /// Woken each time the breaker closes.
    closed: Notify,
}

/// Redis was not asked, or did not answer within the budget.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unavailable {
    #[error("redis is unavailable (the breaker is open)")]
    Open,
    #[error("redis did not answer within {0:?}")]
    TimedOut(Duration),
    #[error("redis: {0}")]
    Failed(String),
}

impl RedisGuard {
    pub fn new(conn: Connection, budget: Duration) -> Self {
        metrics::gauge!("ratewire_api_redis_breaker_open").set(0.0);
        Self(Arc::new(Inner {
            conn,
            budget,
            open: AtomicBool::new(false),
            outages: AtomicU64::new(0),
            opened: Notify::new(),
            closed: Notify::new(),
        }))
    }

    /// A connection for calls off the request path (background tasks).
    pub fn conn(&self) -> Connection {
        self.0.conn.clone()
    }

    pub fn budget(&self) -> Duration {
        self.0.budget
    }

    pub fn is_open(&self) -> bool {
        self.0.open.load(Ordering::Acquire)
    }

    /// Which outage this is: the number of times the breaker opened.
    pub fn outage(&self) -> u64 {
        self.0.outages.load(Ordering::Acquire)
    }

    /// Runs `call` (made with this guard's connection) within the budget,
    /// unless the breaker is open; a failure or an overrun opens it.
    pub async fn call<T, F, Fut>(&self, what: &'static str, call: F) -> Result<T, Unavailable>
    where
        F: FnOnce(Connection) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        if self.is_open() {
            return Err(Unavailable::Open);
        }
        match tokio::time::timeout(self.0.budget, call(self.0.conn.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                self.trip(what, &e.to_string());
                Err(Unavailable::Failed(e.to_string()))
            }
            Err(_) => {
                self.trip(what, "no answer within the budget");
                Err(Unavailable::TimedOut(self.0.budget))
            }
        }
    }

    /// Opens the breaker (once: later failures change nothing).
    pub fn trip(&self, what: &str, cause: &str) {
        if !self.0.open.swap(true, Ordering::AcqRel) {
            self.0.outages.fetch_add(1, Ordering::AcqRel);
            metrics::gauge!("ratewire_api_redis_breaker_open").set(1.0);
            metrics::counter!("ratewire_api_redis_breaker_opened_total").increment(1);
            warn!(what, cause, "redis unavailable; deciding limits in this process and serving views from postgres until it answers again");
            self.0.opened.notify_one();
        }
    }

    /// Resolves the next time the breaker closes.
    pub async fn closed(&self) {
        self.0.closed.notified().await
    }

    /// The probe: pings Redis until shutdown, closing the breaker when it
    /// answers within the budget and opening it when it does not.
    pub async fn watch(self, shutdown: CancellationToken) {
        loop {
            let wait = if self.is_open() {
                PROBE_OPEN
            } else {
                PROBE_CLOSED
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
                _ = self.0.opened.notified() => {}
            }
            let mut conn = self.0.conn.clone();
            let cmd = redis::cmd("PING");
            let ping = cmd.query_async::<String>(&mut conn);
            let answered = matches!(tokio::time::timeout(self.0.budget, ping).await, Ok(Ok(_)));
            match (answered, self.is_open()) {
                (true, true) => {
                    // A Redis that came back older than we support is no
                    // Redis to count in.
                    if let Err(e) = ratewire_readmodel::redis::require_version(conn).await {
                        warn!(error = %e, "redis answered a ping but not INFO; staying local");
                        continue;
                    }
                    self.0.open.store(false, Ordering::Release);
                    metrics::gauge!("ratewire_api_redis_breaker_open").set(0.0);
                    info!("redis answers again; counting shared limits in redis");
                    self.0.closed.notify_waiters();
                }
                (false, false) => self.trip("health probe", "no answer to PING within the budget"),
                _ => {}
            }
        }
    }
}
