//! The alert receivers: one listener for the nemesis's webhooks that checks
//! each call's signature, keeps what it said, and answers 204 at once.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Router;
use ratewire_alerts::Secret;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::feed::receive::verified;

/// One call as received.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub at: Instant,
    /// `webhook-id`: the same on every attempt of one message.
    pub message_id: String,
    pub alert_id: String,
    pub event_id: String,
    pub kind: String,
    /// Why the signature did not hold, if it did not.
    pub refused: Option<String>,
}

pub type Deliveries = Arc<Mutex<Vec<Delivery>>>;

struct Receiving {
    secrets: Mutex<Vec<Secret>>,
    deliveries: Deliveries,
}

#[derive(Clone)]
pub struct Receiver {
    state: Arc<Receiving>,
    pub address: SocketAddr,
}

impl Receiver {
    pub async fn start(stop: CancellationToken) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let state = Arc::new(Receiving {
            secrets: Mutex::new(Vec::new()),
            deliveries: Arc::default(),
        });
        let app = Router::new()
            .fallback(receive)
            .with_state(Arc::clone(&state));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
        });
        Ok(Self { state, address })
    }

    /// A webhook's secret, to check its calls by.
    pub fn trust(&self, secret: Secret) {
        self.state.secrets.lock().expect("secrets").push(secret);
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.state.deliveries.lock().expect("deliveries").clone()
    }
}

async fn receive(
    State(state): State<Arc<Receiving>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let refused = verified(&state.secrets.lock().expect("secrets"), &headers, &body).err();
    let sent: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    state.deliveries.lock().expect("deliveries").push(Delivery {
        at: Instant::now(),
        message_id: headers
            .get("webhook-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        alert_id: text(&sent["data"]["alertId"]),
        event_id: text(&sent["data"]["eventId"]),
        kind: text(&sent["type"]),
        refused,
    });
    StatusCode::NO_CONTENT
}
