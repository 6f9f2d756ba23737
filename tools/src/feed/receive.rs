//! `ratewire-feed receive`: a webhook receiver for trying alerts on one
//! machine. It checks each call's Standard Webhooks signature against the
//! secrets given (and that its timestamp is within five minutes), prints
//! one JSON line per call, and answers 204, or 401 when the signature does
//! not hold. The benchmark counts deliveries with it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Router;
use ratewire_alerts::Secret;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

/// How far a call's timestamp may be from now.
const TOLERANCE_SECS: i64 = 5 * 60;

/// What a receiver has taken so far.
#[derive(Default)]
pub struct Tally {
    pub verified: AtomicU64,
    pub refused: AtomicU64,
    /// When the last verified call arrived.
    pub last: Mutex<Option<Instant>>,
    /// When the first verified call arrived (since it was last cleared).
    pub first: Mutex<Option<Instant>>,
}

struct Receiving {
    secrets: Vec<Secret>,
    tally: Arc<Tally>,
    print: bool,
}

/// Serves on `listen` until `shutdown`; `print`: a line per call on
/// standard output.
pub async fn serve(
    listen: SocketAddr,
    secrets: Vec<Secret>,
    print: bool,
    shutdown: CancellationToken,
) -> anyhow::Result<Arc<Tally>> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let tally = Arc::new(Tally::default());
    let state = Arc::new(Receiving {
        secrets,
        tally: Arc::clone(&tally),
        print,
    });
    let app = Router::new().fallback(receive).with_state(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
    });
    Ok(tally)
}

/// Whether `headers` carry a signature of `body` by one of `secrets`, made
/// within the tolerance of now.
pub fn verified(secrets: &[Secret], headers: &HeaderMap, body: &[u8]) -> Result<(), String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| format!("no {name} header"))
    };
    let id = header("webhook-id")?;
    let timestamp: i64 = header("webhook-timestamp")?
        .parse()
        .map_err(|_| "webhook-timestamp is not a number".to_string())?;
    if (chrono::Utc::now().timestamp() - timestamp).abs() > TOLERANCE_SECS {
        return Err("webhook-timestamp is more than five minutes away".into());
    }
    let given: Vec<&str> = header("webhook-signature")?.split(' ').collect();
    let matches = secrets.iter().any(|secret| {
        let expected = secret.sign(id, timestamp, body);
        given
            .iter()
            .any(|g| constant_time_eq(g.as_bytes(), expected.as_bytes()))
    });
    if matches {
        Ok(())
    } else {
        Err("no signature matches the secrets given".into())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The parts of a call's body that are printed, kept as sent.
#[derive(Debug, Default, serde::Deserialize)]
struct Body {
    #[serde(rename = "type")]
    kind: Option<Box<RawValue>>,
    data: Option<Box<RawValue>>,
}

/// One received call as printed: the message id (the `webhook-id` header,
/// the same on every attempt of one message), whether it verified, and the
/// body's type and data.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Printed<'a> {
    message_id: Option<&'a str>,
    verified: bool,
    problem: Option<&'a str>,
    #[serde(rename = "type")]
    kind: Option<Box<RawValue>>,
    data: Option<Box<RawValue>>,
}

async fn receive(
    State(state): State<Arc<Receiving>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let check = verified(&state.secrets, &headers, &body);
    if state.print {
        let sent: Body = serde_json::from_slice(&body).unwrap_or_default();
        let line = Printed {
            message_id: headers.get("webhook-id").and_then(|v| v.to_str().ok()),
            verified: check.is_ok(),
            problem: check.as_ref().err().map(String::as_str),
            kind: sent.kind,
            data: sent.data,
        };
        println!("{}", serde_json::to_string(&line).unwrap_or_default());
    }
    match check {
        Ok(()) => {
            state.tally.verified.fetch_add(1, Ordering::Relaxed);
            let now = Instant::now();
            *state.tally.last.lock().expect("tally lock") = Some(now);
            state
                .tally
                .first
                .lock()
                .expect("tally lock")
                .get_or_insert(now);
            StatusCode::NO_CONTENT
        }
        Err(_) => {
            state.tally.refused.fetch_add(1, Ordering::Relaxed);
            StatusCode::UNAUTHORIZED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_only_for_its_secret_body_and_time() {
        let secret = Secret::generate();
        let now = chrono::Utc::now().timestamp();
        let body = br#"{"type":"webhook.test"}"#;
        let headers = |timestamp: i64, signature: String| {
            let mut h = HeaderMap::new();
            h.insert("webhook-id", "msg_1".parse().unwrap());
            h.insert("webhook-timestamp", timestamp.to_string().parse().unwrap());
            h.insert("webhook-signature", signature.parse().unwrap());
            h
        };
        let good = headers(now, secret.sign("msg_1", now, body));
        assert!(verified(std::slice::from_ref(&secret), &good, body).is_ok());
        assert!(verified(std::slice::from_ref(&secret), &good, b"{}").is_err());
        assert!(verified(&[Secret::generate()], &good, body).is_err());
        let old = now - 600;
        let stale = headers(old, secret.sign("msg_1", old, body));
        assert!(verified(&[secret], &stale, body).is_err());
    }
}
