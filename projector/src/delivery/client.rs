//! The HTTP client webhooks are delivered with: addresses checked after
//! every resolution (no internal address, whatever the name said when it
//! was registered), no redirects, no proxies from the environment,
//! bounded connect and total times, and at most 64 KB of any answer read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use ratewire_readmodel::alerts::AddressPolicy;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Connecting (TCP and TLS) may take this long.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A 2xx within this long counts as delivered.
pub const TOTAL_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer's body read (it is only kept for the last error).
pub const BODY_CAP: usize = 64 * 1024;
/// The most of an answer's body kept as the endpoint's last error.
const ERROR_EXCERPT: usize = 200;

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered { status: u16 },
    Failed { status: Option<u16>, error: String },
}

/// One request to send: the URL and the signed headers.
pub struct Request<'a> {
    pub url: &'a str,
    pub id: &'a str,
    pub timestamp: i64,
    pub signature: &'a str,
    pub body: &'a str,
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    policy: AddressPolicy,
}

impl Client {
    pub fn new(policy: AddressPolicy) -> Self {
        let http = reqwest::Client::builder()
            .dns_resolver(Arc::new(Guarded { policy }))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TOTAL_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(32)
            .user_agent(concat!("ratewire-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the webhook client's settings are valid");
        Self { http, policy }
    }

    pub async fn send(&self, request: Request<'_>) -> Outcome {
        let url = match ratewire_readmodel::alerts::address::parse(request.url) {
            Ok(url) => url,
            Err(e) => return failed(None, format!("the URL {e}")),
        };
        // The resolver is not asked for an address written in the URL.
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
            _ => None,
        };
        if let Some(ip) = literal {
            if let Err(refusal) = self.policy.check(ip) {
                return failed(None, format!("refused: {ip} is {refusal}"));
            }
        }
        let sent = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", request.id)
            .header("webhook-timestamp", request.timestamp.to_string())
            .header("webhook-signature", request.signature)
            .body(request.body.to_owned())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => return failed(None, describe(&e)),
        };
        let status = response.status();
        let body = read_capped(response).await;
        if status.is_success() {
            Outcome::Delivered {
                status: status.as_u16(),
            }
        } else if status.is_redirection() {
            failed(
                Some(status.as_u16()),
                format!("answered {status}; redirects are not followed"),
            )
        } else {
            let excerpt: String = String::from_utf8_lossy(&body)
                .chars()
                .take(ERROR_EXCERPT)
                .collect();
            failed(
                Some(status.as_u16()),
                format!("answered {status}: {}", excerpt.trim()),
            )
        }
    }
}

fn failed(status: Option<u16>, error: String) -> Outcome {
    Outcome::Failed { status, error }
}

/// Reads at most [`BODY_CAP`] bytes of the answer (within the total
/// timeout); the rest is never read.
async fn read_capped(response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        let room = BODY_CAP - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= BODY_CAP {
            break;
        }
    }
    body
}

/// The error in a line, with its cause (reqwest's own message hides it).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    let mut message = kind.to_owned();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        message = format!("{message}: {cause}");
        source = cause.source();
    }
    message
}

/// Resolves names and keeps only the addresses the policy admits.
struct Guarded {
    policy: AddressPolicy,
}

#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| policy.check(a.ip()).is_ok())
                .collect();
            if allowed.is_empty() {
                let refused = found
                    .first()
                    .map(|a| match policy.check(a.ip()) {
                        Err(refusal) => {
                            format!("refused: {host} resolves to {} ({refusal})", a.ip())
                        }
                        Ok(()) => unreachable!(),
                    })
                    .unwrap_or_else(|| format!("{host} has no address"));
                return Err(Box::new(Refused(refused)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}
