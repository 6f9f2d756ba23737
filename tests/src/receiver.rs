//! A webhook receiver on loopback: it records every request it gets and
//! answers with the statuses a test lines up (204 once they run out). It
//! can be stopped and started again on the same port, standing in for a
//! receiver that is down.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Router;
use tokio_util::sync::CancellationToken;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The `webhook-id`.
    pub fn id(&self) -> &str {
        self.header("webhook-id")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }
}

#[derive(Default)]
struct Shared {
    received: Vec<Received>,
    answers: VecDeque<u16>,
    delay: Option<Duration>,
}

pub struct Receiver {
    pub port: u16,
    shared: Arc<Mutex<Shared>>,
    running: Option<CancellationToken>,
}

fn is_in_use(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::AddrInUse)
}

impl Receiver {
    pub async fn start() -> Result<Receiver> {
        let mut receiver = Receiver {
            port: crate::free_port(),
            shared: Arc::default(),
            running: None,
        };
        // A port found free can be taken by another test's process before
        // it is bound here: take another then.
        for _ in 0..5 {
            match receiver.up().await {
                Err(e) if is_in_use(&e) => receiver.port = crate::free_port(),
                done => return done.map(|()| receiver),
            }
        }
        receiver.up().await?;
        Ok(receiver)
    }

    /// Where webhooks reach it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks", self.port)
    }

    /// Listens (again) on its port.
    pub async fn up(&mut self) -> Result<()> {
        let listener =
            tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], self.port))).await?;
        let stop = CancellationToken::new();
        let app = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&self.shared));
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { until.cancelled().await })
                .await;
        });
        self.running = Some(stop);
        Ok(())
    }

    /// Stops listening: connections are refused.
    pub async fn down(&mut self) {
        if let Some(stop) = self.running.take() {
            stop.cancel();
        }
        // The listener closes once the server task sees the cancellation.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    /// The statuses the next requests get, in order.
    pub fn answer_next(&self, statuses: &[u16]) {
        self.shared.lock().unwrap().answers.extend(statuses);
    }

    /// Every answer waits this long first.
    pub fn delay(&self, delay: Option<Duration>) {
        self.shared.lock().unwrap().delay = delay;
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().unwrap().received.clone()
    }

    /// Waits until it has received `count` requests (at least); them all.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Result<Vec<Received>> {
        crate::eventually(&format!("{count} webhook requests"), timeout, || async {
            let received = self.received();
            (received.len() >= count).then_some(received)
        })
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(stop) = self.running.take() {
            stop.cancel();
        }
    }
}

async fn answer(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let (status, delay) = {
        let mut shared = shared.lock().unwrap();
        shared.received.push(Received {
            headers,
            body,
            at: Instant::now(),
        });
        (shared.answers.pop_front().unwrap_or(204), shared.delay)
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    StatusCode::from_u16(status).unwrap_or(StatusCode::NO_CONTENT)
}

/// The `webhook-id` of the call a crossing of `alert` by the board `event`
/// makes: derived from both, so a retry or a replay carries the same id.
pub fn crossing_id(alert: &str, event: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{alert}:{event}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("msg_{}", &hex[..32])
}
